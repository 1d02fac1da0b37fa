"""Block dump text parsing, NUMBER decoding, and dumps shown as DecodedPages."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tdescope.plugins.oracle.blockdump import blockdump_report_json, parse_blockdump, parse_blockdump_file, scn_value
from tdescope.plugins.oracle.blockdump_render import blockdump_report_text, blockdump_to_page
from tdescope.plugins.oracle.blocks import xor_checksum
from tdescope.plugins.oracle.column_values import decode_number, guess_column

DATA = Path(__file__).parent / "data" / "oracle"


@pytest.mark.parametrize("hexbytes, value", [
    ("80", "0"),
    ("c1 02", "1"),
    ("c1 03", "2"),
    ("c2 02", "100"),
    ("c2 02 18 2e", "123.45"),
    ("c0 02", "0.01"),
    ("c1 02 33", "1.5"),
    ("3e 64 66", "-1"),
    ("3d 64 4e 38 66", "-123.45"),
    ("3f 64 66", "-0.01"),
    ("80 02", "1E-130"),  # the smallest positive NUMBER: exponent byte 0x80, digit 1
    ("ff " + "64 " * 20, "9.999999999999999999999999999999999999999E+125"),  # the largest
    ("c5 0b 23 39 4f 5b", "1034567890"),
])
def test_decode_number(hexbytes, value):
    assert decode_number(bytes.fromhex(hexbytes)) == value


@pytest.mark.parametrize("hexbytes", ["", "c1", "c1 00", "3e 64", "c1 66", "41 41 41"])
def test_decode_number_rejects(hexbytes):
    with pytest.raises(ValueError):
        decode_number(bytes.fromhex(hexbytes))


@pytest.mark.parametrize("data, shown", [
    (None, "NULL"),
    (b"AAAAAAAAAA", "'AAAAAAAAAA'"),
    (bytes.fromhex("c1 02"), "1"),
    (bytes.fromhex("3e 64 66"), "'>df' or NUMBER -1"),
    (bytes.fromhex("fd e0 87"), "0xfde087"),
])
def test_guess_column(data, shown):
    assert guess_column(data) == shown


@pytest.mark.parametrize("text, value", [
    ("0x0.4e9af4", 0x4E9AF4), ("0x0000.004e9af4", 0x4E9AF4), ("0x0001.00000002", (1 << 32) | 2),
    ("0x0000000000e7a9a1", 0xE7A9A1),
])
def test_scn_value(text, value):
    assert scn_value(text) == value


@pytest.fixture(scope="module")
def tde():
    return parse_blockdump_file(DATA / "blockdump_tde_907.trc")


@pytest.fixture(scope="module")
def assorted():
    return parse_blockdump_file(DATA / "blockdump_assorted.trc")


def test_encrypted_header_only(tde):
    b = tde[0]
    assert b.encrypted_header_only and b.header is None and b.memory is None
    c = b.cache
    assert (c.tsn, c.rdba, c.rfile, c.block) == (5, 0x38B, 1024, 907)
    assert (c.scn, c.seq, c.flg, c.tail, c.frmt, c.chkval, c.type, c.type_name) == (
        0x4E9AF4, 1, 0x16, 0x9AF40601, 2, 0xF23A, 6, "trans data")
    page = blockdump_to_page(b)
    assert page.page_type == "encrypted" and "_sga_clear_dump" in page.problems[0]


def test_full_dump_with_memory(tde):
    b = tde[1]
    assert b.complete and not b.problems
    assert b.memory_address == 0x7F140F335310 and len(b.memory) == 8192
    assert b.memory[:4] == bytes.fromhex("06a20000") and b.memory[-4:] == bytes.fromhex("0106f49a")
    assert xor_checksum(b.memory) == 0  # the Repeat lines expanded to the right length
    h = b.header
    assert (h.dba, h.object_id_on_block, h.seg_obj, h.csc, h.itc, h.flg, h.typ, h.typ_name) == (
        0x38B, True, 0x17BC3, 0x4E9AED, 2, "E", 1, "DATA")
    assert (h.brn, h.bdba, h.ver, h.opc, h.inc, h.exflg) == (0, 0x388, 1, 0, 0, 0)
    itl = h.itl[0]
    assert (itl.itl, itl.xid, itl.uba, itl.flag, itl.lck, itl.scn_kind, itl.scn_fsc) == (
        1, "0x0007.01d.000001d0", "0x00000987.0390.27", "--U-", 1, "fsc", "0x0000.004e9af4")
    assert len(h.itl) == 2 and h.itl[1].flag == "----"
    dh = b.data_header
    assert (dh.address, dh.tsiz, dh.hsiz, dh.pbl, dh.flag, dh.ntab, dh.nrow, dh.frre, dh.fsbo, dh.fseo, dh.avsp,
            dh.tosp) == (0x7F140F335374, 0x1F98, 0x14, 0x7F140F335374, "--------", 1, 1, -1, 0x14, 0x1F8A,
                         0x1F76, 0x1F76)
    assert [(t.table, t.nrow, t.offs, t.header_offset) for t in b.table_dir] == [(0, 1, 0, 0xE)]
    assert [(r.index, r.offs, r.header_offset) for r in b.row_dir] == [(0, 0x1F8A, 0x12)]
    (row,) = b.rows
    assert (row.table, row.row, row.offset, row.tl, row.fb, row.lb, row.cc) == (0, 0, 0x1F8A, 14, "--H-FL--", 1, 1)
    assert row.columns[0].data == b"A" * 10


def test_memory_page_has_exact_spans(tde):
    page = blockdump_to_page(tde[1])
    assert page.page_type == "table data" and page.records == (("'AAAAAAAAAA'",),)
    row = page.field_at(0x1FF2)  # inside the column bytes of the only row
    assert row.name == "col 0" and (row.start, row.end) == (0x1FF1, 0x1FFC)
    assert not any("rebuilt" in p for p in page.problems)


def test_column_encrypted_block_without_cache_header(assorted):
    b = assorted[0]
    assert b.cache is None and b.header.dba == 0x32B and b.complete
    (row,) = b.rows
    assert [c.length for c in row.columns] == [2, 52]
    assert row.columns[1].data[:3] == bytes.fromhex("fde087") and row.columns[1].data[-2:] == b"\xe9\x01"
    page = blockdump_to_page(b)
    assert page.page_type == "table data"
    assert page.records[0][0] == "1" and page.records[0][1].startswith("0xfde087")
    assert any("rebuilt" in p for p in page.problems) and any("no cache header" in p for p in page.problems)


def test_hand_written_19c_block(assorted):
    b = assorted[1]
    c = b.cache
    assert (c.rfile, c.block, c.scn, c.seq, c.tail) == (5, 156, 0xE7A9A1, 2, 0xA9A10602)
    assert b.header.csc == 0xE7A99E and b.header.itl[1].scn_fsc == "0x000d.00000000"
    assert [r.deleted for r in b.rows] == [False, False, True]
    assert [[guess_column(col.data) for col in r.columns] for r in b.rows] == [
        ["1", "'alpha'", "123.45"], ["2", "NULL", "'>df' or NUMBER -1"], []]
    page = blockdump_to_page(b)
    # rebuilt bytes put the rows where the dump says: data header + row offset
    assert page.records == (("1", "'alpha'", "123.45"), ("2", "NULL", "'>df' or NUMBER -1"))
    deleted = next(f for f in page.fields if f.name == "tab 0, row 2, @0x1f7a")
    assert deleted.start == 0x64 + 0x1F7A and "deleted" in deleted.value
    assert page.problems[0].startswith("no hex memory dump in the trace")


def test_json_and_text(tde):
    text = (DATA / "blockdump_tde_907.trc").read_text()
    doc = blockdump_report_json(text)
    json.dumps(doc)
    assert len(doc["blocks"]) == 2
    assert doc["blocks"][1]["rows"][0]["columns"][0]["data"] == "41" * 10
    assert doc["blocks"][1]["memory_length"] == 8192
    assert doc["blocks"][0]["encrypted_header_only"] is True
    human = blockdump_report_text(text)
    assert "rdba 0x0000038b (1024/907)" in human and "'AAAAAAAAAA'" in human and "2 block(s)" in human


@pytest.mark.parametrize("text, blocks", [
    ("", 0),
    ("nothing to see\n", 0),
    ("Block header dump:  0x0000038b\ncol  0: [zz]\ntab 0, row 0, @0xzz\n", 1),
    ("buffer tsn: 5 rdba: 0x0000038b (1024/907)\nDump of memory from 0x10 to 0x20\n"
     "0000000010 00000000 00000000 00000000 00000000  [................]\n        Repeat 99 times\n", 1),
    ("Block header dump:  0x0000038b\ntab 0, row 0, @0x10\ntl: 5 fb: --H-FL-- lb: 0x0  cc: 1\ncol  0: [ 9]  c1\n", 1),
])
def test_malformed_dumps_never_raise(text, blocks):
    parsed = parse_blockdump(text)
    assert len(parsed) == blocks
    for b in parsed:
        blockdump_to_page(b)
        b.to_json()


def test_short_column_is_reported():
    (b,) = parse_blockdump("Block header dump:  0x0000038b\ntab 0, row 0, @0x10\n"
                           "tl: 5 fb: --H-FL-- lb: 0x0  cc: 1\ncol  0: [ 9]  c1\nend_of_block_dump\n")
    assert b.rows[0].columns[0].data == b"\xc1"
    assert b.problems == ("col 0: 1 bytes dumped, [9] announced",)
