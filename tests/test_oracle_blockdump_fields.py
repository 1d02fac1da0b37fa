"""Everything the block dump parser reads, pinned: the recorded dumps against their expected parse
(``tests/data/oracle/*.expected.json``, every field of every block), and small dumps for each branch of
the memory, column and header grammar.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tdescope.plugins.oracle.blockdump import parse_blockdump, parse_blockdump_file

DATA = Path(__file__).parent / "data" / "oracle"
HEAD = "Block header dump:  0x0000038b\n"
MEM = "buffer tsn: 5 rdba: 0x0000038b (1024/907)\nDump of memory from 0x1000 to 0x1040\n"


def _parsed(name: str) -> list[dict]:
    out = []
    for b in parse_blockdump_file(DATA / f"{name}.trc"):
        doc = b.to_json()
        mem = doc.pop("memory")
        doc["memory_sha256"] = hashlib.sha256(bytes.fromhex(mem)).hexdigest() if mem else None
        out.append(doc)
    return out


@pytest.mark.parametrize("name", ["blockdump_tde_907", "blockdump_assorted"])
def test_every_field_of_the_recorded_dumps(name):
    expected = json.loads((DATA / f"{name}.expected.json").read_text())
    assert _parsed(name) == expected


def test_memory_lines_fill_the_block_at_their_offsets():
    (b,) = parse_blockdump(MEM + "000001000 04030201 08070605 0C0B0A09 100F0E0D  [................]\n"
                                 "        Repeat 2 times\n"
                                 "000001030 44434241 00000000 00000000 11223344  [ABCD............]\n")
    assert b.memory_address == 0x1000 and len(b.memory) == 0x40 and not b.problems
    assert b.memory[:16] == bytes(range(1, 17)) == b.memory[16:32] == b.memory[32:48]
    assert b.memory[48:52] == b"ABCD" and b.memory[60:64] == bytes.fromhex("44332211")
    (big,) = parse_blockdump(MEM + "000001000 01020304\n", byteorder="big")
    assert big.memory[:4] == bytes.fromhex("01020304")


@pytest.mark.parametrize("text, problem", [
    ("Dump of memory from 0x2000 to 0x1000\n", "memory dump range 0x2000..0x1000 ignored"),
    ("Dump of memory from 0x1000 to 0x1000\n", "memory dump range 0x1000..0x1000 ignored"),
    ("Dump of memory from 0x0 to 0x100001\n", "memory dump range 0x0..0x100001 ignored"),
    ("Dump of memory from 0x1000 to 0x1010\n000000FF0 00000000\n", "hex line at 000000FF0 outside the dumped range"),
    ("Dump of memory from 0x1000 to 0x1010\n000001010 00000000\n", "hex line at 000001010 outside the dumped range"),
    ("Dump of memory from 0x1000 to 0x1010\n00000100C 00000000 00000000\n",
     "hex line at 00000100C outside the dumped range"),
])
def test_memory_lines_outside_the_range_are_problems(text, problem):
    (b,) = parse_blockdump("buffer tsn: 5 rdba: 0x0000038b (1024/907)\n" + text)
    assert b.problems == (problem,)


def test_the_smallest_and_the_largest_memory_ranges():
    (one,) = parse_blockdump("buffer tsn: 5 rdba: 0x0000038b (1024/907)\nDump of memory from 0x1000 to 0x1001\n")
    assert len(one.memory) == 1 and not one.problems
    (mb,) = parse_blockdump("buffer tsn: 5 rdba: 0x0000038b (1024/907)\nDump of memory from 0x0 to 0x100000\n")
    assert len(mb.memory) == 1 << 20 and not mb.problems
    (last,) = parse_blockdump(MEM + "000001000 01020304\n00000103C 05060708\n")
    assert last.memory[:4] == bytes.fromhex("04030201") and last.memory[-4:] == bytes.fromhex("08070605")


def test_a_repeat_before_any_hex_line_changes_nothing():
    (b,) = parse_blockdump(MEM + "        Repeat 3 times\n")
    assert b.memory == bytes(0x40) and not b.problems


def test_header_lines_with_decimal_and_hex_numbers():
    (b,) = parse_blockdump(HEAD + " Object id on Block? N\n"
                           " seg/obj: 0x17bc3  csc: 0x00.4e9aed  itc: 12  flg: E  typ: 2 - INDEX\n"
                           "     brn: 7  bdba: 0x388 ver: 0x01 opc: 11\n"
                           "     inc: 13  exflg: 14\n"
                           "data_block_dump,data header at 0x7f140f335374\n"
                           "tsiz: 0x1f98\nhsiz: 0x14\npbl: 0x7f140f335374\n"
                           "flag=--------\nntab=11\nnrow=12\nfrre=-1\nfsbo=0x14\n"
                           "0x12:pri[10]	sfll=15\n"
                           "0x14:pri[11]	offs=0x1f8a\n")
    h = b.header
    assert (h.object_id_on_block, h.seg_obj, h.csc, h.itc, h.flg, h.typ, h.typ_name) == (
        False, 0x17BC3, 0x4E9AED, 12, "E", 2, "INDEX")
    assert (h.brn, h.bdba, h.ver, h.opc, h.inc, h.exflg) == (7, 0x388, 1, 11, 13, 14)
    dh = b.data_header
    assert (dh.tsiz, dh.hsiz, dh.pbl, dh.flag, dh.ntab, dh.nrow, dh.frre, dh.fsbo) == (
        0x1F98, 0x14, 0x7F140F335374, "--------", 11, 12, -1, 0x14)
    assert [(r.index, r.offs, r.header_offset, r.sfll) for r in b.row_dir] == [(10, None, 0x12, 15),
                                                                               (11, 0x1F8A, 0x14, None)]


def test_columns_on_continuation_lines_and_nulls():
    (b,) = parse_blockdump(HEAD + "tab 0, row 0, @0x10\ntl: 9 fb: --H-FL-- lb: 0x0  cc: 3\n"
                           "col  0: [ 2]\n c1 02\n 03\ncol  1: *NULL*\ncol  2: [ 1]  41\nend_of_block_dump\n")
    (row,) = b.rows
    assert [(c.index, c.length, c.data) for c in row.columns] == [(0, 2, b"\xc1\x02"), (1, 0, None), (2, 1, b"A")]
    assert not b.problems and b.complete


def test_a_line_that_does_not_parse_is_a_problem_with_its_number():
    (b,) = parse_blockdump(HEAD + "tab 0, row 0, @0x10\ncol  0: [ 2]  c1 0\n")
    assert len(b.problems) == 1 and b.problems[0].startswith("line 3: ") and b.problems[0].endswith(
        ": col  0: [ 2]  c1 0")
    assert b.first_line == 1
    two = parse_blockdump("junk\n" + HEAD + "end_of_block_dump\n" + HEAD)
    assert [x.first_line for x in two] == [2, 4]
