"""Every field the Oracle block decoder shows, pinned: the seed 003 block as its dump prints it, and built
blocks for each branch (big-endian, index and unknown ``typ``, no ASSM gap, deleted and continued rows,
long and NULL columns, several tables, broken directories).
"""

from __future__ import annotations

import functools
import operator
import struct

import pytest

from test_oracle_blocks import SIZE, seed_block
from tdescope.plugins.oracle import _kdb
from tdescope.plugins.oracle.blocks import OracleBlockDecoder

#: Block 5/907 of seed 003, every field: the dump prints ``seg/obj: 0x17bc3 csc: 0x00.4e9aed itc: 2``,
#: ``tsiz: 0x1f98``, ``fsbo=0x14 fseo=0x1f8a avsp=0x1f76 tosp=0x1f76`` and ``tab 0, row 0, @0x1f8a``.
SEED_FIELDS = [
    ("cache header", 0, 20, "0x06=trans data"),
    ("type", 0, 1, "0x06=trans data"),
    ("frmt", 1, 2, "0xa2 (dumps print the low nibble: 0x02)"),
    ("spare", 2, 4, "0x0000"),
    ("rdba", 4, 8, "0x0000038b (1024/907)"),
    ("scn", 8, 14, "0x0000.004e9af4"),
    ("scn base", 8, 12, "0x004e9af4"),
    ("scn wrap", 12, 14, "0x0000"),
    ("seq", 14, 15, "0x01"),
    ("flg", 15, 16, "0x06 (delayed logging change, checksum set)"),
    ("chkval", 16, 18, "0x46dd"),
    ("spare", 18, 20, "0x0000"),
    ("transaction header", 20, 44, "typ: 1 - DATA"),
    ("typ", 20, 21, "1 - DATA"),
    ("seg/obj", 24, 28, "0x17bc3"),
    ("csc", 28, 34, "0x0000.004e9aed"),
    ("itc", 36, 38, "2"),
    ("flg", 38, 39, "0x32"),
    ("fsl", 39, 40, "0"),
    ("fnx / bdba", 40, 44, "0x388"),
    ("ITL 0x01", 44, 68, "0x0007.01d.000001d0 0x00000987.0390.27 --U- 1 0x0000.004e9af4"),
    ("xid", 44, 52, "0x0007.01d.000001d0"),
    ("uba", 52, 60, "0x00000987.0390.27"),
    ("flag / lck", 60, 62, "--U- 1"),
    ("scn/fsc", 62, 68, "0x0000.004e9af4"),
    ("ITL 0x02", 68, 92, "0x0000.000.00000000 0x00000000.0000.00 ---- 0 0x0000.00000000"),
    ("xid", 68, 76, "0x0000.000.00000000"),
    ("uba", 76, 84, "0x00000000.0000.00"),
    ("flag / lck", 84, 86, "---- 0"),
    ("scn/fsc", 86, 92, "0x0000.00000000"),
    ("(8 bytes before the data header)", 92, 100, "00 00 00 00 00 00 00 00"),
    ("data header", 100, 114, "tsiz: 0x1f98 ntab=1 nrow=1"),
    ("flag", 100, 101, "0x00"),
    ("ntab", 101, 102, "1"),
    ("nrow", 102, 104, "1"),
    ("frre", 104, 106, "-1"),
    ("fsbo", 106, 108, "0x14"),
    ("fseo", 108, 110, "0x1f8a"),
    ("avsp", 110, 112, "0x1f76"),
    ("tosp", 112, 114, "0x1f76"),
    ("table directory", 114, 118, "1 table(s)"),
    ("pti[0]", 114, 118, "nrow=1 offs=0"),
    ("row directory", 118, 120, "1 row(s)"),
    ("pri[0]", 118, 120, "offs=0x1f8a"),
    ("free space", 120, 8174, "avsp=0x1f76 tosp=0x1f76"),
    ("tab 0, row 0, @0x1f8a", 8174, 8188, "tl: 14 fb: --H-FL-- lb: 0x1 cc: 1"),
    ("flag", 8174, 8175, "fb: --H-FL--"),
    ("lock", 8175, 8176, "lb: 0x1"),
    ("cc", 8176, 8177, "1"),
    ("col 0", 8177, 8188, "[10] 'AAAAAAAAAA'"),
    ("tail", 8188, 8192, "0x9af40601 (scn 0x9af4, type 0x06, seq 0x01): consistent"),
]
GUESSED = "column types are not stored in the block: values are guessed (text, NUMBER or hex)"


def _tree(page) -> list[tuple]:
    return [(f.name, f.start, f.end, f.value) for top in page.fields for f in top.walk()]


def build(e: str = "<", *, typ: int = 1, itc: int = 2, gap: int = 8, tables=((b"\x2c\x01\x01\x02\xc1\x02",),),
          pti=None, pri=None, kdbh=None, flg: int = 0x06, type_: int = 6, seq: int = 1) -> bytes:
    """An 8 KB block in byte order ``e``: rows (whole row pieces) per table, packed from the end."""
    buf = bytearray(SIZE)
    struct.pack_into(e + "BBHIIHBBHH", buf, 0, type_, 0xA2, 0, (3 << 22) | 77, 0x0012ABCD, 0x0003, seq, flg, 0, 0)
    buf[0x14] = typ
    struct.pack_into(e + "IIH", buf, 0x18, 0x4D2, 0x0012ABC0, 3)
    struct.pack_into(e + "HBBI", buf, 0x24, itc, 0x32, 1, 0x00C0004D)
    if 0 < itc < 100:
        struct.pack_into(e + "HHIIHBxHHI", buf, 0x2C, 0xA, 0x1B, 0xC7D, 0x01000D2F, 0x2A2, 0x1D, 0x8001, 3, 0x12ABCD)
    kd = 0x2C + 24 * max(itc, 0) + gap
    if typ == 1 and kd < SIZE - 100:
        rows = [r for t in tables for r in t]
        ntab = len(tables)
        tsiz = SIZE - kd - 4
        offs, end = [], tsiz
        for r in rows:
            end -= len(r)
            offs.append(end)
            buf[kd + end:kd + end + len(r)] = r
        fsbo = 14 + 4 * ntab + 2 * len(rows)
        head = kdbh or (0, ntab, len(rows), -1, fsbo, offs[-1], offs[-1] - fsbo, offs[-1] - fsbo)
        struct.pack_into(e + "BBHhHHHH", buf, kd, *head)
        first = 0
        for t, rws in enumerate(tables):
            struct.pack_into(e + "HH", buf, kd + 14 + 4 * t, *(pti[t] if pti else (first, len(rws))))
            first += len(rws)
        struct.pack_into(e + f"{len(rows)}H", buf, kd + 14 + 4 * ntab, *(pri or offs))
    struct.pack_into(e + "I", buf, SIZE - 4, ((0x0012ABCD & 0xFFFF) << 16) | (type_ << 8) | seq)
    x = functools.reduce(operator.xor, struct.unpack(e + f"{SIZE // 2}H", buf), 0)
    struct.pack_into(e + "H", buf, 16, x)
    return bytes(buf)


def test_the_seed_block_field_by_field():
    page = OracleBlockDecoder().decode(seed_block(), 907)
    assert _tree(page) == SEED_FIELDS
    assert page.problems == (GUESSED,) and page.cells == 1


def test_a_big_endian_block_reads_as_its_little_endian_twin():
    little = OracleBlockDecoder().decode(build("<"), 77)
    big = OracleBlockDecoder("big").decode(build(">"), 77)
    assert [f for f in _tree(big) if f[0] != "chkval"] == [f for f in _tree(little) if f[0] != "chkval"]
    assert big.records == little.records == (("1",),)
    assert big.problems == little.problems == (GUESSED,)
    tree = {n: v for n, _s, _e, v in _tree(big)}
    assert tree["rdba"] == "0x00c0004d (3/77)" and tree["csc"] == "0x0003.0012abc0" and tree["fsl"] == "1"
    itl = next(f for f in big.fields if f.name == "ITL 0x01")
    assert itl.value == "0x000a.01b.00000c7d 0x01000d2f.02a2.1d C--- 1 0x0003.0012abcd"
    assert tree["xid"] == "0x0000.000.00000000" and tree["fnx / bdba"] == "0xc0004d"
    assert OracleBlockDecoder().decode(build(">"), 77).problems != big.problems  # the order matters


@pytest.mark.parametrize("typ, page_type", [(2, "index"), (5, "trans data")])
def test_other_transaction_kinds_keep_their_body(typ, page_type):
    page = OracleBlockDecoder().decode(build(typ=typ), 77)
    assert page.page_type == page_type and not page.problems and not page.records
    body = [f for f in page.fields if f.name == "block body"]
    assert [(f.start, f.end, f.value) for f in body] == [(0x2C + 48, SIZE - 4, "not decoded by tdescope")]
    assert page.fields[1].value == f"typ: {typ} - {'INDEX' if typ == 2 else '?'}"
    assert page.fields[1].children[0].value == f"{typ} - {'INDEX' if typ == 2 else 'unknown'}"


@pytest.mark.parametrize("itc", [0, 400])
def test_an_itl_count_that_does_not_fit(itc):
    page = OracleBlockDecoder().decode(build(itc=itc), 77)
    assert page.problems == (f"itc={itc} does not fit in the block; body not decoded",)
    assert [f.name for f in page.fields] == ["cache header", "transaction header", "tail"]


def test_a_data_header_right_after_the_itls():
    page = OracleBlockDecoder().decode(build(gap=0, itc=1), 77)
    names = [f.name for f in page.fields]
    assert "(8 bytes before the data header)" not in names and page.records == (("1",),)
    assert [(f.start, f.end) for f in page.fields if f.name == "data header"] == [(0x2C + 24, 0x2C + 24 + 14)]


def test_no_self_consistent_data_header():
    page = OracleBlockDecoder().decode(build(kdbh=(0, 1, 1, -1, 0x30, 0x40, 0, 0)), 77)
    assert page.problems == ("no self-consistent data header after the ITLs; rows not decoded",)
    assert page.page_type == "table data" and not page.records


def test_row_kinds_and_long_columns():
    long = b"\x2c\x00\x02\xfe\x01\x2c" + b"L" * 300 + b"\xff"
    deleted, continued = b"\x3c\x02", b"\x24\x00\x01\x01\x41"
    page = OracleBlockDecoder().decode(build(tables=((long, deleted, continued),)), 77)
    rows = {f.name: f for f in page.fields if f.name.startswith("tab ")}
    r0, r1, r2 = (next(f for n, f in rows.items() if n.startswith(f"tab 0, row {i},")) for i in range(3))
    assert r0.value == "tl: 307 fb: --H-FL-- lb: 0x0 cc: 2" and r0.end - r0.start == 307
    assert [(c.name, c.end - c.start, c.value[:6]) for c in r0.children[3:]] == [("col 0", 303, "[300] "),
                                                                                ("col 1", 1, "NULL")]
    assert r1.value == "tl: 2 fb: --HDFL-- lb: 0x2 (deleted)" and r1.end - r1.start == 2
    assert r2.value == "tl: 2 fb: --H--L-- lb: 0x0 (not a first row piece; not decoded)"
    assert [c.name for c in r1.children] == ["flag", "lock"]
    assert page.cells == 1 and page.records[0][1] == "NULL" and page.records[0][0].startswith("'LLL")
    assert page.problems == (GUESSED,)


def test_two_tables_and_their_directories():
    page = OracleBlockDecoder().decode(build(tables=((b"\x2c\x00\x01\x01\x41",), (b"\x2c\x00\x01\x01\x42",
                                                                                 b"\x2c\x00\x00"))), 77)
    tree = {n: v for n, _s, _e, v in _tree(page)}
    assert tree["table directory"] == "2 table(s)" and tree["pti[1]"] == "nrow=2 offs=1"
    assert tree["data header"].endswith("ntab=2 nrow=3")
    names = [f.name for f in page.fields if f.name.startswith("tab ")]
    assert sorted(n.split(",")[0] + n.split(",")[1] for n in names) == ["tab 0 row 0", "tab 1 row 0", "tab 1 row 1"]
    assert [f.start for f in page.fields if f.name.startswith("tab ")] == sorted(
        f.start for f in page.fields if f.name.startswith("tab "))  # rows shown in block order
    assert page.records == (("'A'",), ("'B'",), ())


def test_broken_directories_are_problems():
    past = OracleBlockDecoder().decode(build(pti=[(1, 2)]), 77)
    assert "pti[0] points past the row directory" in past.problems and past.cells == 0
    outside = OracleBlockDecoder().decode(build(pri=[0]), 77)
    assert "tab 0, row 0, @0x0: offset outside the data area (free or corrupt entry)" in outside.problems
    at_end = OracleBlockDecoder().decode(build(pri=[SIZE - 0x2C - 48 - 8 - 4 - 1]), 77)
    assert any("offset outside the data area" in p for p in at_end.problems)
    runs = OracleBlockDecoder().decode(build(tables=((b"\x2c\x00\x02\x09\x41",),)), 77)
    assert "tab 0, row 0, @0x1f93: column 0 runs past the data area" in runs.problems
    over = OracleBlockDecoder().decode(build(tables=((b"\x2c\x00\x03\x01\x41",),)), 77)
    assert any(p.endswith("column 1 runs past the data area") for p in over.problems)


def test_no_free_space_field_when_the_block_is_full():
    page = OracleBlockDecoder().decode(build(kdbh=None), 77)
    assert [f.value for f in page.fields if f.name == "free space"]
    kd = 0x2C + 48 + 8
    full = OracleBlockDecoder().decode(build(kdbh=(0, 1, 1, -1, 0x14, 0x14, 0, 0)), 77)
    assert not [f for f in full.fields if f.name == "free space"]
    assert full.fields[-1].name == "tail" and kd


def test_a_transaction_layer_too_short():
    layer = _kdb.decode_trans_block(bytes(0x2C + 14 + 3))
    assert layer.problems == ["block too short for a transaction header"] and not layer.fields
    layer = _kdb.decode_trans_block(bytes(0x2C + 14 + 4))
    assert layer.problems != ["block too short for a transaction header"]


@pytest.mark.parametrize("flg, text", [
    (0x00, "0x00"),
    (0x01, "0x01 (new block)"),
    (0x0C, "0x0c (checksum set, temporary block)"),
    (0x16, "0x16 (delayed logging change, checksum set, encrypted (TDE))"),
    (0x86, "0x86 (delayed logging change, checksum set, unknown 0x80)"),
])
def test_cache_header_flags(flg, text):
    page = OracleBlockDecoder().decode(build(flg=flg), 77)
    assert {c.name: c.value for c in page.fields[0].children}["flg"] == text


def test_unknown_block_type_and_a_torn_tail():
    blk = bytearray(build(type_=0x99))
    page = OracleBlockDecoder().decode(bytes(blk), 77)
    assert page.page_type == "unknown" and page.fields[0].value == "0x99=not in tdescope table"
    assert [(f.name, f.start, f.end) for f in page.fields[1:]] == [("body", 20, SIZE - 4), ("tail", SIZE - 4, SIZE)]
    assert page.fields[1].value == "0x99=not in tdescope table: body layout not decoded by tdescope"
    blk[-4:] = b"\x01\x99\x00\x00"
    torn = OracleBlockDecoder().decode(bytes(blk), 77)
    assert torn.fields[-1].value == ("0x00009901 (scn 0x0000, type 0x99, seq 0x01): torn, header expects "
                                     "0xabcd9901")
    assert "tail 0x00009901 does not match the header (expected 0xabcd9901): torn" in torn.problems
    assert "rdba says block 77, captured as block 78" in OracleBlockDecoder().decode(bytes(blk), 78).problems
