"""The typed records of an Oracle block dump: cache header, block header, ITL, directories, rows.

Plain frozen dataclasses filled in by :mod:`tdescope.plugins.oracle._dump_grammar`
and returned by :mod:`tdescope.plugins.oracle.blockdump`, which re-exports them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

__all__ = [
    "BlockDump",
    "DataHeader",
    "DumpBlockHeader",
    "DumpCacheHeader",
    "DumpColumn",
    "DumpRow",
    "ItlEntry",
    "RowDirEntry",
    "TableDirEntry",
    "scn_value",
]


def scn_value(text: str) -> int:
    """An SCN as dumps print it, to an integer.

    ``0x0000.004e9af4`` and ``0x0.4e9af4`` are wrap.base (11g/12.1);
    ``0x00000000004e9af4`` is the whole SCN (12.2+).
    """
    text = text.lower().removeprefix("0x")
    if "." in text:
        wrap, base = text.split(".", 1)
        return (int(wrap or "0", 16) << 32) | int(base or "0", 16)
    return int(text, 16)


@dataclass(frozen=True, slots=True)
class DumpCacheHeader:
    """``buffer tsn: 5 rdba: 0x0000038b (1024/907)`` and the two lines after it."""

    tsn: int | None
    rdba: int
    rfile: int
    block: int
    scn: int | None = None
    seq: int | None = None
    flg: int | None = None
    tail: int | None = None
    frmt: int | None = None
    chkval: int | None = None
    type: int | None = None
    type_name: str = ""


@dataclass(frozen=True, slots=True)
class ItlEntry:
    """One row of the ITL table (``Itl Xid Uba Flag Lck Scn/Fsc``)."""

    itl: int
    xid: str
    uba: str
    flag: str
    lck: int
    scn_kind: str  # "fsc", "scn" or "" when the dump prints neither word
    scn_fsc: str


@dataclass(frozen=True, slots=True)
class DumpBlockHeader:
    """``Block header dump:`` and its seg/obj, brn, inc lines, with the ITLs."""

    dba: int
    object_id_on_block: bool | None = None
    seg_obj: int | None = None
    csc: int | None = None
    itc: int | None = None
    flg: str = ""
    typ: int | None = None
    typ_name: str = ""
    brn: int | None = None
    bdba: int | None = None
    ver: int | None = None
    opc: int | None = None
    inc: int | None = None
    exflg: int | None = None
    itl: tuple[ItlEntry, ...] = ()


@dataclass(frozen=True, slots=True)
class DataHeader:
    """``data_block_dump,data header at ...`` and its fields (offsets relative to it)."""

    address: int | None = None
    tsiz: int | None = None
    hsiz: int | None = None
    pbl: int | None = None
    flag: str = ""
    ntab: int | None = None
    nrow: int | None = None
    frre: int | None = None
    fsbo: int | None = None
    fseo: int | None = None
    avsp: int | None = None
    tosp: int | None = None


@dataclass(frozen=True, slots=True)
class TableDirEntry:
    """``0xe:pti[0]      nrow=1  offs=0``."""

    table: int
    nrow: int
    offs: int
    header_offset: int


@dataclass(frozen=True, slots=True)
class RowDirEntry:
    """``0x12:pri[0]     offs=0x1f8a``; ``offs`` is None for free entries (``sfll=``)."""

    index: int
    offs: int | None
    header_offset: int
    sfll: int | None = None


@dataclass(frozen=True, slots=True)
class DumpColumn:
    """``col  0: [ 2]  c1 02``; ``data`` is None for ``*NULL*``."""

    index: int
    length: int
    data: bytes | None


@dataclass(frozen=True, slots=True)
class DumpRow:
    """``tab 0, row 0, @0x1f8a`` with its ``tl: fb: lb: cc:`` line and columns."""

    table: int
    row: int
    offset: int
    tl: int | None = None
    fb: str = ""
    lb: int | None = None
    cc: int | None = None
    columns: tuple[DumpColumn, ...] = ()

    @property
    def deleted(self) -> bool:
        return len(self.fb) == 8 and self.fb[3] == "D"


@dataclass(frozen=True, slots=True)
class BlockDump:
    """One block of a dump trace.

    Attributes
    ----------
    cache : DumpCacheHeader or None
    header : DumpBlockHeader or None
    data_header : DataHeader or None
    table_dir, row_dir, rows : tuples
    memory : bytes or None
        The block bytes from ``Dump of memory from A to B``, when present.
    memory_address : int or None
        Address A of that hex dump.
    encrypted_header_only : bool
        Oracle refused to dump the body of an encrypted block (set
        ``_sga_clear_dump`` to see it decrypted, as seed 003 shows).
    complete : bool
        ``end_of_block_dump`` was seen.
    problems : tuple of str
        Lines that belonged to this block but did not parse, and other doubts.
    first_line : int
        1-based line number where the block starts.
    """

    cache: DumpCacheHeader | None = None
    header: DumpBlockHeader | None = None
    data_header: DataHeader | None = None
    table_dir: tuple[TableDirEntry, ...] = ()
    row_dir: tuple[RowDirEntry, ...] = ()
    rows: tuple[DumpRow, ...] = ()
    memory: bytes | None = None
    memory_address: int | None = None
    encrypted_header_only: bool = False
    complete: bool = False
    problems: tuple[str, ...] = ()
    first_line: int = 0

    def to_json(self) -> dict:
        """Plain JSON types; byte strings become lowercase hex."""
        def fix(v):
            if isinstance(v, bytes):
                return v.hex()
            if isinstance(v, dict):
                return {k: fix(x) for k, x in v.items()}
            if isinstance(v, (list, tuple)):
                return [fix(x) for x in v]
            return v
        out = fix(asdict(self))
        out["memory_length"] = len(self.memory) if self.memory is not None else 0
        return out
