"""PostgreSQL decoding paths a mutation audit found unpinned: tables over every entry, compressed and
TOASTed values' labels, values cut by the page end, TOAST tags, posting lists and b-tree flags.

The module-level tables (t_infomask bits, b-tree flags, compression methods) are compared entry by entry
with the server's own view where pageinspect has one (``heap_tuple_infomask_flags``,
``pg_column_compression``) and with src/include otherwise. Edited pages are real pages (the tables of
:mod:`test_pg_pages`) with a few bytes changed.
"""

from __future__ import annotations

import struct

import pytest

from test_pg_pages import BTP_FLAGS, _index_block, _lp, _raw, _top, pg  # noqa: F401 - pg is a fixture
from tdescope.plugins.postgres import _btree
from tdescope.plugins.postgres._tuples import PgColumn, decode_tuple, format_value, infomask2_flags, infomask_flags
from tdescope.plugins.postgres.pages import PgPageDecoder

GAPS = r"""
DROP TABLE IF EXISTS pg_gap_lz4;
CREATE TABLE pg_gap_lz4 (id int, t text COMPRESSION lz4, x text COMPRESSION lz4);
INSERT INTO pg_gap_lz4 VALUES (1, repeat('lz4 inline ', 400), NULL),
    (2, NULL, (SELECT string_agg(md5((g % 400)::text), '') FROM generate_series(1, 4000) g));
"""
TEXT = PgColumn("t", "text", -1, "i")


@pytest.fixture(scope="module")
def lz4(pg, pg_cluster):
    if pg_cluster.psql("SELECT to_regclass('pg_gap_lz4') IS NULL").strip() == "t":
        pg_cluster.psql(GAPS)
    return pg


def _attrs(pg, relation: str, raw: bytes) -> dict:
    return dict(pg.control.execute("SELECT lp, t_attrs FROM heap_page_item_attrs(%s, %s::regclass) ORDER BY lp",
                                   (raw, relation)).fetchall())


def _tuple_fields(page, lp: int) -> dict:
    return {f.name: f for f in _top(page, f"tuple {lp}").children}


def test_every_infomask_bit_is_named_as_pageinspect_names_it(pg):
    for bit in range(16):
        raw, = pg.control.execute("SELECT raw_flags FROM heap_tuple_infomask_flags(%s, 0)", (1 << bit,)).fetchone()
        assert infomask_flags(1 << bit) == [f.removeprefix("HEAP_") for f in raw], hex(1 << bit)
        raw2, = pg.control.execute("SELECT raw_flags FROM heap_tuple_infomask_flags(0, %s)", (1 << bit,)).fetchone()
        assert infomask2_flags(1 << bit) == [f.removeprefix("HEAP_") for f in raw2], hex(1 << bit)  # natts: none
    every, = pg.control.execute("SELECT raw_flags FROM heap_tuple_infomask_flags(65535, 0)").fetchone()
    assert "|".join(infomask_flags(0xFFFF)) == "|".join(f.removeprefix("HEAP_") for f in every)


def test_every_btree_flag_and_several_at_once(pg):
    """btpo_flags as nbtree.h names the bits (pageinspect gives only the number), one bit and several."""
    block = _index_block(pg, "pp_idx_pkey", "leaf")
    for flags in [1 << b for b in range(9)] + [0x0043, 0x0103, 0x01FF, 0x0014, 0x000D, 0x0200]:
        raw = bytearray(_raw(pg, "pp_idx_pkey", block))
        struct.pack_into("<H", raw, 8188, flags)
        page = PgPageDecoder().decode(bytes(raw), block)
        special = _top(page, "BTPageOpaqueData")
        names = "|".join(name for bit, name in BTP_FLAGS.items() if flags & bit)
        assert {c.name: c.value for c in special.children}["btpo_flags"] == f"0x{flags:04x} {names}"
        want = ("b-tree meta" if flags & 0x8 else "b-tree deleted" if flags & 0x4 else "b-tree half-dead"
                if flags & 0x10 else "b-tree leaf" if flags & 0x1 else "b-tree root" if flags & 0x2
                else "b-tree interior")
        assert special.value == want, hex(flags)
    assert (_btree._OPAQUE.format, _btree._OPAQUE.size, _btree._META.size, _btree.SPECIAL_SIZE) == (
        "<IIIHH", 16, 41, 16)


def test_lz4_values_inline_and_toasted(lz4):
    """Both compression methods: the label names lz4 as pg_column_compression does, with the raw size."""
    raw = _raw(lz4, "pg_gap_lz4", 0)
    page = PgPageDecoder(lz4.columns("pg_gap_lz4")).decode(raw, 0)
    assert page.problems == ()
    attrs = _attrs(lz4, "pg_gap_lz4", raw)
    rows = {lp: r for lp, *r in lz4.control.execute(
        "SELECT (ctid::text::point)[1]::int, octet_length(t), pg_column_compression(t), octet_length(x), "
        "pg_column_compression(x), pg_column_size(x) FROM pg_gap_lz4")}
    size, method = rows[1][:2]
    inline = _tuple_fields(page, 1)["t (text)"]
    stored = bytes(attrs[1][1])
    assert method == "lz4" and struct.unpack_from("<I", stored)[0] & 3 == 2  # a 4-byte compressed header
    assert inline.value == f"{format_value(stored[4:])} [compressed lz4, raw size {size}]"
    assert raw[inline.start:inline.end] == stored
    size, method, on_disk = rows[2][2:]
    pointer = _tuple_fields(page, 2)["x (text)"]
    assert method == "lz4" and raw[pointer.start:pointer.end] == bytes(attrs[2][2])
    assert pointer.value.startswith(format_value(bytes(attrs[2][2])[2:]) + " [toast pointer: value ")
    assert pointer.value.endswith(f", compressed lz4, raw size {size}, stored {on_disk}]")


def test_labels_of_compressed_and_toasted_attributes(pg):
    """The label is the stored bytes after the header, then the kind in brackets; the value is those bytes."""
    raw = _raw(pg, "pp_lens", 0)
    page = PgPageDecoder(pg.columns("pp_lens")).decode(raw, 0)
    attrs = _attrs(pg, "pp_lens", raw)
    seen = set()
    for lp, values in attrs.items():
        for name, stored in zip(("id", "t", "b", "e"), values):
            if stored is None or name == "id":
                continue
            stored = bytes(stored)
            field = next(f for f in _tuple_fields(page, lp).values() if f.name.startswith(f"{name} ("))
            if stored[0] == 0x01:
                assert field.value.startswith(format_value(stored[2:]) + " [toast pointer: value "), field.value
                seen.add("toast")
            elif stored[0] & 0x03 == 0x02:
                tcinfo = struct.unpack_from("<I", stored, 4)[0]
                assert field.value == (f"{format_value(stored[4:])} [compressed pglz, "
                                       f"raw size {tcinfo & 0x3FFFFFFF}]")
                seen.add("compressed")
    assert seen == {"toast", "compressed"}


def _column_at(page_fields, name):
    return next(f for f in page_fields if f.name.startswith(name))


def _find_stored(pg, relation: str, lp: int, column: str, kind: str) -> tuple[bytes, int]:
    """(page, offset of ``column``'s varlena in tuple ``lp``)."""
    raw = _raw(pg, relation, 0)
    page = PgPageDecoder(pg.columns(relation)).decode(raw, 0)
    field = _column_at(_top(page, f"tuple {lp}").children, f"{column} (")
    assert kind in field.value
    return raw, field.start


def _lp_of(pg, relation: str, kind: str, column: str) -> int:
    raw = _raw(pg, relation, 0)
    page = PgPageDecoder(pg.columns(relation)).decode(raw, 0)
    for f in page.fields:
        if f.name.startswith("tuple "):
            if any(c.name.startswith(f"{column} (") and kind in c.value for c in f.children):
                return int(f.name.split()[1])
    raise AssertionError(f"no {kind} {column} in {relation}")


@pytest.mark.parametrize("kind, column, keep, problem", [
    ("[compressed pglz", "t", 4, "varlena of {size} bytes runs past the tuple end"),  # header word only
    ("[compressed pglz", "t", 7, "varlena of {size} bytes runs past the tuple end"),  # tcinfo cut
    ("[toast pointer", "e", 1, "TOAST pointer cut by the tuple end"),
    ("[toast pointer", "e", 14, "varlena of 18 bytes runs past the tuple end"),
    ("[toast pointer", "e", 17, "varlena of 18 bytes runs past the tuple end"),
    ("[compressed pglz", "t", 3, "varlena header cut by the tuple end"),
])
def test_values_cut_by_the_page_end_are_problems(pg, kind, column, keep, problem):
    """A tuple whose last bytes are the page's: a value cut there is a problem, never a read past the buffer."""
    lp = _lp_of(pg, "pp_lens", kind, column)
    raw, pos = _find_stored(pg, "pp_lens", lp, column, kind)
    off, _length = _lp(raw, lp)
    buf = raw[:pos + keep]  # the buffer (a captured page) ends inside the value
    res = decode_tuple(buf, off, 8192, tuple(pg.columns("pp_lens")))
    size = struct.unpack_from("<I", raw, pos)[0] >> 2
    assert res.problems == [f"column {column} of the tuple at {off}: " + problem.format(size=size)]


def test_toast_tags(pg):
    """Tag 18 (on disk) is decoded; 1-3 (in-memory pointers) are shown by size only; others are problems."""
    lp = _lp_of(pg, "pp_lens", "[toast pointer", "e")
    raw, pos = _find_stored(pg, "pp_lens", lp, "e", "[toast pointer")
    off, length = _lp(raw, lp)
    columns = tuple(pg.columns("pp_lens"))
    labels = {}
    for tag in (1, 2, 3, 18, 0, 7, 19):
        page = bytearray(raw)
        page[pos + 1] = tag
        res = decode_tuple(bytes(page), off, length, columns)
        if tag in (1, 2, 3):
            e = _column_at(res.fields, "e (")
            assert (e.end - e.start, e.value) == (10, f"{format_value(bytes(page[pos + 2:pos + 10]))} [toast pointer]")
        elif tag == 18:
            assert "[toast pointer: value " in _column_at(res.fields, "e (").value and not res.problems
        else:
            assert res.problems == [f"column e of the tuple at {off}: unknown TOAST tag {tag}"]
        labels[tag] = res.problems
    assert len(labels) == 7


def test_invalid_utf8_text_is_replaced_not_raised():
    header = struct.pack("<IIIHHHHHB", 5, 0, 0, 0, 0, 1, 1, 0x0802, 24) + b"\x00"
    page = header + bytes([(3 << 1) | 1]) + b"\xff\xfe"
    res = decode_tuple(page, 0, len(page), (TEXT,))
    assert res.values == ["\ufffd\ufffd"] and res.problems == []
    assert res.fields[0].value == "" and res.fields[0].name == "tuple header"


def test_cstring_zero_after_the_tuple_end_is_not_its_end():
    header = struct.pack("<IIIHHHHHB", 5, 0, 0, 0, 0, 1, 1, 0x0802, 24) + b"\x00"
    page = header + b"abc" + b"\x00"  # the zero is the page's, past the tuple
    res = decode_tuple(page, 0, 27, (PgColumn("c", "cstring", -2, "c"),))
    assert res.problems == ["column c of the tuple at 0: cstring without its terminating zero"]


def _posting_item(pg) -> tuple[bytearray, int, int, int, int]:
    """A leaf of pp_idx_k and its first posting-list tuple: (page, block, lp, offset, length)."""
    block = _index_block(pg, "pp_idx_k", "leaf")
    raw = bytearray(_raw(pg, "pp_idx_k", block))
    lps = pg.control.execute("SELECT itemoffset FROM bt_page_items(%s) WHERE tids IS NOT NULL ORDER BY 1",
                             (bytes(raw),)).fetchall()
    lp = lps[0][0]
    off, length = _lp(bytes(raw), lp)
    return raw, block, lp, off, length


def test_posting_list_bounds_count_and_high_half(pg):
    raw, block, lp, off, length = _posting_item(pg)
    bi_hi, bi_lo, posid = struct.unpack_from("<HHH", raw, off)
    n_tids, start = posid & 0x0FFF, (bi_hi << 16) | bi_lo
    tids, = pg.control.execute("SELECT tids::text[] FROM bt_page_items(%s) WHERE itemoffset = %s",
                               (bytes(raw), lp)).fetchone()
    assert bi_hi == 0 and n_tids == len(tids) >= 2 and posid & 0x2000
    item = _top(PgPageDecoder().decode(bytes(raw), block), f"item {lp}")
    posting = next(c for c in item.children if c.name == "posting list")
    assert (posting.start - off, posting.end - off, posting.value) == (start, start + 6 * n_tids, " ".join(tids))

    def problems(hi, lo, pid):
        page = bytearray(raw)
        struct.pack_into("<HHH", page, off, hi, lo, pid)
        return [p for p in PgPageDecoder().decode(bytes(page), block).problems if p.startswith(f"lp {lp}:")]

    size = struct.unpack_from("<H", raw, off + 6)[0] & 0x1FFF
    assert problems(1, bi_lo, posid) == [f"lp {lp}: posting list of {n_tids} TIDs at {65536 + start} outside the tuple"]
    assert problems(0xFFFF, bi_lo, posid) == [
        f"lp {lp}: posting list of {n_tids} TIDs at {(0xFFFF << 16) | start} outside the tuple"]
    assert problems(0, bi_lo, posid + 1) == [f"lp {lp}: posting list of {n_tids + 1} TIDs at {start} outside the tuple"]
    last = (size - start) // 6  # the most TIDs that fit: the list may end at the tuple's end, not after it
    assert problems(0, bi_lo, (posid & ~0x0FFF) | last) == []
    assert problems(0, bi_lo, (posid & ~0x0FFF) | (last + 1)) != []
    assert problems(0, 7, posid) == [f"lp {lp}: posting list of {n_tids} TIDs at 7 outside the tuple"]  # in the header
    assert problems(0, 8, (posid & ~0x0FFF) | 1) == []  # right after the header: no key data


def test_type_tables_are_pg_types(pg):
    """The fixed-width formats, alignments and text types against pg_type, entry by entry."""
    from tdescope.plugins.postgres import _tuples

    rows = {n: (ln, al, cat) for n, ln, al, cat in pg.control.execute(
        "SELECT typname, typlen, typalign, typcategory FROM pg_type WHERE typnamespace = 'pg_catalog'::regnamespace")}
    for name, fmt in _tuples._FIXED.items():
        assert struct.calcsize(fmt) == rows[name][0] and fmt[0] == "<", name
        assert fmt[1].islower() == (name in ("int2", "int4", "int8", "float4", "float8")), name  # signed or not
    assert {rows[n][1]: size for n, size in (("char", 1), ("int2", 2), ("int4", 4), ("float8", 8))} == _tuples._ALIGN
    assert all(rows[n][2] == "S" or rows[n][0] == -1 and n in ("json", "xml") for n in _tuples._TEXT)
    assert _tuples._HEADER.size == _tuples.HEADER_SIZE == 23 and _tuples._EXTERNAL.size == 16


def _hdr(natts: int, mask: int = 0x0802, hoff: int = 24, bits: bytes = b"") -> bytes:
    head = struct.pack("<IIIHHHHHB", 5, 0, 0, 0, 0, 1, natts, mask, hoff) + bits
    return head + bytes(hoff - len(head))


def test_format_value_literally():
    assert [format_value(v) for v in (None, 42, -1.5, "it's", b"", b"\x01\xff", True)] == [
        "NULL", "42", "-1.5", '"it\'s"', "\\x", "\\x01ff", "True"]
    assert format_value(bytes(range(32))) == "\\x" + bytes(range(32)).hex()  # 32 bytes: all, no count
    assert format_value(bytes(33)) == "\\x" + "00" * 32 + "… (33 bytes)"


@pytest.mark.parametrize("stored, label, problem", [
    # a compressed value that is only its header and va_tcinfo, ending at the tuple end
    (struct.pack("<II", (8 << 2) | 2, 5), "\\x05000000 [compressed pglz, raw size 5]", None),
    (struct.pack("<II", (8 << 2) | 2, (1 << 30) | 7), "\\x07000040 [compressed lz4, raw size 7]", None),
    (struct.pack("<II", (8 << 2) | 2, (2 << 30) | 9), "\\x09000080 [compressed 2, raw size 9]", None),
    (struct.pack("<II", (8 << 2) | 2, (3 << 30) | 9), "\\x090000c0 [compressed 3, raw size 9]", None),
    (struct.pack("<I", (6 << 2) | 0) + b"ab", "'ab'", None),  # 4-byte header, not compressed
    (bytes([(3 << 1) | 1]) + b"ab", "'ab'", None),  # 1-byte header
    (struct.pack("<I", 0x80000000 | (9 << 2)), None, "varlena of 536870921 bytes runs past the tuple end"),
    # TOAST pointers: the stored size exactly 4 less than the raw size is uncompressed, 5 less compressed
    (b"\x01\x12" + struct.pack("<iIII", 104, 100, 77, 88), "toast pointer: value 77 in toast relation 88, "
     "uncompressed, raw size 100, stored 100]", None),
    (b"\x01\x12" + struct.pack("<iIII", 105, 100, 77, 88), "toast pointer: value 77 in toast relation 88, "
     "compressed pglz, raw size 101, stored 100]", None),
    (b"\x01\x12" + struct.pack("<iIII", 105, (3 << 30) | 100, 77, 88), "toast pointer: value 77 in toast "
     "relation 88, compressed 3, raw size 101, stored 100]", None),
    (b"\x01\x12", None, "varlena of 18 bytes runs past the tuple end"),  # two bytes left: the tag is read
    (b"\x01", None, "TOAST pointer cut by the tuple end"),
])
def test_varlena_kinds_literally(stored, label, problem):
    page = _hdr(1) + stored
    res = decode_tuple(page, 0, len(page), (TEXT,))
    if problem:
        assert res.problems == [f"column t of the tuple at 0: {problem}"]
        return
    assert res.problems == [] and res.fields[1].end == len(page)
    assert res.fields[1].value.endswith(label) and res.fields[1].value.count("[") == (label[0] != "'")


def test_null_bitmaps_of_eight_and_nine_attributes():
    cols = tuple(PgColumn(f"c{i}", "int2", 2, "s") for i in range(9))
    eight = _hdr(8, 0x0801, 32, bytes([0b01010101]))  # (natts + 7) // 8 = 1 byte
    res = decode_tuple(eight + struct.pack("<hhhh", 1, 2, 3, 4), 0, 40, cols[:8])
    assert res.values == [1, None, 2, None, 3, None, 4, None]
    bits = next(c for c in res.fields[0].children if c.name == "t_bits")
    assert (bits.start, bits.end, bits.value) == (23, 24, "10101010 (1 = not null)")
    nine = _hdr(9, 0x0801, 32, bytes([0xFF, 0x00]))
    res = decode_tuple(nine + struct.pack("<8h", *range(8)), 0, 48, cols)
    assert res.values == list(range(8)) + [None]
    # the bitmap cut by the buffer's end: attributes past it are not NULL (and not read from beyond the buffer)
    short = decode_tuple(_hdr(9, 0x0801, 24, bytes([0x00])), 0, 24, cols)
    assert short.values == [None] * 8 and short.problems == ["column c8 of the tuple at 0: runs past the tuple end"]
    flags = decode_tuple(_hdr(0xE003), 0, 24, None)  # (t_infomask2: natts in the low 11 bits, flags above)
    assert flags.fields[0].children[4].value == "natts 3 KEYS_UPDATED HOT_UPDATED ONLY_TUPLE"
    bad = decode_tuple(_hdr(1, 0x0802, 250), 0, 40, (TEXT,))
    assert bad.fields[0].value == "" and bad.fields[0].end == 23
    assert bad.problems == ["t_hoff 250 outside the tuple at 0"]
    empty = decode_tuple(_hdr(1), 0, 24, (TEXT,))  # a varlena that would start at the buffer's end
    assert empty.problems == ["column t of the tuple at 0: runs past the tuple end"]


def test_alignment_and_ends_of_fixed_and_varlena_columns():
    # int2 then a 4-byte-header text aligned to 4 (pad bytes are zero), then int8 aligned to 8
    body = (struct.pack("<h", 7) + b"\x00\x00" + struct.pack("<I", (7 << 2)) + b"abc" + b"\x00" * 5
            + struct.pack("<q", -1))
    cols = (PgColumn("a", "int2", 2, "s"), PgColumn("t", "text", -1, "i"), PgColumn("q", "int8", 8, "d"))
    page = _hdr(3) + body
    res = decode_tuple(page, 0, len(page), cols)
    assert res.values == [7, "abc", -1] and res.problems == []
    assert [(f.start, f.end, f.value) for f in res.fields[1:]] == [(24, 26, "7"), (28, 35, "'abc'"), (40, 48, "-1")]
    double = (PgColumn("a", "int2", 2, "s"), PgColumn("t", "text", -1, "d"))  # a varlena aligned to 8
    padded = _hdr(2) + struct.pack("<h", 7) + bytes(6) + struct.pack("<I", 6 << 2) + b"xy"
    assert [(f.start, f.value) for f in decode_tuple(padded, 0, len(padded), double).fields[1:]] == [
        (24, "7"), (32, "'xy'")]
    unknown = (PgColumn("a", "int2", 2, "s"), PgColumn("t", "text", -1, "?"), PgColumn("q", "int8", 8, "?"))
    res = decode_tuple(page, 0, len(page), unknown)  # unknown alignment: 4 before a varlena, none before int8
    assert res.values == [7, "abc", struct.unpack("<q", bytes(5) + b"\xff" * 3)[0]]
    assert [(f.start, f.end) for f in res.fields[1:]] == [(24, 26), (28, 35), (35, 43)]
    cut = decode_tuple(page, 0, 44, cols)
    assert cut.problems == ["column q of the tuple at 0: runs past the tuple end"] and cut.values == [7, "abc"]
    at_end = decode_tuple(page, 0, 26, cols)
    assert at_end.problems == ["column t of the tuple at 0: runs past the tuple end"]
    bare = decode_tuple(_hdr(0, hoff=23), 0, 23, ())  # exactly a header, t_hoff 23: no attributes, no problem
    assert bare.problems == [] and bare.natts == 0 and bare.fields[0].end == 23


def test_index_items_meta_and_special_space_literally(pg):
    block = _index_block(pg, "pp_idx_pkey", "leaf")
    raw = _raw(pg, "pp_idx_pkey", block)
    page = PgPageDecoder().decode(raw, block)
    lps = pg.control.execute("SELECT lp, lp_off, lp_len FROM heap_page_items(%s) ORDER BY lp", (raw,)).fetchall()
    assert [(f.name, f.start, f.end, f.value) for f in page.fields if f.name.startswith("item ")] == [
        (f"item {lp}", off, off + ln, f"{ln} bytes") for lp, off, ln in sorted(lps, key=lambda r: r[1])]
    problems: list[str] = []
    short = _btree.decode_index_tuple(raw, 9, lps[1][1], 7, problems)
    assert (short.name, short.start, short.end, short.value, short.children) == (
        "item 9", lps[1][1], lps[1][1] + 7, "7 bytes", ())
    assert problems == ["lp 9: index tuple of 7 bytes, shorter than its header"]
    problems.clear()
    cut = _btree.decode_index_tuple(raw, 2, lps[1][1], 10, problems)  # t_info says 16 bytes
    assert problems == ["lp 2: index tuple says 16 bytes, its line pointer 10"]
    assert [(c.name, c.end - c.start) for c in cut.children] == [("t_tid", 6), ("t_info", 2), ("key data", 2)]
    meta = _top(PgPageDecoder().decode(_raw(pg, "pp_idx_pkey", 0), 0), "BTMetaPageData")
    root, level = pg.control.execute("SELECT root, level FROM bt_metap('pp_idx_pkey')").fetchone()
    assert (meta.start, meta.end, meta.value) == (24, 65, f"root {root}, level {level}")
    for cycle, btree in ((0, True), (0xFF7F, True), (0xFF80, False), (0xFF81, False)):
        edited = bytearray(raw)
        struct.pack_into("<H", edited, 8190, cycle)
        assert _btree.is_btree(bytes(edited), 8176) is btree, hex(cycle)
    assert not _btree.is_btree(raw, 8160)  # a 32-byte special space is not a b-tree's


def test_pivot_heap_tid_needs_room_after_the_key(pg):
    """A pivot tuple (ALT_TID, BT_PIVOT_HEAP_TID_ATTR) keeps its heap TID in its last 6 bytes only when there
    are 8 bytes after the key data's start."""
    off = 0
    for size, has_tid in ((16, True), (15, False), (24, True)):
        item = struct.pack("<HHHH", 0, 3, 0x1001, 0x2000 | size) + bytes(range(size - 8))
        problems: list[str] = []
        got = _btree.decode_index_tuple(item, 4, off, size, problems)
        names = [c.name for c in got.children]
        assert ("heap TID" in names) is has_tid and problems == [], size
        if has_tid:
            tid = got.children[-1]
            assert (tid.start, tid.end) == (size - 6, size)
            hi, lo, posid = struct.unpack_from("<HHH", item, size - 6)
            assert tid.value == f"({(hi << 16) | lo},{posid})"
            assert names[-2:] == (["key data", "heap TID"] if size > 16 else ["t_info", "heap TID"])
    signed = struct.pack("<HHHH", 0xFFFF, 0xFFFF, 0xFFFF, 0x0010) + bytes(8)
    assert _btree.decode_index_tuple(signed, 1, 0, 16, []).children[0].value == "(4294967295,65535)"


def test_page_level_edges(pg):
    raw = _raw(pg, "pp_types", 0)
    assert [_top(PgPageDecoder().decode(raw, b), "PageHeaderData").value for b in (0, 1, -1)] == [
        "block 0", "block 1", ""]
    full = bytearray(raw)
    lower = struct.unpack_from("<H", full, 12)[0]
    struct.pack_into("<H", full, 14, lower)  # upper == lower: a full page, no free space field
    struct.pack_into("<H", full, 10, 0x0007)
    got = PgPageDecoder().decode(bytes(full), 0)
    assert got.page_type == "heap" and "free space" not in [f.name for f in got.fields]
    flags = _top(got, "PageHeaderData").children[2]
    assert flags.value == "0x0007 PD_HAS_FREE_LINES|PD_PAGE_FULL|PD_ALL_VISIBLE"
    meta = bytearray(_raw(pg, "pp_idx_pkey", 0))
    struct.pack_into("<H", meta, 14, struct.unpack_from("<H", meta, 12)[0])
    assert "free space" not in [f.name for f in PgPageDecoder().decode(bytes(meta), 0).fields]
    v5 = bytearray(raw)
    struct.pack_into("<H", v5, 18, 0x2005)
    assert PgPageDecoder().decode(bytes(v5), 0).problems[0].startswith("not a valid page header (size 8192, version 5")
    edited = bytearray(raw)
    off1, len1 = _lp(raw, 1)
    struct.pack_into("<I", edited, 24, (len1 << 17) | (3 << 15) | off1)  # lp 1 LP_DEAD, its length kept
    off2, _len2 = _lp(raw, 2)
    struct.pack_into("<I", edited, 28, (1 << 17) | (1 << 15) | off2)  # lp 2 LP_NORMAL, 1 byte
    off3, _len3 = _lp(raw, 3)
    struct.pack_into("<I", edited, 32, (0x4000 << 17) | (1 << 15) | off3)  # lp 3: 16384 bytes (bit 31 set)
    page = PgPageDecoder(pg.columns("pp_types")).decode(bytes(edited), 0)
    assert "tuple 1" not in [f.name for f in page.fields]
    assert {f"lp 3: tuple at {off3}+16384 lies outside the tuple area",
            f"lp 2: tuple at {off2} is 1 bytes, shorter than a tuple header"} <= set(page.problems)


def test_names_with_invalid_utf8_are_replaced():
    header = _hdr(1, 0x0800)
    res = decode_tuple(header + b"ab\xff" + bytes(61), 0, 24 + 64, (PgColumn("n", "name", 64, "c"),))
    assert res.values == ["ab\ufffd"] and res.problems == []
