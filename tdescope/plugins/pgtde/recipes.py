"""Where pg_tde decrypts inside a PostgreSQL backend. Data, not code.

pg_tde 1.0.0-beta2 (``tde_heap_basic``) encrypts each tuple's data and keeps
pages encrypted in shared buffers, so every tuple fetch decrypts:
``void pg_tde_crypt_tuple(HeapTuple tuple, HeapTuple out_tuple, RelKeyData
*key, const char *context)``, a local symbol of ``pg_tde.so``. ``rdi`` and
``rsi`` point to ``HeapTupleData`` (x86-64): ``t_len`` (uint32) at 0,
``t_self`` (``BlockIdData`` then the line pointer number) at 4,
``t_tableOid`` at 12, ``t_data`` (the tuple header and data) at 16. The
input's ``t_data`` is the tuple where it sits in the shared buffer page, the
output's a copy the caller prepared (header already copied): ciphertext before,
the row after, both ``t_len`` bytes from the tuple header on.

Page-level pg_tde 2.x / open_pg_tde decrypts whole blocks in place:
``void tde_decrypt_smgr_block(InternalKey *rel_key, ForkNumber forknum,
BlockNumber blocknum, const unsigned char *in, unsigned char *out)``,
exported. Facts: ``../shared/research/postgres-tde.md``; that recipe is
unverified on a real server (none can be built here).
"""

from __future__ import annotations

from tdescope.app.engines.api import Constant, Deref, ProbeRecipe, Read, Register
from tdescope.app.events import ContextKind

__all__ = ["BLOCK_DECRYPT", "RECIPES", "TUPLE_DECRYPT"]

_T_LEN, _T_SELF, _T_TABLE_OID, _T_DATA = 0, 4, 12, 16
#: The first four bytes of every decrypt call's context string, "DECRYPT-TUPLE…", as the C int the condition reads.
_DECRYPT_CONTEXT = int.from_bytes(b"DECR", "little")

TUPLE_DECRYPT = ProbeRecipe(
    key="pg_tde.tuple-decrypt",
    label="pg_tde tuple decrypt (pg_tde_crypt_tuple, tde_heap_basic)",
    symbols=("pg_tde_crypt_tuple",),
    before=Read(Register("rdi"), Deref(_T_DATA)),
    length=Read(Register("rdi"), Deref(_T_LEN, width=4)),
    after=Read(Register("rsi"), Deref(_T_DATA)),
    pgno=Read(Register("rdi"), Deref(_T_SELF, width=4, block_id=True)),
    condition=(Read(Register("rcx"), Deref(0, width=4)), _DECRYPT_CONTEXT),
    direction="decrypt",
    library="pg_tde",
    max_length=8192,
    requires="pg_tde",
    context=Read(Register("rdi"), Deref(_T_TABLE_OID, width=4)),
    context_kind=ContextKind.RELATION.value,
)

#: Unverified on a real server. In place (``in == out``: the shared buffer), BLCKSZ bytes; the fork
#: (``esi``) must be the main fork. On PostgreSQL 18 with ``io_method=worker`` (its default) this runs in
#: the "io worker" processes, not the backend: probe those (or set ``io_method=sync``).
BLOCK_DECRYPT = ProbeRecipe(
    key="pg_tde.block-decrypt",
    label="pg_tde page decrypt (tde_decrypt_smgr_block, pg_tde 2.x / open_pg_tde; unverified)",
    symbols=("tde_decrypt_smgr_block",),
    before=Read(Register("rcx")),
    length=Constant(8192),
    after=Read(Register("r8")),
    pgno=Read(Register("rdx")),
    condition=(Read(Register("rsi")), 0),
    direction="decrypt",
    library="pg_tde",
    max_length=8192,
    requires="pg_tde",
)

RECIPES = (TUPLE_DECRYPT, BLOCK_DECRYPT)
