"""Seed 000's A/B DML loop, written once for every engine that runs it (PostgreSQL and pg_tde, MariaDB, SQLCipher).

Per group: insert ``ids`` rows, delete them (odd groups) or update them (even groups), select them back,
commit; each phase timed on its own, the side's ``total`` around all of it. An engine says how those
statements go on one side's table (a :class:`DmlTable`); the loop, the timing, the counts, the progress and
the cancel (at every statement boundary, the open group rolled back) are here.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from tdescope.app.events import PhaseTiming

__all__ = ["PHASES", "Cancelled", "DmlRun", "DmlTable", "run_ab_dml"]

#: The timed phases of a group, in the order a side's timings list them (then ``total``).
PHASES = ("insert", "delete", "update", "select", "commit")


class Cancelled(Exception):
    """Raised at a statement boundary once the user asked to cancel."""


class DmlTable(Protocol):
    """One side's table, as an engine runs seed 000's statements on it."""

    def prepare(self) -> None:
        """Make the side's table, empty (created or truncated, its cache sized)."""

    def group(self) -> AbstractContextManager:
        """One group's transaction: commits on leaving, rolls back when its body raises."""

    def insert(self, group: int, ids: int) -> None:
        """Insert rows ``1..ids`` of ``group``."""

    def delete(self, group: int) -> int:
        """Delete ``group``'s rows; how many went."""

    def update(self, group: int) -> int:
        """Update ``group``'s rows; how many changed."""

    def select(self, group: int) -> int:
        """Read ``group``'s rows back (decrypting where the side encrypts); how many came."""


@dataclass(frozen=True, slots=True)
class DmlRun:
    """What the loop measured.

    Attributes
    ----------
    timings : dict
        ``{side: {phase: seconds}}``, :data:`PHASES` then ``total``.
    counts : dict
        ``{side: {"Insert": n, "Delete": n, "Update": n, "Select": n}}``.
    cancelled : bool
        The user cancelled; the timings cover what ran.
    """

    timings: dict[str, dict[str, float]]
    counts: dict[str, dict[str, int]]
    cancelled: bool

    def phase_timings(self) -> tuple[PhaseTiming, ...]:
        """The timings as :class:`~tdescope.app.events.PhaseTiming` rows, side by side."""
        return tuple(PhaseTiming(side, phase, s) for side, phases in self.timings.items() for phase, s in phases.items())


def run_ab_dml(tables: Mapping[str, DmlTable], groups: int, ids: int, cancelled: Callable[[], bool],
               progress: Callable[[str, int, int], None]) -> DmlRun:
    """Seed 000's procedure on each side of ``tables`` in turn, with the same ``groups`` and ``ids``.

    Parameters
    ----------
    tables : mapping
        ``{side: DmlTable}``, run in that order; a cancelled side stops the run.
    groups, ids : int
        Groups, and rows per group (both positive: the caller checks them).
    cancelled : callable
        True once the user asked to stop: asked before every statement.
    progress : callable
        ``progress(side, done, total)`` after each committed group.

    Returns
    -------
    DmlRun
    """
    timings: dict[str, dict[str, float]] = {}
    counts: dict[str, dict[str, int]] = {}
    was_cancelled = False

    def check() -> None:
        if cancelled():
            raise Cancelled

    for side, table in tables.items():
        table.prepare()
        phase = dict.fromkeys(PHASES, 0.0)
        n = {"Insert": 0, "Delete": 0, "Update": 0, "Select": 0}
        start = time.perf_counter()
        try:
            for g in range(1, groups + 1):
                check()
                with table.group():
                    t = time.perf_counter()
                    table.insert(g, ids)
                    phase["insert"] += time.perf_counter() - t
                    n["Insert"] += ids
                    check()
                    t = time.perf_counter()
                    if g % 2:
                        n["Delete"] += table.delete(g)
                        phase["delete"] += time.perf_counter() - t
                    else:
                        n["Update"] += table.update(g)
                        phase["update"] += time.perf_counter() - t
                    check()
                    t = time.perf_counter()
                    n["Select"] += table.select(g)
                    phase["select"] += time.perf_counter() - t
                    t = time.perf_counter()
                phase["commit"] += time.perf_counter() - t
                progress(side, g, groups)
        except Cancelled:  # the open group rolled back on its way out; committed groups stay
            was_cancelled = True
        phase["total"] = time.perf_counter() - start
        timings[side] = phase
        counts[side] = n
        if was_cancelled:
            break
    return DmlRun(timings, counts, was_cancelled)
