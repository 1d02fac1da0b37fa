"""Everything the 10046 trace parser reads, pinned: the recorded traces against their expected summary
(``tests/data/oracle/trace_*.expected.json``, every field), and small traces for the defaults and the
line-ending and encoding cases.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tdescope.plugins.oracle import _trace_grammar as g
from tdescope.plugins.oracle.trace import parse_trace, parse_trace_file

DATA = Path(__file__).parent / "data" / "oracle"
PARSING = ("PARSING IN CURSOR #7 len=8 dep=0 uid=5 oct=3 lid=5 tim=10 hv=42 ad='1' sqlid='abc'\n"
           "select 1\nEND OF STMT\n")


def _plain(v):
    if dataclasses.is_dataclass(v):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


@pytest.mark.parametrize("name", ["trace_19c_tde_proc", "trace_122_truncated"])
def test_every_field_of_the_recorded_traces(name):
    expected = json.loads((DATA / f"{name}.expected.json").read_text())
    assert json.loads(json.dumps(_plain(parse_trace_file(DATA / f"{name}.trc")))) == expected


def test_crlf_lines_and_bytes_that_are_not_utf8(tmp_path):
    lf = (DATA / "trace_19c_tde_proc.trc").read_bytes()
    path = tmp_path / "crlf.trc"
    path.write_bytes(lf.replace(b"\n", b"\r\n").replace(b"Node name:", b"Node \xff name:"))
    crlf = _plain(parse_trace_file(path))
    plain = _plain(parse_trace_file(DATA / "trace_19c_tde_proc.trc"))
    assert crlf["header"][6] == "Node \ufffd name:\tdb01"
    crlf["header"][6] = plain["header"][6]
    assert crlf == plain


def test_defaults_of_parsing_lines_and_plan_lines():
    rec = g.classify("PARSING IN CURSOR #9 len=8 dep=2 oct=3 sqlid='q'")
    assert rec == g.Parsing("9", 2, -1, "q", 0, 0)
    assert g.classify("PARSING IN CURSOR #9 len=8 dep=0x1f uid=0x10 hv=0x2a tim=0xff sqlid='q'") == g.Parsing(
        "9", 31, 16, "q", 42, 255)
    summary = parse_trace((PARSING + "EXEC #7:c=1,e=2\nSTAT #7 id=1 op='X (cr=1 pr=2 pw=3 time=4 us)'\n"
                           "STAT #7 id=2 cnt=5 pid=1 pos=2 obj=99 op='Y'\n").splitlines(keepends=True))
    (stmt,) = summary.statements
    assert _plain(stmt.plan) == [
        {"id": 1, "parent_id": 0, "position": 0, "obj": 0, "rows": 0, "operation": "X (cr=1 pr=2 pw=3 time=4 us)",
         "cr": 1, "pr": 2, "pw": 3, "time_us": 4},
        {"id": 2, "parent_id": 1, "position": 2, "obj": 99, "rows": 5, "operation": "Y",
         "cr": None, "pr": None, "pw": None, "time_us": None}]
    assert (stmt.uid, stmt.hash_value, stmt.depth) == (5, 42, 0)


def test_close_needs_no_times_and_a_parse_error_names_its_cursor():
    assert g.classify("CLOSE #7:dep=0,type=0") == g.Call("CLOSE", "7", {"dep": 0, "type": 0})
    assert g.classify("EXEC #7:dep=0") == g.Malformed()
    text = "PARSE ERROR #12:len=9 dep=0 uid=5 oct=3 lid=5 tim=1 err=942\nselect x\n"
    rec = g.classify(text.splitlines()[0])
    assert rec == g.ParseError("12")
    summary = parse_trace((PARSING + text + "garbage after\n" + "EXEC #7:c=1,e=2\ngarbage\n").splitlines(True))
    assert summary.skipped_samples == ((8, "garbage"),)  # the failing SQL text is not garbage
    assert summary.statements[0].calls["execute"].count == 1


def test_records_keep_their_line_numbers_and_cursors():
    summary = parse_trace((PARSING + "junk line\nWAIT #7: nam='PGA memory operation' ela= 3 p1=1 p2=0 p3=0 "
                           "obj#=4 tim=5\nXCTEND rlbk=0, rd_only=1\n").splitlines(True))
    assert summary.skipped_samples == ((4, "junk line"),) and summary.header == ()  # after the first record
    (op,) = summary.pga_operations
    assert (op.line_no, op.cursor, op.ela_us, op.p1, op.obj, op.tim) == (5, "7", 3, 1, 4, 5)
    assert summary.commits == 1 and summary.truncated is False


def test_a_record_cut_by_the_end_of_the_file_is_a_skipped_sample():
    lines = (PARSING + "EXEC #7:c=1,e=2\nWAIT #7: nam='db file sequential read' ela= 19").splitlines(True)
    summary = parse_trace(lines)
    assert summary.truncated is True and summary.skipped_samples == (
        (5, "WAIT #7: nam='db file sequential read' ela= 19"),)
    empty = parse_trace([])
    assert empty.truncated is False and empty.statements == () and empty.header == ()


def test_what_a_line_keeps_of_its_ending(tmp_path):
    """Only the line break goes: a trailing X stays, a lone CR inside a statement's text stays."""
    path = tmp_path / "cr.trc"
    path.write_bytes(b" indented first line\nVersion X\n" + PARSING.replace("select 1", "select\r1").encode())
    summary = parse_trace_file(path)
    assert summary.header == (" indented first line", "Version X")
    assert summary.statements[0].text == "select\r1"


def test_calls_without_optional_values_and_the_statement_total():
    summary = parse_trace((PARSING + "PARSE #7:c=3,e=4\nEXEC #7:c=1,e=2,cr=5\nFETCH #7:c=10,e=20,r=1,mis=1\n"
                           "CLOSE #7:c=0,e=1\nEXEC #7:c=1,e=1\n").splitlines(True))
    (stmt,) = summary.statements
    assert stmt.calls["execute"].misses == 0 and stmt.calls["parse"].misses == 0
    assert summary.unattributed_calls == 1  # a CLOSE without type= is a hard close
    total = stmt.total()
    assert (total.count, total.cpu_us, total.elapsed_us, total.query, total.rows, total.misses) == (3, 14, 26, 5, 1, 1)
