"""Probe recipes for an Oracle server process (12.1-19, Linux x86-64, no DWARF: registers only).

Every register below comes from seed 003 (Frits Hoogland's pin debugtrace and
gdb/systemtap sessions on 12.1.0.2 and 12.2), which shows the first two
arguments of each call:

- ``_intel_fast_memcpy(dest=rdi, src=rsi, size=rdx)``: with size 8192 it
  copies blocks from the table-scan read buffer into buffer cache buffers
  (still encrypted on both sides for a TDE tablespace).
- ``kcbzvb(buffer=rdi, tsn=rsi)`` verifies the just-read buffer; it is called
  right before ``kcbztek_trace_blk`` and ``kcbz_encdec_tbsblk``, with the
  block still encrypted in its buffer.
- ``kcbztek_trace_blk(0xd5e15b8, 0)``: its first argument is NOT the buffer
  (an address in the binary's data), so it cannot be captured from registers;
  Hoogland took the buffer from the preceding 8192-byte memcpy instead. It is
  offered only as a marker (the hit and its time).
- ``kcbz_encdec_tbsblk(5, 0x38b)``: tablespace number and block number
  (block 907 of the seed), the buffer is in a later argument the seed does
  not show; offered as a marker carrying the block number.
- ``kcbchk_ctx(buffer=rdi, 0)``: checks the block after decryption, so its
  first argument is the decrypted buffer.
- ``kgce_dec``: decrypts into PGA (the next memcpy copies from a PGA address
  to buffer+0x14). The seed shows neither its arguments nor its length; the
  recipe ASSUMES ``kgce_dec(ctx=rdi, in=rsi, len=rdx, out=rcx)``, the layout
  of most cipher-update calls. Unverified on a real oracle binary.
- ``kskthbwt`` (wait begin) has the event number in rdx, ``kskthewt`` (wait
  end) in rsi; 'PGA memory operation' was event# 524 on 12.2 (it differs
  between versions: read V$EVENT_NAME.EVENT#). Marker recipes, pgno = event#.

Block captures are 8192 bytes (db_block_size; change ``block_size`` for 16K
databases), bounded like every capture window.
"""

from __future__ import annotations

from tdescope.app.engines.api import ArgRef, Constant, ProbeRecipe, Read, Register

__all__ = ["BLOCK_SIZE_SQL", "block_recipes", "fit_block_recipe", "oracle_recipes", "wait_recipes",
           "PGA_MEMORY_OPERATION_122"]

#: V$EVENT_NAME.EVENT# of 'PGA memory operation' on the 12.2 instance of seed 003.
PGA_MEMORY_OPERATION_122 = 524

_RDI, _RSI, _RDX, _RCX = (Read(Register(r)) for r in ("rdi", "rsi", "rdx", "rcx"))
_RSP = Read(Register("rsp"))  # markers copy 0 bytes from a readable address


def block_recipes(block_size: int = 8192) -> list[ProbeRecipe]:
    """Recipes that copy data blocks (encrypted, decrypted, or both sides of a call)."""
    size = Constant(block_size)
    return [
        ProbeRecipe(
            key="oracle.block_decrypted",
            label="Block after TDE decryption (kcbchk_ctx, buffer in rdi)",
            symbols=("kcbchk_ctx",), before=_RDI, length=size, direction="decrypt",
            max_length=block_size,
        ),
        ProbeRecipe(
            key="oracle.block_encrypted",
            label="Block read, before TDE decryption (kcbzvb, buffer in rdi)",
            symbols=("kcbzvb",), before=_RDI, length=size, direction="decrypt",
            max_length=block_size,
            # every block read passes here, TDE tablespace or not: a plain tablespace's block is plaintext
            plaintext_side="before",
        ),
        ProbeRecipe(
            key="oracle.block_copy",
            label=f"Block copied into the buffer cache (_intel_fast_memcpy, size {block_size})",
            symbols=("_intel_fast_memcpy",), before=_RSI, after=_RDI, length=_RDX,
            condition=(_RDX, block_size), direction="copy", max_length=block_size,
        ),
        ProbeRecipe(
            key="oracle.kgce_dec",
            label="kgce_dec in/out (ASSUMED registers: in rsi, len rdx, out rcx)",
            symbols=("kgce_dec",), before=_RSI, after=_RCX, length=_RDX, direction="decrypt",
            max_length=block_size,
        ),
    ]


#: The instance's block size (V$PARAMETER is readable with SELECT_CATALOG_ROLE): what a block recipe copies.
BLOCK_SIZE_SQL = "SELECT value FROM v$parameter WHERE name = 'db_block_size'"


def fit_block_recipe(recipe: ProbeRecipe, block_size: int) -> ProbeRecipe:
    """``recipe`` sized for ``block_size`` (db_block_size: 2K to 32K) when it is one of the block recipes,
    which copy a whole block the call gives no length for; any other recipe unchanged."""
    if not 2048 <= block_size <= 32768 or block_size & (block_size - 1):
        raise ValueError(f"db_block_size {block_size} is not a power of two between 2048 and 32768")
    return next((r for r in block_recipes(block_size) if r.key == recipe.key), recipe)


def wait_recipes(event_number: int | None = PGA_MEMORY_OPERATION_122) -> list[ProbeRecipe]:
    """Markers: wait begin/end (event# as pgno) and the TDE block path entries, no bytes copied.

    ``event_number`` None catches every wait (busy: thousands per second).
    """
    empty = Constant(0)

    def cond(reg: ArgRef):
        return None if event_number is None else (reg, int(event_number))

    return [
        ProbeRecipe(key="oracle.wait_begin", label="Wait begins (kskthbwt, event# in rdx)",
                    symbols=("kskthbwt",), before=_RSP, length=empty, pgno=_RDX, condition=cond(_RDX),
                    direction="wait"),
        ProbeRecipe(key="oracle.wait_end", label="Wait ends (kskthewt, event# in rsi)",
                    symbols=("kskthewt",), before=_RSP, length=empty, pgno=_RSI, condition=cond(_RSI),
                    direction="wait"),
        ProbeRecipe(key="oracle.tbsblk_decrypt_call", label="Tablespace block decrypt call "
                    "(kcbz_encdec_tbsblk, block# in rsi)", symbols=("kcbz_encdec_tbsblk",),
                    before=_RSP, length=empty, pgno=_RSI, direction="marker"),
        ProbeRecipe(key="oracle.encryption_check", label="Encryption check of a read block (kcbztek_trace_blk)",
                    symbols=("kcbztek_trace_blk",), before=_RSP, length=empty, direction="marker"),
    ]


def oracle_recipes(block_size: int = 8192) -> list[ProbeRecipe]:
    """Every Oracle recipe; the first is the default (the decrypted block)."""
    return block_recipes(block_size) + wait_recipes()
