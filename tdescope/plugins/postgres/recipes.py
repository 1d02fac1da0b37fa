"""Where decryption and page reads happen inside a PostgreSQL backend. Data, not code.

Debian's PostgreSQL 15 and pgcrypto carry no DWARF, so arguments are read from
the x86-64 SysV registers at the function's first instruction (the capture
machinery breaks at ``*symbol`` when every reference is a register).
"""

from __future__ import annotations

from tdescope.app.engines.api import Constant, Deref, ProbeRecipe, Read, Register
from tdescope.app.events import ContextKind

__all__ = ["PGP_DECRYPT", "EVP_DECRYPT", "PAGE_READ", "RECIPES"]

#: ``struct PGP_CFB`` (pgp-cfb.c): ``ciph`` pointer, then int ``block_size``, ``pos``, ``block_no`` at byte 16.
_CFB_BLOCK_NO = 16

#: pgcrypto's PGP CFB decrypt, pgp_cfb_decrypt(ctx, data, len, dst): ciphertext in, plaintext out, in chunks
#: (the 18-byte prefix, each packet header byte, the data): ``block_no`` is 0 only on a message's first call,
#: so the window joins each message's chunks into one capture. pgcrypto.so loads on a backend's first
#: pgcrypto call, so the probe may wait for the library.
PGP_DECRYPT = ProbeRecipe(
    key="postgres.pgp-decrypt",
    label="pgcrypto PGP decrypt (pgp_cfb_decrypt)",
    symbols=("pgp_cfb_decrypt",),
    before=Read(Register("rsi")),
    length=Read(Register("rdx")),
    after=Read(Register("rcx")),
    direction="decrypt",
    library="pgcrypto",
    requires="pgcrypto",
    context=Read(Register("rdi"), Deref(_CFB_BLOCK_NO, width=4)),
    context_kind=ContextKind.CIPHER_BLOCK.value,
)

#: decrypt()/decrypt_iv() go to OpenSSL: EVP_DecryptUpdate(ctx, out, outl, in, inl).
EVP_DECRYPT = ProbeRecipe(
    key="postgres.evp-decrypt",
    label="pgcrypto raw decrypt (EVP_DecryptUpdate in libcrypto)",
    symbols=("EVP_DecryptUpdate",),
    before=Read(Register("rcx")),
    length=Read(Register("r8")),
    after=Read(Register("rsi")),
    direction="decrypt",
    library="libcrypto",
)

#: mdread(reln, forknum, blocknum, buffer): the 8 KB block as it came from disk, main fork only. ``reln``
#: points to SMgrRelationData, whose first member (RelFileNodeBackend in 15, RelFileLocatorBackend in 16
#: and 17) starts with three OIDs: tablespace, database, then the relfilenode at byte 8.
PAGE_READ = ProbeRecipe(
    key="postgres.page-read",
    label="Page read from disk (mdread, 8 KB)",
    symbols=("mdread",),
    before=Read(Register("rcx")),
    length=Constant(8192),
    after=Read(Register("rcx")),
    pgno=Read(Register("rdx")),
    condition=(Read(Register("rsi")), 0),
    direction="read",
    context=Read(Register("rdi"), Deref(8, width=4)),
    context_kind=ContextKind.RELFILENODE.value,
)

RECIPES = (PGP_DECRYPT, EVP_DECRYPT, PAGE_READ)
