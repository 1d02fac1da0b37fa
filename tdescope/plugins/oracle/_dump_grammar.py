"""Line grammar and state machine behind :func:`tdescope.plugins.oracle.blockdump.parse_blockdump`."""

from __future__ import annotations

import re
from dataclasses import replace

from tdescope.plugins.oracle import _dump_records as bd

__all__: list[str] = []  # private: used by blockdump.py

_HEX = r"0x[0-9a-fA-F]+"
_BUFFER = re.compile(rf"^buffer tsn:\s*(\d+)\s+rdba:\s*({_HEX})\s*\((\d+)/(\d+)\)")
_SCN = re.compile(r"^scn:\s*(\S+)\s+seq:\s*(\S+)\s+flg:\s*(\S+)\s+tail:\s*(\S+)")
_FRMT = re.compile(rf"^frmt:\s*({_HEX})\s+chkval:\s*({_HEX})\s+type:\s*({_HEX})=?(.*)$")
_ENCRYPTED = re.compile(r"^Encrypted block <(\d+),\s*(\d+)> content will not be dumped")
_MEMORY = re.compile(rf"^Dump of memory from ({_HEX}) to ({_HEX})")
_MEMLINE = re.compile(r"^([0-9A-Fa-f]{8,16})((?:\s+[0-9A-Fa-f]{8}){1,4})\s*(?:\[.*)?$")
_REPEAT = re.compile(r"^\s*Repeat (\d+) times")
_BLOCK_HEADER = re.compile(rf"^Block header dump:\s*({_HEX})")
_OBJ_ON_BLOCK = re.compile(r"^\s*Object id on Block\?\s*([YN])")
_SEGOBJ = re.compile(rf"^\s*seg/obj:\s*({_HEX})\s+csc:\s*(\S+)\s+itc:\s*(\d+)\s+flg:\s*(\S+)\s+typ:\s*(\d+)\s*-\s*(\S+)")
_BRN = re.compile(rf"^\s*brn:\s*(\d+)\s+bdba:\s*({_HEX})\s+ver:\s*({_HEX})\s+opc:\s*(\d+)")
_INC = re.compile(r"^\s*inc:\s*(\d+)\s+exflg:\s*(\d+)")
_ITL = re.compile(rf"^({_HEX})\s+({_HEX}\.[0-9a-f]+\.[0-9a-f]+)\s+({_HEX}\.[0-9a-f]+\.[0-9a-f]+)\s+"
                  rf"([-CBUT]{{4}})\s+(\d+)\s+(?:(fsc|scn)\s+)?({_HEX}(?:\.[0-9a-f]+)?)")
_DATA_HEADER = re.compile(rf"^data_block_dump,data header at ({_HEX})")
_COLON_FIELD = re.compile(rf"^(tsiz|hsiz|pbl):\s*({_HEX})")
_EQ_FIELD = re.compile(r"^(flag|ntab|nrow|frre|fsbo|fseo|avsp|tosp)=(\S+)")
_PTI = re.compile(rf"^({_HEX}):pti\[(\d+)\]\s+nrow=(\d+)\s+offs=(\d+)")
_PRI = re.compile(rf"^({_HEX}):pri\[(\d+)\]\s+(?:offs=({_HEX})|sfll=(-?\d+))")
_ROW = re.compile(rf"^tab (\d+), row (\d+), @({_HEX})")
_TL = re.compile(rf"^tl:\s*(\d+)\s+fb:\s*(\S+)\s+lb:\s*({_HEX})(?:\s+cc:\s*(\d+))?")
_COL = re.compile(r"^col\s+(\d+):\s*\[\s*(\d+)\]\s*(.*)$")
_COL_NULL = re.compile(r"^col\s+(\d+):\s*\*NULL\*")
_HEXBYTES = re.compile(r"^\s+((?:[0-9a-f]{2}\s*)+)$")
_END = "end_of_block_dump"


def _int(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


class _Block:
    """Mutable accumulator for one BlockDump."""

    def __init__(self, line_no: int) -> None:
        self.first_line = line_no
        self.cache = self.header = self.data_header = None
        self.itl: list = []
        self.table_dir: list = []
        self.row_dir: list = []
        self.rows: list = []
        self.cols: list = []
        self.pending_col = None  # (index, length, bytearray) while continuation lines come
        self.memory: bytearray | None = None
        self.memory_address: int | None = None
        self.mem_last: int | None = None  # offset of the last hex line, for "Repeat"
        self.encrypted_header_only = False
        self.complete = False
        self.problems: list[str] = []

    def empty(self) -> bool:
        return self.cache is None and self.header is None and not self.rows

    def close_row(self) -> None:
        self.finish_col()
        if self.rows and self.cols:
            self.rows[-1] = replace(self.rows[-1], columns=tuple(self.cols))
        self.cols = []

    def finish_col(self) -> None:
        if self.pending_col is not None:
            idx, n, buf = self.pending_col
            if len(buf) != n:
                self.problems.append(f"col {idx}: {len(buf)} bytes dumped, [{n}] announced")
            self.cols.append(bd.DumpColumn(idx, n, bytes(buf)))
            self.pending_col = None

    def freeze(self):
        self.close_row()
        header = replace(self.header, itl=tuple(self.itl)) if self.header is not None else None
        return bd.BlockDump(self.cache, header, self.data_header, tuple(self.table_dir), tuple(self.row_dir),
                         tuple(self.rows), bytes(self.memory) if self.memory is not None else None,
                         self.memory_address, self.encrypted_header_only, self.complete,
                         tuple(self.problems), self.first_line)


def parse_blocks(lines: list[str], byteorder: str = "little") -> list[bd.BlockDump]:
    """The state machine: one pass, one _Block at a time.

    ``byteorder`` is that of the platform that wrote the dump: its hex memory
    lines print native 32-bit words.
    """
    blocks: list = []
    cur: _Block | None = None

    def start(line_no: int) -> _Block:
        nonlocal cur
        if cur is not None and not cur.empty():
            blocks.append(cur.freeze())
        cur = _Block(line_no)
        return cur

    for line_no, line in enumerate(lines, start=1):
        line = line.rstrip("\r\n")
        try:
            if m := _BUFFER.match(line):
                fresh = cur is not None and cur.encrypted_header_only and cur.cache is None
                b = cur if fresh else start(line_no)
                b.cache = bd.DumpCacheHeader(int(m.group(1)), _int(m.group(2)), int(m.group(3)), int(m.group(4)))
                continue
            if m := _BLOCK_HEADER.match(line):
                b = cur if cur is not None and cur.header is None and not cur.complete else start(line_no)
                b.header = bd.DumpBlockHeader(_int(m.group(1)))
                continue
            if m := _ENCRYPTED.match(line):
                # Printed before the cache header lines of the same block.
                b = start(line_no)
                b.encrypted_header_only = True
                continue
            if cur is None:
                continue
            b = cur
            if b.pending_col is not None:
                if hm := _HEXBYTES.match(line):
                    b.pending_col[2].extend(bytes.fromhex(hm.group(1)))
                    if len(b.pending_col[2]) >= b.pending_col[1]:
                        b.finish_col()
                    continue
                b.finish_col()
            _feed(b, line, byteorder)
        except (ValueError, TypeError, IndexError) as exc:
            if cur is not None:
                cur.problems.append(f"line {line_no}: {exc}: {line.strip()[:80]}")
    if cur is not None and not cur.empty():
        blocks.append(cur.freeze())
    return blocks


def _feed(b: _Block, line: str, byteorder: str) -> None:
    if m := _SCN.match(line):
        if b.cache is not None:
            b.cache = replace(b.cache, scn=bd.scn_value(m.group(1)), seq=_int(m.group(2)),
                              flg=_int(m.group(3)), tail=_int(m.group(4)))
    elif m := _FRMT.match(line):
        if b.cache is not None:
            b.cache = replace(b.cache, frmt=_int(m.group(1)), chkval=_int(m.group(2)),
                              type=_int(m.group(3)), type_name=m.group(4).strip())
    elif m := _MEMORY.match(line):
        lo, hi = _int(m.group(1)), _int(m.group(2))
        if 0 < hi - lo <= 1 << 20:
            b.memory, b.memory_address = bytearray(hi - lo), lo
        else:
            b.problems.append(f"memory dump range {m.group(1)}..{m.group(2)} ignored")
    elif b.memory is not None and (m := _MEMLINE.match(line)):
        off = int(m.group(1), 16) - b.memory_address
        words = m.group(2).split()
        data = b"".join(int(w, 16).to_bytes(4, byteorder) for w in words)
        if 0 <= off and off + len(data) <= len(b.memory):
            b.memory[off:off + len(data)] = data
            b.mem_last = off
        else:
            b.problems.append(f"hex line at {m.group(1)} outside the dumped range")
    elif b.memory is not None and (m := _REPEAT.match(line)):
        if b.mem_last is not None:
            chunk = bytes(b.memory[b.mem_last:b.mem_last + 16])
            for k in range(1, int(m.group(1)) + 1):
                o = b.mem_last + 16 * k
                b.memory[o:o + 16] = chunk[:max(0, len(b.memory) - o)]
            b.mem_last += 16 * int(m.group(1))
    elif m := _OBJ_ON_BLOCK.match(line):
        if b.header is not None:
            b.header = replace(b.header, object_id_on_block=m.group(1) == "Y")
    elif m := _SEGOBJ.match(line):
        if b.header is not None:
            b.header = replace(b.header, seg_obj=_int(m.group(1)), csc=bd.scn_value(m.group(2)),
                               itc=int(m.group(3)), flg=m.group(4), typ=int(m.group(5)), typ_name=m.group(6))
    elif m := _BRN.match(line):
        if b.header is not None:
            b.header = replace(b.header, brn=int(m.group(1)), bdba=_int(m.group(2)), ver=_int(m.group(3)),
                               opc=int(m.group(4)))
    elif m := _INC.match(line):
        if b.header is not None:
            b.header = replace(b.header, inc=int(m.group(1)), exflg=int(m.group(2)))
    elif m := _ITL.match(line):
        b.itl.append(bd.ItlEntry(_int(m.group(1)), m.group(2), m.group(3), m.group(4), int(m.group(5)),
                                 m.group(6) or "", m.group(7)))
    elif m := _DATA_HEADER.match(line):
        b.data_header = bd.DataHeader(address=_int(m.group(1)))
    elif b.data_header is not None and (m := _COLON_FIELD.match(line)):
        b.data_header = replace(b.data_header, **{m.group(1): _int(m.group(2))})
    elif b.data_header is not None and (m := _EQ_FIELD.match(line)):
        key, value = m.group(1), m.group(2)
        b.data_header = replace(b.data_header, **{key: value if key == "flag" else _int(value)})
    elif m := _PTI.match(line):
        b.table_dir.append(bd.TableDirEntry(int(m.group(2)), int(m.group(3)), int(m.group(4)), _int(m.group(1))))
    elif m := _PRI.match(line):
        offs = _int(m.group(3)) if m.group(3) else None
        sfll = int(m.group(4)) if m.group(4) else None
        b.row_dir.append(bd.RowDirEntry(int(m.group(2)), offs, _int(m.group(1)), sfll))
    elif m := _ROW.match(line):
        b.close_row()
        b.rows.append(bd.DumpRow(int(m.group(1)), int(m.group(2)), _int(m.group(3))))
    elif (m := _TL.match(line)) and b.rows:
        b.rows[-1] = replace(b.rows[-1], tl=int(m.group(1)), fb=m.group(2), lb=_int(m.group(3)),
                             cc=int(m.group(4)) if m.group(4) else None)
    elif (m := _COL_NULL.match(line)) and b.rows:
        b.cols.append(bd.DumpColumn(int(m.group(1)), 0, None))
    elif (m := _COL.match(line)) and b.rows:
        idx, n, rest = int(m.group(1)), int(m.group(2)), m.group(3).strip()
        buf = bytearray(bytes.fromhex(rest)) if rest else bytearray()
        b.pending_col = (idx, n, buf)
        if len(buf) >= n:
            b.finish_col()
    elif line.startswith(_END):
        b.close_row()
        b.complete = True
