"""10046 trace parsing against recorded text in Oracle's formats (no Oracle here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tdescope.plugins.oracle import _trace_grammar as g
from tdescope.plugins.oracle.tkprof import format_tkprof, trace_report_text
from tdescope.plugins.oracle.trace import parse_trace, parse_trace_file, trace_report_json

DATA = Path(__file__).parent / "data" / "oracle"
MAIN = DATA / "trace_19c_tde_proc.trc"
INSERT = "INSERT INTO TEST_TAB_TDE VALUES(:B1 ,:B2 ,:B3 ,:B4 )"
DELETE = "DELETE FROM TEST_TAB_TDE WHERE GRP = :B2 AND ROWNUM <= :B1"
SELECT = "SELECT * FROM TEST_TAB_TDE WHERE GRP = :B2 AND ROWNUM <= :B1"
BEGIN = "BEGIN test_tab_tde_proc(2, 100); END;"


@pytest.fixture(scope="module")
def summary():
    return parse_trace_file(MAIN)


def _stmt(summary, text):
    (s,) = [s for s in summary.statements if s.text == text]
    return s


@pytest.mark.parametrize("line, expected", [
    ("PARSING IN CURSOR #140234567 len=52 dep=0 uid=104 oct=3 lid=104 tim=1234567890 hv=1234567 "
     "ad='7f3a' sqlid='abcd1234efgh5'", g.Parsing("140234567", 0, 104, "abcd1234efgh5", 1234567, 1234567890)),
    ("PARSING IN CURSOR #3 len=33 dep=1 uid=0 oct=3 lid=0 tim=1286440536541880 hv=2231383024 ad='3c0fc8f8' "
     "sqlid='6ahcr9x2j2v7h'", g.Parsing("3", 1, 0, "6ahcr9x2j2v7h", 2231383024, 1286440536541880)),
    ("PARSE #140234567:c=123,e=456,p=0,cr=0,cu=0,mis=1,r=0,dep=0,og=1,plh=0,tim=1234567890",
     g.Call("PARSE", "140234567", {"c": 123, "e": 456, "p": 0, "cr": 0, "cu": 0, "mis": 1, "r": 0, "dep": 0,
                                   "og": 1, "plh": 0, "tim": 1234567890})),
    ("CLOSE #140234567:c=0,e=2,dep=0,type=3,tim=99",
     g.Call("CLOSE", "140234567", {"c": 0, "e": 2, "dep": 0, "type": 3, "tim": 99})),
    ("WAIT #140234567: nam='db file sequential read' ela= 123 file#=7 block#=1234 blocks=1 obj#=73001 tim=1234567890",
     g.Wait("140234567", "db file sequential read", 123, (("file#", "7"), ("block#", "1234"), ("blocks", "1")),
            73001, 1234567890)),
    ("WAIT #0: nam='SQL*Net message to client' ela= 4 driver id=1650815232 #bytes=1 p3=0 obj#=-1 tim=5",
     g.Wait("0", "SQL*Net message to client", 4, (("driver id", "1650815232"), ("#bytes", "1"), ("p3", "0")), -1, 5)),
    ("WAIT #0x7ff225353470: nam='PGA memory operation' ela= 16 p1=131072 p2=0 p3=0 obj#=484 tim=15648003957",
     g.Wait("0x7ff225353470", "PGA memory operation", 16, (("p1", "131072"), ("p2", "0"), ("p3", "0")), 484,
            15648003957)),
    ("WAIT #7: nam='enq: TX - row lock contention' ela= 2919 name|mode=1415053318 usn<<16 | slot=327686 "
     "sequence=2118 obj#=97219 tim=42",
     g.Wait("7", "enq: TX - row lock contention", 2919,
            (("name|mode", "1415053318"), ("usn<<16 | slot", "327686"), ("sequence", "2118")), 97219, 42)),
    ("WAIT #1: nam='db file sequential read' ela= 17 p1=1 p2=2 p3=1",
     g.Wait("1", "db file sequential read", 17, (("p1", "1"), ("p2", "2"), ("p3", "1")), None, None)),
    ("STAT #5 id=1 cnt=1 pid=0 pos=1 obj=0 op='SORT AGGREGATE (cr=1045 pr=0 pw=0 time=9817 us)'",
     g.Stat("5", {"id": 1, "cnt": 1, "pid": 0, "pos": 1, "obj": 0}, "SORT AGGREGATE (cr=1045 pr=0 pw=0 time=9817 us)",
            {"cr": 1045, "pr": 0, "pw": 0, "time": 9817})),
    ("XCTEND rlbk=0, rd_only=1, tim=1234567890", g.XctEnd(False, True)),
    ("XCTEND rlbk=1, rd_only=0", g.XctEnd(True, False)),
    ("BINDS #140234567:", g.Binds("140234567")),
    ("*** SESSION ID:(372.53121) 2026-04-27T10:15:02.123499+02:00", g.Ignored()),
    ("*** 2026-04-27T10:15:02.123456+02:00", g.Ignored()),
    ("=====================", g.Ignored()),
    ("", g.Ignored()),
    ("EXEC #1:c=1x0,e=2", g.Malformed()),
    ("FETCH #1:", g.Malformed()),
    ("WAIT #1: nam='db file seq", g.Malformed()),
    ("Oracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production", g.Unknown()),
])
def test_line_grammar(line, expected):
    assert g.classify(line) == expected


@pytest.mark.parametrize("text, kind, expected", [
    # count, cpu_us, elapsed_us, disk, query, current, rows, misses -- summed by hand from the fixture
    (BEGIN, "parse", (1, 812, 1203, 0, 0, 0, 0, 1)),
    (BEGIN, "execute", (1, 11250, 24980, 7, 71, 1145, 1, 0)),
    (BEGIN, "fetch", (0, 0, 0, 0, 0, 0, 0, 0)),
    # parse on two cursor numbers: 120+15, 130+16
    (INSERT, "parse", (2, 135, 146, 0, 0, 0, 0, 1)),
    # EXEC on B, on D, and on B again after its soft CLOSE type=3 (the malformed 19O0 line is skipped):
    # c 2100+1800+1900, e 3875+3300+3400, p 1, cr 12+10+11, cu 146+140+139, r 300
    (INSERT, "execute", (3, 5800, 10575, 1, 33, 425, 300, 1)),
    (DELETE, "parse", (1, 95, 101, 0, 0, 2, 0, 1)),
    (DELETE, "execute", (1, 4210, 7522, 0, 5, 718, 100, 1)),
    (DELETE, "fetch", (0, 0, 0, 0, 0, 0, 0, 0)),
    # same cursor number as DELETE, rebound after CLOSE type=0: its calls are its own
    (SELECT, "parse", (1, 88, 90, 0, 0, 0, 0, 1)),
    (SELECT, "execute", (1, 140, 151, 0, 0, 0, 0, 1)),
    (SELECT, "fetch", (2, 970, 1862, 6, 33, 0, 100, 0)),
])
def test_calls_per_statement(summary, text, kind, expected):
    c = _stmt(summary, text).calls[kind]
    assert (c.count, c.cpu_us, c.elapsed_us, c.disk, c.query, c.current, c.rows, c.misses) == expected


@pytest.mark.parametrize("text, event, expected", [
    (BEGIN, "SQL*Net message to client", (1, 4, 4)),
    (BEGIN, "SQL*Net message from client", (1, 2145870, 2145870)),
    (INSERT, "db file sequential read", (1, 310, 310)),
    (INSERT, "PGA memory operation", (1, 25, 25)),
    (SELECT, "db file scattered read", (1, 842, 842)),
    (SELECT, "db file sequential read", (1, 190, 190)),
])
def test_waits_per_statement(summary, text, event, expected):
    w = _stmt(summary, text).waits[event]
    assert (w.count, w.total_ela_us, w.max_ela_us) == expected


def test_statement_identity(summary):
    assert [s.text for s in summary.statements] == [BEGIN, INSERT, DELETE, SELECT]
    assert [s.depth for s in summary.statements] == [0, 1, 1, 1]
    ins = _stmt(summary, INSERT)
    assert ins.sql_id == "fj7pznj6y4qtg"
    assert ins.cursors == ("140589372817160", "140589372774536")
    assert _stmt(summary, DELETE).waits == {}
    assert _stmt(summary, DELETE).plan_hash == 3946523731
    assert [op.operation.split(" (")[0] for op in _stmt(summary, DELETE).plan] == [
        "DELETE  TEST_TAB_TDE", "COUNT STOPKEY", "INDEX RANGE SCAN TEST_TAB_TDE_IDX2"]
    assert _stmt(summary, SELECT).plan[1].cr == 33


def test_whole_file(summary):
    waits = {e: (w.count, w.total_ela_us, w.max_ela_us) for e, w in summary.waits.items()}
    assert waits == {
        "db file sequential read": (2, 500, 310),
        "PGA memory operation": (3, 633, 592),  # 25 on a cursor, 16 and 592 on WAIT #0
        "db file scattered read": (1, 842, 842),
        "SQL*Net message to client": (1, 4, 4),
        "SQL*Net message from client": (1, 2145870, 2145870),
    }
    assert summary.skipped_lines == 2
    assert [n for n, _ in summary.skipped_samples] == [86, 88]
    assert not summary.truncated
    assert (summary.commits, summary.rollbacks) == (2, 0)
    assert summary.header[0].startswith("Trace file ")
    assert summary.time_unit_us == 1


def test_pga_memory_operations(summary):
    ops = [(o.cursor, o.ela_us, o.p1, o.p2, o.p3, o.kind) for o in summary.pga_operations]
    assert ops == [
        ("140589372817160", 25, 65536, 1, 0, "allocate"),
        ("0", 16, 131072, 0, 0, "allocate"),
        ("0", 592, 0, 0, 0, "release"),
    ]


def test_json_shape(summary):
    doc = trace_report_json(MAIN.read_text().splitlines(keepends=True))
    assert doc == summary.to_json()
    assert set(doc) == {"statements", "waits"}
    s = doc["statements"][1]
    assert set(s) == {"sql_id", "text", "depth", "calls", "waits"}
    assert set(s["calls"]) == {"parse", "execute", "fetch"}
    assert set(s["calls"]["execute"]) == {"count", "cpu_us", "elapsed_us", "disk", "query", "current", "rows"}
    assert s["waits"]["db file sequential read"] == {"count": 1, "total_ela_us": 310, "max_ela_us": 310}


def test_truncated_inside_statement_text():
    s = parse_trace_file(DATA / "trace_122_truncated.trc")
    assert s.truncated
    assert [x.text for x in s.statements] == ["select count(*) from t2", "select /* second */ count(*)\n  from t2 wh"]
    first = s.statements[0]
    assert first.cursors == ("0x7f5ba9596310",)
    assert (first.calls["fetch"].cpu_us, first.calls["fetch"].disk, first.calls["fetch"].rows) == (3598000, 6397, 1)
    assert [(o.p1, o.p2, o.kind) for o in s.pga_operations] == [(2097152, 1114112, "allocate"), (0, 0, "release")]
    assert s.skipped_lines == 0


def test_truncated_in_the_middle_of_a_record():
    lines = MAIN.read_text().splitlines(keepends=True)[:60]
    lines.append("WAIT #140589372795848: nam='db file sequential read' ela= 19")  # cut, no newline
    s = parse_trace(lines)
    assert s.truncated and s.skipped_lines == 1
    assert "db file sequential read" not in _stmt(s, SELECT).waits


@pytest.mark.parametrize("lines, expected_exec_count", [
    # soft close (type=3) keeps the binding: a cached cursor executes again without PARSING IN CURSOR
    (["CLOSE #9:c=0,e=1,dep=0,type=3,tim=3", "EXEC #9:c=5,e=6,p=0,cr=0,cu=0,mis=0,r=0,dep=0,og=1,plh=0,tim=4"], 2),
    # hard close (type=0) frees the number: a later EXEC on it belongs to no known statement
    (["CLOSE #9:c=0,e=1,dep=0,type=0,tim=3", "EXEC #9:c=5,e=6,p=0,cr=0,cu=0,mis=0,r=0,dep=0,og=1,plh=0,tim=4"], 1),
])
def test_close_types(lines, expected_exec_count):
    head = ["PARSING IN CURSOR #9 len=8 dep=0 uid=1 oct=3 lid=1 tim=1 hv=2 ad='a' sqlid='x'", "select 1", "END OF STMT",
            "EXEC #9:c=1,e=2,p=0,cr=0,cu=0,mis=0,r=0,dep=0,og=1,plh=0,tim=2"]
    s = parse_trace(head + lines)
    assert s.statements[0].calls["execute"].count == expected_exec_count
    assert s.unattributed_calls == 2 - expected_exec_count


def test_parse_error_text_is_not_counted_as_garbage():
    s = parse_trace([
        "PARSE ERROR #5:len=24 dep=0 uid=84 oct=3 lid=84 tim=100 err=942",
        "select * from no_such_t",
        "WAIT #5: nam='SQL*Net break/reset to client' ela= 3 driver id=1650815232 break?=1 p3=0 obj#=-1 tim=101",
    ])
    assert s.skipped_lines == 0 and s.statements == ()
    assert s.waits["SQL*Net break/reset to client"].count == 1


def test_centisecond_traces_before_9i():
    s = parse_trace([
        "Oracle8i Enterprise Edition Release 8.1.7.4.0 - Production",
        "PARSING IN CURSOR #1 len=8 dep=0 uid=5 oct=3 lid=5 tim=100 hv=7 ad='b'",
        "select 1",
        "END OF STMT",
        "EXEC #1:c=2,e=3,p=0,cr=0,cu=0,mis=0,r=0,dep=0,og=4,tim=100",
        "WAIT #1: nam='db file sequential read' ela= 1 p1=1 p2=2 p3=1",
    ])
    assert s.time_unit_us == 10_000
    assert s.statements[0].sql_id == ""
    assert (s.statements[0].calls["execute"].cpu_us, s.statements[0].calls["execute"].elapsed_us) == (20000, 30000)
    assert s.waits["db file sequential read"].total_ela_us == 10000


def test_garbage_never_raises():
    s = parse_trace(["\x00\xff", "PARSE #", "WAIT #:", "STAT #1 op='x'", "END OF STMT", "PARSING IN CURSOR #1 dep=x"])
    # lines before the first valid record that match nothing are taken for header text
    assert s.skipped_lines == 4 and s.statements == ()
    assert s.header == ("\x00\xff", "END OF STMT")


def test_tkprof_text(summary):
    text = format_tkprof(summary)
    assert text == trace_report_text(MAIN.read_text().splitlines(keepends=True))
    assert "call     count       cpu    elapsed       disk      query    current        rows" in text
    # INSERT execute row: cpu 5800 us -> 0.01 s, elapsed 10575 us -> 0.01 s
    assert "Execute      3      0.01       0.01          1         33        425         300" in text
    assert "total        5      0.01       0.01          1         33        425         300" in text
    assert "Elapsed times include waiting on following events:" in text
    assert "  SQL*Net message from client                      1        2.15          2.15" in text
    assert "Parsing user id: 104  (recursive depth: 1)" in text
    assert "OVERALL TOTALS FOR ALL RECURSIVE STATEMENTS" in text
    assert "2 lines skipped" in text
