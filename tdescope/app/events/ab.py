"""What an A/B run of interleaved rounds measured."""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.events.base import Event
from tdescope.app.events.workload import PhaseName, is_ab
from tdescope.app.slots import SLOTS

__all__ = ["RoundTime", "PhaseRatio", "ABResult"]


@dataclass(frozen=True, **SLOTS)
class RoundTime:
    """One side of one A/B round: elapsed seconds per phase (``"total"`` included) and the
    server's CPU seconds. Round 0 is the warm-up, never counted."""

    round: int
    side: str
    phases: dict
    server_cpu_s: float | None = None


@dataclass(frozen=True, **SLOTS)
class PhaseRatio:
    """Encrypted/plain over the timed rounds of one phase.

    ``ratios`` holds one paired ratio per round (that round's encrypted time over its
    plain time); ``ratio_median`` is their median and ``ratio_ci_low``/``ratio_ci_high``
    its 95 % interval (:data:`~tdescope.app.ab.stats.INTERVAL_METHOD`). The side medians
    are of elapsed seconds.
    """

    phase: str
    encrypted_median_s: float
    plain_median_s: float
    ratio_median: float
    ratio_ci_low: float
    ratio_ci_high: float
    ratios: tuple[float, ...] = ()


@dataclass(frozen=True, **SLOTS)
class ABResult(Event):
    """What an A/B run of interleaved rounds measured (:class:`~tdescope.app.ab.runner.ABRunner`).

    Attributes
    ----------
    workload, label : str
        Workload name and the label people read.
    params : dict
        Parameters every round ran with.
    rounds, warmup : int
        Timed rounds (ABBA... order) and untimed warm-up rounds asked for.
    times : tuple of RoundTime
        Every side of every round, warm-up included (``round == 0``).
    phases : tuple of PhaseRatio
        ``"total"`` first, then the workload's phases.
    interval : str
        How the intervals were computed.
    capture : str
        ``"off"``, or how captures were kept out of the timing (``"separate round"``).
    machine_busy, other_busy : float or None
        Share of all CPUs busy during the timed rounds, and the share used by processes
        other than the server and tdescope (a busy machine makes a ratio noisy).
    load1 : float or None
        The one-minute load average at the end.
    cancelled : bool
        True when the user cancelled; statistics cover the rounds that completed.
    """

    workload: str
    label: str
    params: dict
    rounds: int
    warmup: int
    times: tuple[RoundTime, ...]
    phases: tuple[PhaseRatio, ...]
    interval: str = ""
    capture: str = "off"
    machine_busy: float | None = None
    other_busy: float | None = None
    load1: float | None = None
    cancelled: bool = False

    def total(self) -> PhaseRatio | None:
        """The ``"total"`` phase, or None when no round completed."""
        return next((p for p in self.phases if p.phase == PhaseName.TOTAL), None)

    def completed_rounds(self) -> int:
        """Timed rounds that ran both sides."""
        done: dict[int, set] = {}
        for t in self.times:
            if t.round > 0:
                done.setdefault(t.round, set()).add(t.side)
        return sum(1 for sides in done.values() if is_ab(sides))

    def warnings(self, noisy_over: float = 0.10, busy_over: float = 0.25) -> list[str]:
        """One line per reason not to trust the figure as it stands."""
        out = []
        total = self.total()
        if total is not None and total.ratio_median:
            half = (total.ratio_ci_high - total.ratio_ci_low) / 2 / total.ratio_median
            if half > noisy_over:
                out.append(f"noisy: ±{half * 100:.0f} %, rerun or raise rounds")
        if self.other_busy is not None and self.other_busy > busy_over:
            out.append(f"busy machine: other processes used {self.other_busy * 100:.0f} % of the CPUs")
        if self.cancelled and self.completed_rounds() == 0:
            out.append("cancelled before any timed round: no figure")
        elif self.completed_rounds() < 3:
            out.append(f"only {self.completed_rounds()} timed round(s): no interval worth the name")
        return out
