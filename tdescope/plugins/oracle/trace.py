"""10046 SQL trace files (levels 1/4/8/12) summarised per statement, tkprof-style.

:func:`parse_trace` reads the raw lines Oracle writes (``PARSING IN CURSOR``,
``PARSE``/``EXEC``/``FETCH``/``CLOSE``, ``WAIT``, ``STAT``, ``XCTEND``...) and
aggregates calls and waits per statement, keyed by sql_id and SQL text over
every cursor number that held the statement. It never raises on bad input:
lines that do not parse are counted in :attr:`TraceSummary.skipped_lines`.

Cursor numbers are reused: a ``PARSING IN CURSOR #n`` rebinds ``#n`` to a new
statement, and a hard close (``CLOSE ... type=0``) frees the number. Soft
closes (type 1-3: the cursor goes to the session or PL/SQL cursor cache) keep
the binding, because the cached cursor can be executed again without a new
``PARSING IN CURSOR`` line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
import dataclasses
from dataclasses import dataclass, field

from tdescope.app.system.statement_text import mask_literals
from tdescope.plugins.oracle import _trace_grammar as g
from tdescope.plugins.oracle._trace_records import (
    CALL_KINDS,
    CallStats,
    PgaMemoryOperation,
    RowSourceOp,
    StatementSummary,
    TraceSummary,
    WaitStats,
)

__all__ = [
    "CALL_KINDS",
    "CallStats",
    "PgaMemoryOperation",
    "RowSourceOp",
    "StatementSummary",
    "TraceSummary",
    "WaitStats",
    "masked_summary",
    "parse_trace",
    "parse_trace_file",
    "trace_report_json",
]

_CALL_KIND = {"PARSE": "parse", "EXEC": "execute", "FETCH": "fetch"}
_PGA_EVENT = "PGA memory operation"
#: Kept verbatim for diagnosis; more would only bloat the summary.
_MAX_SKIPPED_SAMPLES = 20
#: Before Oracle 9i, c/e/ela were centiseconds; since 9i they are microseconds.
_CENTISECOND_US = 10_000


@dataclass
class _Stmt:
    """Mutable accumulator behind a StatementSummary."""

    sql_id: str
    text: str
    depth: int
    uid: int
    hash_value: int
    plan_hash: int = 0
    cursors: list[str] = field(default_factory=list)
    calls: dict[str, CallStats] = field(default_factory=lambda: {k: CallStats() for k in CALL_KINDS})
    waits: dict[str, WaitStats] = field(default_factory=dict)
    plan: list[RowSourceOp] = field(default_factory=list)

    def freeze(self) -> StatementSummary:
        return StatementSummary(self.sql_id, self.text, self.depth, self.uid, self.hash_value,
                                self.plan_hash, tuple(self.cursors), dict(self.calls),
                                dict(self.waits), tuple(self.plan))


def _add_wait(table: dict[str, WaitStats], event: str, ela: int) -> None:
    w = table.get(event, WaitStats())
    table[event] = WaitStats(w.count + 1, w.total_ela_us + ela, max(w.max_ela_us, ela))


class _Parser:
    def __init__(self) -> None:
        self.stmts: dict[tuple[str, str], _Stmt] = {}
        self.bound: dict[str, _Stmt] = {}
        self.waits: dict[str, WaitStats] = {}
        self.skipped = 0
        self.samples: list[tuple[int, str]] = []
        self.header: list[str] = []
        self.seen_record = False
        self.commits = self.rollbacks = self.unattributed = 0
        self.pga: list[PgaMemoryOperation] = []
        self.unit = 1
        # Statement text being collected: its PARSING record and lines so far.
        self.pending: tuple[g.Parsing, list[str]] | None = None
        self.in_binds = False
        self.after_parse_error = False

    def skip(self, line_no: int, line: str) -> None:
        self.skipped += 1
        if len(self.samples) < _MAX_SKIPPED_SAMPLES:
            self.samples.append((line_no, line))

    def bind(self, rec: g.Parsing, lines: list[str]) -> None:
        text = "\n".join(lines)
        key = (rec.sql_id, text)
        stmt = self.stmts.get(key)
        if stmt is None:
            stmt = self.stmts[key] = _Stmt(rec.sql_id, text, rec.depth, rec.uid, rec.hash_value)
        if rec.cursor not in stmt.cursors:
            stmt.cursors.append(rec.cursor)
        self.bound[rec.cursor] = stmt

    def feed(self, line_no: int, raw: str) -> None:
        line = raw.rstrip("\r\n")
        if self.pending is not None:
            if line == "END OF STMT":
                self.bind(*self.pending)
                self.pending = None
            else:
                self.pending[1].append(line)
            return
        if self.in_binds:
            # Bind blocks are indented under their BINDS line.
            if not line.strip() or line.startswith((" ", "\t")):
                return
            self.in_binds = False
        rec = g.classify(line)
        if isinstance(rec, g.Unknown):
            if not self.seen_record:
                self.header.append(line)
                if line.startswith(("Oracle7", "Oracle8")):
                    self.unit = _CENTISECOND_US
            elif not self.after_parse_error:
                self.skip(line_no, line)
            return
        if isinstance(rec, g.Malformed):
            self.skip(line_no, line)
            return
        if isinstance(rec, g.Ignored):
            return
        self.seen_record = True
        self.after_parse_error = False
        self.handle(line_no, rec)

    def handle(self, line_no: int, rec: g.Record) -> None:
        u = self.unit
        if isinstance(rec, g.Parsing):
            self.pending = (rec, [])
        elif isinstance(rec, g.Call):
            stmt = self.bound.get(rec.cursor)
            if rec.kind == "CLOSE":
                if rec.values.get("type", 0) == 0:
                    self.bound.pop(rec.cursor, None)
                return
            if stmt is None:
                self.unattributed += 1
                return
            v = rec.values
            kind = _CALL_KIND[rec.kind]
            stmt.calls[kind] = stmt.calls[kind].plus(CallStats(
                1, v.get("c", 0) * u, v.get("e", 0) * u, v.get("p", 0), v.get("cr", 0),
                v.get("cu", 0), v.get("r", 0), v.get("mis", 0)))
            if v.get("plh"):
                stmt.plan_hash = v["plh"]
        elif isinstance(rec, g.Wait):
            ela = rec.ela * u
            _add_wait(self.waits, rec.event, ela)
            stmt = self.bound.get(rec.cursor) if rec.cursor != "0" else None
            if stmt is not None:
                _add_wait(stmt.waits, rec.event, ela)
            if rec.event == _PGA_EVENT:
                p = [g.wait_param_int(v) for _, v in rec.params[:3]] + [None] * 3
                self.pga.append(PgaMemoryOperation(line_no, rec.cursor, ela, p[0], p[1], p[2],
                                                   rec.obj, rec.tim))
        elif isinstance(rec, g.Stat):
            stmt = self.bound.get(rec.cursor)
            if stmt is not None:
                self.add_stat(stmt, rec)
        elif isinstance(rec, g.XctEnd):
            if rec.rollback:
                self.rollbacks += 1
            else:
                self.commits += 1
        elif isinstance(rec, g.Binds):
            self.in_binds = True
        elif isinstance(rec, g.ParseError):
            # The failing SQL text follows, with no END OF STMT.
            self.after_parse_error = True

    def add_stat(self, stmt: _Stmt, rec: g.Stat) -> None:
        # A STAT group starts at id=1; keep only the latest group.
        if rec.values["id"] == 1:
            stmt.plan = []
        v, s = rec.values, rec.op_stats
        stmt.plan.append(RowSourceOp(v["id"], v.get("pid", 0), v.get("pos", 0), v.get("obj", 0),
                                     v.get("cnt", 0), rec.op, s.get("cr"), s.get("pr"),
                                     s.get("pw"), s.get("time")))


def masked_summary(summary: TraceSummary) -> TraceSummary:
    """``summary`` with every statement's literals masked (a trace may hold keys and card numbers, and what
    is shown may be projected or recorded); binds (``:B1``) stay."""
    return dataclasses.replace(summary, statements=tuple(
        dataclasses.replace(st, text=mask_literals(st.text, "oracle")) for st in summary.statements))


def parse_trace(lines: Iterable[str]) -> TraceSummary:
    """Summarise a raw 10046 trace.

    Parameters
    ----------
    lines : iterable of str
        The file's lines, with or without their newlines.

    Returns
    -------
    TraceSummary
        Never raises on malformed input; see ``skipped_lines`` and ``truncated``.
    """
    p = _Parser()
    previous: tuple[int, str] | None = None
    saw_newline = False
    for item in enumerate(lines, start=1):
        if previous is not None:
            p.feed(*previous)
        saw_newline = saw_newline or item[1].endswith("\n")
        previous = item
    truncated = False
    if previous is not None:
        line_no, last = previous
        if saw_newline and last and not last.endswith("\n") and p.pending is None:
            # Oracle ends every line; an unterminated last line was cut while
            # being written, so even a record that parses may hold cut numbers.
            p.skip(line_no, last)
            truncated = True
        else:
            p.feed(line_no, last)
            truncated = saw_newline and bool(last) and not last.endswith("\n")
    if p.pending is not None:
        # The file stopped inside a statement's text: keep what was written.
        p.bind(*p.pending)
        truncated = True
    return TraceSummary(
        statements=tuple(s.freeze() for s in p.stmts.values()),
        waits=dict(p.waits),
        skipped_lines=p.skipped,
        skipped_samples=tuple(p.samples),
        truncated=truncated,
        header=tuple(p.header),
        commits=p.commits,
        rollbacks=p.rollbacks,
        unattributed_calls=p.unattributed,
        pga_operations=tuple(p.pga),
        time_unit_us=p.unit,
    )


def parse_trace_file(path: str | os.PathLike[str]) -> TraceSummary:
    """:func:`parse_trace` on a file; bytes that are not UTF-8 become U+FFFD.

    Raises ``OSError`` when the file cannot be read. Lines end at ``\n`` only (a ``\r\n`` ending is
    stripped by the parser): a lone carriage return inside a statement's text stays part of it.
    """
    with open(path, encoding="utf-8", errors="replace", newline="\n") as fh:
        return parse_trace(fh)


def trace_report_json(lines: Iterable[str]) -> dict:
    """The ``parse-trace --json`` document for ``lines``."""
    return parse_trace(lines).to_json()
