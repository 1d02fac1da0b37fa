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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from tdescope.plugins.oracle import _trace_grammar as g

__all__ = [
    "CALL_KINDS",
    "CallStats",
    "PgaMemoryOperation",
    "RowSourceOp",
    "StatementSummary",
    "TraceSummary",
    "WaitStats",
    "parse_trace",
    "parse_trace_file",
    "trace_report_json",
]

#: The call kinds tkprof tabulates, in its order.
CALL_KINDS = ("parse", "execute", "fetch")
_CALL_KIND = {"PARSE": "parse", "EXEC": "execute", "FETCH": "fetch"}
_PGA_EVENT = "PGA memory operation"
#: Kept verbatim for diagnosis; more would only bloat the summary.
_MAX_SKIPPED_SAMPLES = 20
#: Before Oracle 9i, c/e/ela were centiseconds; since 9i they are microseconds.
_CENTISECOND_US = 10_000


@dataclass(frozen=True, slots=True)
class CallStats:
    """Totals of one call kind (parse, execute or fetch) of one statement.

    Attributes mirror the trace fields: ``c`` (cpu_us), ``e`` (elapsed_us),
    ``p`` (disk), ``cr`` (query), ``cu`` (current), ``r`` (rows), ``mis``
    (misses in the library cache).
    """

    count: int = 0
    cpu_us: int = 0
    elapsed_us: int = 0
    disk: int = 0
    query: int = 0
    current: int = 0
    rows: int = 0
    misses: int = 0

    def plus(self, other: CallStats) -> CallStats:
        """Field-wise sum."""
        return CallStats(*(a + b for a, b in zip(_astuple(self), _astuple(other))))

    def to_json(self) -> dict:
        """The JSON shape: everything but ``misses``."""
        return {"count": self.count, "cpu_us": self.cpu_us, "elapsed_us": self.elapsed_us,
                "disk": self.disk, "query": self.query, "current": self.current, "rows": self.rows}


def _astuple(c: CallStats) -> tuple[int, ...]:
    return (c.count, c.cpu_us, c.elapsed_us, c.disk, c.query, c.current, c.rows, c.misses)


@dataclass(frozen=True, slots=True)
class WaitStats:
    """Count, total and longest wait of one event, in microseconds."""

    count: int = 0
    total_ela_us: int = 0
    max_ela_us: int = 0

    def to_json(self) -> dict:
        return {"count": self.count, "total_ela_us": self.total_ela_us, "max_ela_us": self.max_ela_us}


@dataclass(frozen=True, slots=True)
class RowSourceOp:
    """One ``STAT`` line: a row source of the execution plan."""

    id: int
    parent_id: int
    position: int
    obj: int
    rows: int
    operation: str
    cr: int | None = None
    pr: int | None = None
    pw: int | None = None
    time_us: int | None = None


@dataclass(frozen=True, slots=True)
class StatementSummary:
    """One SQL statement, aggregated over every cursor that held it.

    Attributes
    ----------
    sql_id, text : str
        The key. ``sql_id`` is empty in traces older than 11g.
    depth : int
        Recursion depth when first parsed (``dep``); > 0 for recursive SQL.
    uid : int
        Parsing user id.
    hash_value, plan_hash : int
        ``hv`` of the statement and the last non-zero ``plh`` seen (0 if none).
    cursors : tuple of str
        Cursor numbers that held the statement, in order of first use.
    calls : mapping
        ``"parse"``, ``"execute"``, ``"fetch"`` -> :class:`CallStats`.
    waits : mapping
        Event name -> :class:`WaitStats`, for waits on this statement's cursors.
    plan : tuple of RowSourceOp
        The last complete set of ``STAT`` lines.
    """

    sql_id: str
    text: str
    depth: int
    uid: int
    hash_value: int
    plan_hash: int
    cursors: tuple[str, ...]
    calls: Mapping[str, CallStats]
    waits: Mapping[str, WaitStats]
    plan: tuple[RowSourceOp, ...] = ()

    def total(self) -> CallStats:
        """Parse + execute + fetch."""
        out = CallStats()
        for kind in CALL_KINDS:
            out = out.plus(self.calls[kind])
        return out

    def to_json(self) -> dict:
        return {
            "sql_id": self.sql_id,
            "text": self.text,
            "depth": self.depth,
            "calls": {k: self.calls[k].to_json() for k in CALL_KINDS},
            "waits": {e: w.to_json() for e, w in self.waits.items()},
        }


@dataclass(frozen=True, slots=True)
class PgaMemoryOperation:
    """One 'PGA memory operation' wait (Oracle 12.2+), read as Hoogland observed it.

    Per seed 003 (systemtap on 12.2, undocumented by Oracle): the wait wraps
    mmap()/munmap() of PGA memory; with p1/p2 non-zero, p1 was the size of a
    reserving mmap and p2 the size then mapped for use; p1 alone was the size
    of a single mmap; p1=p2=p3=0 accompanied munmap(), whose size is not
    reported. ``kind`` is ``"allocate"`` or ``"release"`` on that reading.
    """

    line_no: int
    cursor: str
    ela_us: int
    p1: int | None
    p2: int | None
    p3: int | None
    obj: int | None
    tim: int | None

    @property
    def kind(self) -> str:
        return "release" if not (self.p1 or self.p2 or self.p3) else "allocate"


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """Everything :func:`parse_trace` learned from one trace file.

    Attributes
    ----------
    statements : tuple of StatementSummary
        In order of first appearance.
    waits : mapping
        Event -> :class:`WaitStats` over the whole file, ``WAIT #0`` included.
    skipped_lines : int
        Lines that looked like records but did not parse, or matched nothing.
    skipped_samples : tuple of (int, str)
        The first few skipped lines with their 1-based line numbers.
    truncated : bool
        The file ended inside a statement's text or in the middle of a record.
    header : tuple of str
        Lines before the first record (trace file name, version, pid...).
    commits, rollbacks : int
        ``XCTEND`` counts.
    unattributed_calls : int
        PARSE/EXEC/FETCH on a cursor with no known statement (e.g. parsed
        before tracing began).
    pga_operations : tuple of PgaMemoryOperation
    time_unit_us : int
        Microseconds per trace time unit (1 since 9i; 10000 for centiseconds).
    """

    statements: tuple[StatementSummary, ...]
    waits: Mapping[str, WaitStats]
    skipped_lines: int = 0
    skipped_samples: tuple[tuple[int, str], ...] = ()
    truncated: bool = False
    header: tuple[str, ...] = ()
    commits: int = 0
    rollbacks: int = 0
    unattributed_calls: int = 0
    pga_operations: tuple[PgaMemoryOperation, ...] = ()
    time_unit_us: int = 1

    def to_json(self) -> dict:
        """``{"statements": [...], "waits": {...}}`` as documented for the CLI."""
        return {
            "statements": [s.to_json() for s in self.statements],
            "waits": {e: w.to_json() for e, w in self.waits.items()},
        }


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

    Raises ``OSError`` when the file cannot be read.
    """
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        return parse_trace(fh)


def trace_report_json(lines: Iterable[str]) -> dict:
    """The ``parse-trace --json`` document for ``lines``."""
    return parse_trace(lines).to_json()
