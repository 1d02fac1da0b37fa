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
