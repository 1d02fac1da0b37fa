"""Where a MariaDB server decrypts and encrypts InnoDB pages, as probe recipes.

``encryption_scheme_decrypt(src, slen, dst, dlen, scheme, key_version, space, page, lsn)``
and its ``_encrypt`` twin are exported by ``mariadbd`` (its only symbols are in
``.dynsym``: the build is stripped). At the first instruction: rdi = src, esi =
slen, rdx = dst, [rsp+8] = space id, [rsp+16] = page number. For a page, src and
dst point 26 bytes into it (the FIL header's first 26 bytes stay clear) and slen
covers the encrypted range, which ends 4 bytes before the page (full_crc32, the
default since 10.5: a clear CRC-32C). So the whole page is src - 26 .. src + slen + 4:
its length comes from the call, never from a constant, and is right for every
``innodb_page_size`` (4 to 64 KiB). Pages in the old format (src = page + 38,
an 8-byte clear trailer) are read 12 bytes short at the front and 4 at the back:
never past the buffer. ``EVP_CipherUpdate`` in libcrypto is the fallback for
builds without the scheme functions: one call per page with the encrypted range
only (its length argument), no page number.
Facts: ``../shared/research/mariadb-tde.md``.
"""

from __future__ import annotations

from tdescope.app.engines.api import ProbeRecipe, Read, Register, StackSlot

__all__ = ["ENCRYPTED_TABLESPACES", "MAX_PAGE", "PAGE_HEADER_CLEAR", "PAGE_TRAILER_CLEAR", "recipes"]

#: What the page recipes require of the server (``MariaDbSession.require_extension``).
ENCRYPTED_TABLESPACES = "encrypted tablespaces"
#: Bytes at the start of a page that encryption leaves clear (full_crc32 and the old format alike).
PAGE_HEADER_CLEAR = 26
#: Bytes at the end of a full_crc32 page that encryption leaves clear (its CRC-32C).
PAGE_TRAILER_CLEAR = 4
#: InnoDB's largest page (``innodb_page_size`` = 64k): a bound on a copy, never its length.
MAX_PAGE = 65536
_PAGE = Read(StackSlot(16))  # [rsp+8] holds the space id; the decrypted page says it too (FIL header)


def recipes() -> list[ProbeRecipe]:
    """Decrypt (the default), encrypt, and the libcrypto-level fallback; every length from the call."""
    whole = Read(Register("rsi"), offset=PAGE_HEADER_CLEAR + PAGE_TRAILER_CLEAR)  # slen + the clear bytes
    src, dst = Read(Register("rdi"), offset=-PAGE_HEADER_CLEAR), Read(Register("rdx"), offset=-PAGE_HEADER_CLEAR)
    return [
        ProbeRecipe(key="mariadb.page_decrypt", label="InnoDB page decrypted on read (encryption_scheme_decrypt)",
                    symbols=("encryption_scheme_decrypt",), before=src, after=dst, length=whole, pgno=_PAGE,
                    direction="decrypt", max_length=MAX_PAGE, requires=ENCRYPTED_TABLESPACES),
        ProbeRecipe(key="mariadb.page_encrypt", label="InnoDB page encrypted on write (encryption_scheme_encrypt)",
                    symbols=("encryption_scheme_encrypt",), before=src, after=dst, length=whole, pgno=_PAGE,
                    direction="encrypt", max_length=MAX_PAGE, requires=ENCRYPTED_TABLESPACES),
        ProbeRecipe(key="mariadb.evp_cipher", label="Cipher call in libcrypto (EVP_CipherUpdate: encrypted range only)",
                    symbols=("EVP_CipherUpdate",), before=Read(Register("rcx")), after=Read(Register("rsi")),
                    length=Read(Register("r8")), direction="decrypt", library="libcrypto", max_length=MAX_PAGE,
                    plaintext_side="both"),  # the same call encrypts on writes
    ]
