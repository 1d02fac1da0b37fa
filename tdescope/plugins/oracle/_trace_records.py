"""The results of a 10046 trace summary: call, wait and row-source statistics per statement.

Plain dataclasses built by :mod:`tdescope.plugins.oracle.trace`, which re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["CALL_KINDS", "CallStats", "PgaMemoryOperation", "RowSourceOp", "StatementSummary", "TraceSummary",
           "WaitStats"]

#: The call kinds tkprof tabulates, in its order.
CALL_KINDS = ("parse", "execute", "fetch")


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
