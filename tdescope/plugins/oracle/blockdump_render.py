"""A parsed block dump shown two ways: as a DecodedPage for the Page view, and as text.

With a hex memory dump in the trace, the page is the real bytes and every span
is exact. Without one, the bytes are rebuilt from the dump's fields so the
same view can show them; the problems then say what is exact (cache header,
tail, rows' bytes) and what is assumed (where the data header sits).
"""

from __future__ import annotations

import struct

from tdescope.app.engines.api import DecodedPage
from tdescope.plugins.oracle._kdb import ASSM_GAP, ITL_SIZE, ITL_START, KDBH_SIZE, ROW_FLAG_LETTERS
from tdescope.plugins.oracle.blockdump import BlockDump, parse_blockdump
from tdescope.plugins.oracle.blocks import OracleBlockDecoder
from tdescope.plugins.oracle.column_values import guess_column

__all__ = ["blockdump_report_text", "blockdump_to_page", "format_blockdump"]

_DEFAULT_BLOCK_SIZE = 8192


def blockdump_to_page(dump: BlockDump) -> DecodedPage:
    """A :class:`DecodedPage` for one dumped block (little-endian bytes)."""
    decoder = OracleBlockDecoder("little")
    if dump.memory:
        page = decoder.decode(dump.memory, dump.cache.block if dump.cache else -1)
        notes = []
        if dump.cache and len(dump.memory) >= 8 and struct.unpack_from("<I", dump.memory, 4)[0] != dump.cache.rdba:
            notes.append("hex memory dump's rdba differs from the 'buffer tsn' line")
        return DecodedPage(page.page_type, page.fields, page.cells, page.records, page.problems + tuple(notes))
    if dump.encrypted_header_only:
        return DecodedPage("encrypted", problems=(
            "Oracle dumped the cache header only (encrypted block); no page bytes. "
            "alter session set \"_sga_clear_dump\"=true dumps the decrypted block (seed 003).",))
    data, kd, assumed = _rebuild(dump)
    page = decoder.decode(data, dump.cache.block if dump.cache else -1)
    problems = [p for p in page.problems if not p.startswith("checksum")]
    problems.insert(0, "no hex memory dump in the trace: page bytes rebuilt from the dump text; "
                       "cache header, tail and row bytes are as dumped, other bytes are zero, "
                       "so spans are approximate and the checksum cannot be checked")
    if dump.cache is None:
        problems.insert(1, "no cache header in the dump text: type 0x06 and rdba taken from the block "
                           "header; scn, seq, flg, chkval and tail unknown (zero)")
    if assumed:
        problems.insert(1, f"data header placed at 0x{kd:x} (assumed: 0x2c + 24*itc"
                           + (" + 8 as in ASSM blocks)" if kd - ITL_START - ITL_SIZE * _itc(dump) else ")"))
    return DecodedPage(page.page_type, page.fields, page.cells, page.records, tuple(problems))


def _itc(dump: BlockDump) -> int:
    return dump.header.itc if dump.header and dump.header.itc else len(dump.header.itl) if dump.header else 0


def _rebuild(dump: BlockDump) -> tuple[bytes, int, bool]:
    """Block bytes from the dump's fields: (bytes, data header offset, offset assumed?)."""
    itc = _itc(dump)
    gap = ASSM_GAP if dump.header is not None and "E" in dump.header.flg else 0
    kd = ITL_START + ITL_SIZE * itc + gap
    dh = dump.data_header
    size = kd + dh.tsiz + 4 if dh is not None and dh.tsiz else _DEFAULT_BLOCK_SIZE
    buf = bytearray(size)
    c = dump.cache
    if c is None and dump.header is not None:
        # An excerpt starting at "Block header dump:": a block with ITLs is a
        # 'trans data' block; its SCN, seq and flags are unknown.
        struct.pack_into("<BBHI", buf, 0, 0x06, 0x02, 0, dump.header.dba)
        struct.pack_into("<I", buf, size - 4, 0x06 << 8)
    if c is not None:
        scn = c.scn or 0
        struct.pack_into("<BBHIIHBBHH", buf, 0, c.type or 0, c.frmt or 0, 0, c.rdba, scn & 0xFFFFFFFF,
                         (scn >> 32) & 0xFFFF, c.seq or 0, c.flg or 0, c.chkval or 0, 0)
        if c.tail is not None:
            struct.pack_into("<I", buf, size - 4, c.tail)
    h = dump.header
    if h is not None:
        csc = h.csc or 0
        buf[0x14] = h.typ or 0
        struct.pack_into("<IIH", buf, 0x18, h.seg_obj or 0, csc & 0xFFFFFFFF, (csc >> 32) & 0xFFFF)
        struct.pack_into("<HBBI", buf, 0x24, itc, 0, 0, h.bdba or 0)
        for i, e in enumerate(h.itl[:itc]):
            _pack_itl(buf, ITL_START + ITL_SIZE * i, e)
    if dh is not None and kd + KDBH_SIZE <= size - 4:
        struct.pack_into("<BBHhHHHH", buf, kd, 0, dh.ntab or 0, dh.nrow or 0, dh.frre or 0,
                         dh.fsbo or 0, dh.fseo or 0, dh.avsp or 0, dh.tosp or 0)
        for t in dump.table_dir:
            if kd + t.header_offset + 4 <= size:
                struct.pack_into("<HH", buf, kd + t.header_offset, t.offs, t.nrow)
        for r in dump.row_dir:
            if r.offs is not None and kd + r.header_offset + 2 <= size:
                struct.pack_into("<H", buf, kd + r.header_offset, r.offs)
        for row in dump.rows:
            raw = _row_bytes(row)
            start = kd + row.offset
            if start + len(raw) <= size - 4:
                buf[start:start + len(raw)] = raw
    return bytes(buf), kd, True


def _pack_itl(buf: bytearray, off: int, e) -> None:
    usn, slot, sqn = (int(x, 16) for x in e.xid.removeprefix("0x").split("."))
    dba, seq, rec = (int(x, 16) for x in e.uba.removeprefix("0x").split("."))
    flags = sum(0x8000 >> k for k, ch in enumerate(e.flag) if ch != "-")
    wrap, _, base = e.scn_fsc.removeprefix("0x").rpartition(".")
    struct.pack_into("<HHIIHBxHHI", buf, off, usn, slot, sqn, dba, seq, rec,
                     flags | (e.lck & 0x0FFF), int(wrap or "0", 16), int(base, 16) & 0xFFFFFFFF)


def _row_bytes(row) -> bytes:
    flag = sum(0x80 >> i for i, ch in enumerate(row.fb[:8]) if ch == ROW_FLAG_LETTERS[i])
    out = bytearray([flag, row.lb or 0])
    if row.cc is None:
        return bytes(out)
    out.append(row.cc)
    for col in row.columns:
        if col.data is None:
            out.append(0xFF)
        elif len(col.data) > 250:
            out += b"\xfe" + len(col.data).to_bytes(2, "big") + col.data
        else:
            out += bytes([len(col.data)]) + col.data
    return bytes(out)


def format_blockdump(blocks: list[BlockDump]) -> str:
    """Human text: one paragraph per block with its rows' guessed values."""
    out: list[str] = []
    for n, b in enumerate(blocks, start=1):
        c, h, dh = b.cache, b.header, b.data_header
        title = f"block {n}"
        if c is not None:
            title += f": rdba 0x{c.rdba:08x} ({c.rfile}/{c.block}) tsn {c.tsn}"
        elif h is not None:
            title += f": dba 0x{h.dba:08x}"
        out.append(title)
        if c is not None and c.type is not None:
            out.append(f"  cache header: type 0x{c.type:02x}={c.type_name} scn 0x{(c.scn or 0):x} "
                       f"seq 0x{(c.seq or 0):02x} flg 0x{(c.flg or 0):02x} chkval 0x{(c.chkval or 0):04x} "
                       f"tail 0x{(c.tail or 0):08x}")
        if b.encrypted_header_only:
            out.append("  encrypted block: Oracle dumped the header only")
        if h is not None:
            out.append(f"  block header: seg/obj 0x{(h.seg_obj or 0):x} csc 0x{(h.csc or 0):x} itc {h.itc} "
                       f"flg {h.flg} typ {h.typ} - {h.typ_name}")
            for e in h.itl:
                out.append(f"    itl 0x{e.itl:02x} {e.xid} {e.uba} {e.flag} {e.lck} {e.scn_kind} {e.scn_fsc}".rstrip())
        if dh is not None:
            out.append(f"  data header: tsiz 0x{(dh.tsiz or 0):x} ntab {dh.ntab} nrow {dh.nrow} "
                       f"fsbo 0x{(dh.fsbo or 0):x} fseo 0x{(dh.fseo or 0):x} avsp 0x{(dh.avsp or 0):x}")
        for r in b.rows:
            values = ", ".join(guess_column(col.data) for col in r.columns)
            out.append(f"  tab {r.table}, row {r.row}, @0x{r.offset:x} fb {r.fb}"
                       + (" (deleted)" if r.deleted else f": {values}"))
        if b.memory is not None:
            out.append(f"  hex memory dump: {len(b.memory)} bytes")
        for p in b.problems:
            out.append(f"  problem: {p}")
        if not b.complete and not b.encrypted_header_only:
            out.append("  (no end_of_block_dump: dump incomplete)")
        out.append("")
    out.append(f"{len(blocks)} block(s)")
    return "\n".join(out) + "\n"


def blockdump_report_text(text: str) -> str:
    """The ``parse-blockdump`` human text for a dump trace's ``text``."""
    return format_blockdump(parse_blockdump(text))
