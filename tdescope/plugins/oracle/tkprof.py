"""A tkprof-like text rendering of a :class:`~tdescope.plugins.oracle.trace.TraceSummary`.

The layout follows tkprof's report (call table, misses, row source operations,
"Elapsed times include waiting on following events", overall totals) so that
people who read tkprof output every day recognise it. cpu and elapsed are
seconds with 2 decimals, as tkprof prints them; tdescope rounds to nearest,
and tkprof's own rounding rule is not verified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from tdescope.plugins.oracle.trace import (
    CALL_KINDS,
    CallStats,
    StatementSummary,
    TraceSummary,
    WaitStats,
    parse_trace,
)

__all__ = ["format_tkprof", "trace_report_text"]

_STARS = "*" * 80
_CALL_HEADER = ("call     count       cpu    elapsed       disk      query    current        rows\n"
                "------- ------  -------- ---------- ---------- ---------- ----------  ----------")
_CALL_RULE = "------- ------  -------- ---------- ---------- ---------- ----------  ----------"
_WAIT_HEADER = ("  Event waited on                             Times   Max. Wait  Total Waited\n"
                "  ----------------------------------------   Waited  ----------  ------------")
_LABEL = {"parse": "Parse", "execute": "Execute", "fetch": "Fetch"}


def _seconds(us: int) -> str:
    return f"{us / 1_000_000:.2f}"


def _call_row(label: str, c: CallStats) -> str:
    return (f"{label:<7} {c.count:>6} {_seconds(c.cpu_us):>9} {_seconds(c.elapsed_us):>10} "
            f"{c.disk:>10} {c.query:>10} {c.current:>10} {c.rows:>11}")


def _call_table(calls: Mapping[str, CallStats]) -> list[str]:
    out = [_CALL_HEADER]
    total = CallStats()
    for kind in CALL_KINDS:
        out.append(_call_row(_LABEL[kind], calls[kind]))
        total = total.plus(calls[kind])
    out += [_CALL_RULE, _call_row("total", total)]
    return out


def _wait_table(waits: Mapping[str, WaitStats], title: str) -> list[str]:
    if not waits:
        return []
    out = ["", title, _WAIT_HEADER]
    for event, w in sorted(waits.items(), key=lambda kv: -kv[1].total_ela_us):
        out.append(f"  {event[:40]:<40} {w.count:>9}  {_seconds(w.max_ela_us):>10}  "
                   f"{_seconds(w.total_ela_us):>12}")
    return out


def _plan(stmt: StatementSummary) -> list[str]:
    if not stmt.plan:
        return []
    by_id = {op.id: op for op in stmt.plan}

    def depth(op) -> int:
        d, seen = 0, set()
        while op.parent_id in by_id and op.parent_id not in seen:
            seen.add(op.parent_id)
            op = by_id[op.parent_id]
            d += 1
        return d

    out = ["", "Rows     Row Source Operation", "-------  ---------------------------------------------------"]
    for op in stmt.plan:
        out.append(f"{op.rows:>7}  {' ' * depth(op)}{op.operation}")
    return out


def _statement(stmt: StatementSummary) -> list[str]:
    out = [_STARS, ""]
    head = []
    if stmt.sql_id:
        head.append(f"SQL ID: {stmt.sql_id}")
    if stmt.plan_hash:
        head.append(f"Plan Hash: {stmt.plan_hash}")
    if head:
        out += [" ".join(head), ""]
    out += [stmt.text, "", ""]
    out += _call_table(stmt.calls)
    out.append("")
    for kind in ("parse", "execute"):
        if stmt.calls[kind].misses:
            out.append(f"Misses in library cache during {kind}: {stmt.calls[kind].misses}")
    user = f"Parsing user id: {stmt.uid}"
    if stmt.depth:
        user += f"  (recursive depth: {stmt.depth})"
    out.append(user)
    out += _plan(stmt)
    out += _wait_table(stmt.waits, "Elapsed times include waiting on following events:")
    out.append("")
    return out


def _overall(title: str, stmts: list[StatementSummary]) -> list[str]:
    calls = {k: CallStats() for k in CALL_KINDS}
    waits: dict[str, WaitStats] = {}
    for s in stmts:
        for k in CALL_KINDS:
            calls[k] = calls[k].plus(s.calls[k])
        for e, w in s.waits.items():
            o = waits.get(e, WaitStats())
            waits[e] = WaitStats(o.count + w.count, o.total_ela_us + w.total_ela_us,
                                 max(o.max_ela_us, w.max_ela_us))
    out = [_STARS, "", title, ""]
    out += _call_table(calls)
    out += _wait_table(waits, "Elapsed times include waiting on following events:")
    out.append("")
    return out


def format_tkprof(summary: TraceSummary) -> str:
    """Render ``summary`` the way tkprof lays out its report.

    Statements come in trace order (tkprof's default ``sort=`` order), then
    overall totals for non-recursive and recursive statements, then the
    whole file's waits (those on ``WAIT #0`` and unparsed cursors included).
    """
    out: list[str] = []
    for stmt in summary.statements:
        out += _statement(stmt)
    out += _overall("OVERALL TOTALS FOR ALL NON-RECURSIVE STATEMENTS",
                    [s for s in summary.statements if s.depth == 0])
    out += _overall("OVERALL TOTALS FOR ALL RECURSIVE STATEMENTS",
                    [s for s in summary.statements if s.depth > 0])
    out += [_STARS]
    out += _wait_table(summary.waits, "Waits in the whole trace file (WAIT #0 included):")
    pga = summary.pga_operations
    if pga:
        allocated = sum(op.p1 or 0 for op in pga if op.kind == "allocate")
        releases = sum(1 for op in pga if op.kind == "release")
        out += ["", f"PGA memory operation: {len(pga)} waits, p1 sum {allocated} bytes, "
                    f"{releases} with p1=p2=p3=0 (munmap per seed 003; size not reported)"]
    out += ["", f"{len(summary.statements)} statements, {summary.commits} commits, "
                f"{summary.rollbacks} rollbacks, {summary.skipped_lines} lines skipped"
                + (", file truncated" if summary.truncated else "")]
    return "\n".join(out) + "\n"


def trace_report_text(lines: Iterable[str]) -> str:
    """The ``parse-trace`` human text for ``lines``."""
    return format_tkprof(parse_trace(lines))
