"""The report's table of exact OS waits: the session's one-second aggregates added up per class and syscall."""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.events import WaitFigures
from tdescope.app.session.reader import SessionReader
from tdescope.app.waits.exact import avg_us, format_sizes, merge

__all__ = ["ExactWaitsTable", "exact_waits_table"]


@dataclass(frozen=True, slots=True)
class ExactWaitsTable:
    """Title, header, rows and how they were measured."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    facts: str


def exact_waits_table(reader: SessionReader, limit: int = 25) -> ExactWaitsTable | None:
    """The ``limit`` longest (class, syscall) rows of the session's exact waits; None when it has none."""
    batches = list(reader.events(kinds=[WaitFigures]))
    if not batches:
        return None
    us = lambda v: "–" if v is None else f"{v:,.1f}"  # noqa: E731
    rows = tuple((f.wait_class, f.syscall, f"{f.count:,}", f"{f.total_us / 1e3:,.2f}", us(avg_us(f)), us(f.p50_us),
                  us(f.p99_us), format_sizes(f, 3)) for f in merge(batches)[:limit])
    lost = sum(b.lost for b in batches)
    return ExactWaitsTable("Exact OS waits (eBPF: every call timed and sized in the kernel)",
                           ("class", "syscall", "count", "total ms", "avg µs", "p50 µs", "p99 µs",
                            "sizes (most common)"), rows,
                           f"{len(batches)} one-second aggregates; {lost} calls not aggregated (map full). "
                           "p50/p99 from log2 buckets (within 2×).")
