"""What a workload run says: its progress, its result, its markers and its problems."""

from __future__ import annotations

from dataclasses import dataclass, field

from tdescope.app.events.base import Event, Word
from tdescope.app.slots import SLOTS

__all__ = ["AB_SIDES", "PhaseName", "PhaseTiming", "Side", "WorkloadProgress", "WorkloadResult", "Marker", "Problem",
           "LostConnection", "is_ab"]


class Side(Word):
    """The two sides an A/B workload compares. A timing's or a progress's side may be another word (a
    pgbench mode, a matrix cell, a scan): these two are the ones compared."""

    ENCRYPTED = "encrypted"
    PLAIN = "plain"


#: Both sides, in the order an A/B run measures them.
AB_SIDES = (Side.ENCRYPTED, Side.PLAIN)


def is_ab(sides) -> bool:
    """Whether a workload with these ``sides`` compares encrypted with plain (an A/B workload)."""
    return set(AB_SIDES) <= set(sides)


class PhaseName(Word):
    """The phase words tdescope itself reads: a side's whole time, and the cold and warm scans. A
    workload's other phases (``insert``, ``ro tps``, a cipher's label) are its own words."""

    TOTAL = "total"
    COLD = "cold"
    WARM = "warm"


@dataclass(frozen=True, **SLOTS)
class PhaseTiming:
    """Elapsed seconds of one workload phase on one side (a :class:`Side` mostly; :class:`PhaseName`
    ``total`` holds the side's whole time)."""

    side: Side | str
    phase: PhaseName | str
    elapsed_s: float


@dataclass(frozen=True, **SLOTS)
class WorkloadProgress(Event):
    """A workload moved on: ``done`` of ``total`` steps on ``side``.

    ``run_fraction`` is the share of a whole A/B run done (rounds of both sides), when
    the workload runs inside one; None for a single run.
    """

    workload: str
    side: str
    done: int
    total: int
    message: str = ""
    run_fraction: float | None = None


@dataclass(frozen=True, **SLOTS)
class WorkloadResult(Event):
    """What a workload measured.

    Attributes
    ----------
    workload : str
        Workload name.
    params : dict
        The parameters it ran with (never secrets).
    timings : tuple of PhaseTiming
        Elapsed per side and phase; phase ``"total"`` holds the side's total.
    counts : dict
        Row counts per side, e.g. ``{"encrypted": {"Insert": 2000, ...}}``.
    cancelled : bool
        True when the user cancelled; timings cover what ran.
    table : tuple of tuple
        A ready-to-show table (header row first) for results that are not
        encrypted/plain pairs, such as the cold-vs-warm 2x2.
    label : str
        The workload's label for people ("A/B DML (seed 000)"); "" in older files.
    capture_round : bool
        The run had a probe armed: its timings include the probe's cost, so it is shown as untimed and
        left out of figures. An older file says so as ``params["round"] == "capture"``.
    """

    workload: str
    params: dict
    timings: tuple[PhaseTiming, ...]
    counts: dict
    cancelled: bool = False
    table: tuple[tuple, ...] = ()
    label: str = ""
    capture_round: bool = False

    def __post_init__(self) -> None:
        if self.params.get("round") == "capture":  # an older file's way of saying it
            object.__setattr__(self, "capture_round", True)

    def total(self, side: Side | str) -> float | None:
        """Total elapsed seconds of ``side``, or None when it did not run."""
        for t in self.timings:
            if t.side == side and t.phase == PhaseName.TOTAL:
                return t.elapsed_s
        return None

    def ratio(self) -> float | None:
        """Encrypted total divided by plain total, or None."""
        enc, plain = self.total(Side.ENCRYPTED), self.total(Side.PLAIN)
        if enc is None or not plain:
            return None
        return enc / plain


@dataclass(frozen=True, **SLOTS)
class Marker(Event):
    """A labelled instant on the timeline (workload phase boundaries and the like)."""

    label: str
    kind: str = "phase"
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True, **SLOTS)
class Problem(Event):
    """Something failed off the GUI thread: one line for the user, never a traceback.

    ``source`` names the producer (``capture``, ``workload``, ``hotspots``...).
    """

    source: str
    message: str


@dataclass(frozen=True, **SLOTS)
class LostConnection(Problem):
    """A :class:`Problem` that says the connection its producer worked through is gone (the database's, or a
    host's agent's): the window offers Reconnect. Its own kind, so nothing tells it apart by its words."""
