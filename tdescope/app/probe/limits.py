"""A capture window's bounds: count, time, hit rate, keep rate; and what a stopping backend may cost.

:class:`CaptureLimits` is what a caller gives a
:class:`~tdescope.app.probe.window.CaptureWindow` (and the probe's spec, so the
gdb-side helper enforces the same bounds). Its :class:`StopLimits` (``limits.stops``)
are gdb's alone, the backend that stops the target at every hit: the stop budget,
the watchdog, whether a many-threaded target may be stopped at all. :func:`stop_budget`
is the stop budget a target gets, by whether the workbench started it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from tdescope.app.errors import UserError
from tdescope.app.probe.keep_rate import KEEP_PER_S
from tdescope.app.slots import SLOTS_KW_ONLY

__all__ = ["BUSY_FRACTION", "KEEP_PER_S", "LAB_STOP_BUDGET", "MAX_CAPTURES", "CaptureLimits", "StopLimits",
           "stop_budget"]

#: The default stop budget: the share of wall time a target may spend stopped in probes.
BUSY_FRACTION = 0.01

#: The most pages one window may capture.
MAX_CAPTURES = 100_000


@dataclass(frozen=True, **SLOTS_KW_ONLY)
class StopLimits:
    """What a stopping backend (gdb) may cost the target; an eBPF probe never stops it and reads none of these.

    Attributes
    ----------
    max_busy_fraction : float
        The stop budget, a duty cycle: the share of wall time the target may
        spend stopped in probe hits (default 1 %). Each hit is charged the
        measured copy time plus ``spec.STOP_OVERHEAD_S`` per stop. Over budget,
        the window pauses: the breakpoint leaves the target's code until the
        budget has been paid back by running time, then it re-arms.
    max_burst_s : float
        How much stopped time a burst may use before the window pauses (default
        25 ms: about 40 page captures back to back).
    watchdog_s : float
        Detach when the target stays stopped longer than this while armed.
    accept_stop : bool
        Let a stopping backend (gdb) probe a target with more than one thread, which it
        stops all together while it attaches and arms and at every hit (``--accept-stop``);
        refused otherwise, with the cost (:mod:`tdescope.app.probe.stop_cost`).
    """

    max_busy_fraction: float = BUSY_FRACTION
    max_burst_s: float = 0.025
    watchdog_s: float = 0.25
    accept_stop: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.max_busy_fraction <= 1:
            raise UserError("stop budget must be a fraction between 0 and 1")
        if not 0.001 <= self.max_burst_s <= 10:
            raise UserError(f"stop burst must be between 0.001 and 10 seconds, not {self.max_burst_s}")
        if not 0.01 <= self.watchdog_s <= 10:
            raise UserError(f"watchdog must be between 0.01 and 10 seconds, not {self.watchdog_s}")


#: Stop budget for a lab process the workbench started itself: nobody else's work
#: waits on it, so a class sees captures stream instead of arriving in bursts.
LAB_STOP_BUDGET = StopLimits(max_busy_fraction=0.5, max_burst_s=0.5, accept_stop=True)


@dataclass(frozen=True, **SLOTS_KW_ONLY)
class CaptureLimits:
    """Bounds of one capture window, whatever the backend.

    Attributes
    ----------
    max_captures : int
        Pages to capture before disarming (1..100000).
    max_seconds : float
        Wall-clock length of the window once armed.
    first_hit_timeout : float or None
        Give up when nothing was captured this long after arming.
    max_hits_per_s : int
        The hit-rate cap: more probe hits than this within one second disarm the
        window (default 1000: at ~0.25 ms a stop, a burst can never hold the target
        stopped more than about a quarter of that second, even in a long window
        whose stop budget is large).
    first_seq : int
        The number of the window's first capture: a session numbers its captures on
        across windows, so "#3" names one capture in notes and reports.
    max_kept_per_s : int
        The keep rate (:mod:`~tdescope.app.probe.keep_rate`; the GUI and ``record``: :data:`KEEP_PER_S`):
        captures kept per second, the rest counted as thinned; 0 keeps every one (``capture``).
    stops : StopLimits
        What a stopping backend (gdb) may cost the target: stop budget, watchdog, ``--accept-stop``.
    """

    max_captures: int = 200
    max_seconds: float = 30.0
    first_hit_timeout: float | None = None
    max_hits_per_s: int = 1000
    first_seq: int = 1
    max_kept_per_s: int = 0
    stops: StopLimits = field(default_factory=StopLimits)

    def __post_init__(self) -> None:
        if not 1 <= self.max_captures <= MAX_CAPTURES:
            raise UserError(f"capture count must be between 1 and {MAX_CAPTURES}, not {self.max_captures}")
        if not 0 < self.max_seconds <= 3600:
            raise UserError(f"capture window must be between 0 and 3600 seconds, not {self.max_seconds}")
        if not 1 <= self.max_hits_per_s <= 1_000_000:
            raise UserError(f"hit-rate cap must be between 1 and 1000000 hits/s, not {self.max_hits_per_s}")
        if not 0 <= self.max_kept_per_s <= 1_000_000:
            raise UserError(f"keep rate must be between 0 and 1000000 captures/s, not {self.max_kept_per_s}")
        if self.first_hit_timeout is not None and not 0 < self.first_hit_timeout <= 3600:
            raise UserError(f"first-hit timeout must be between 0 and 3600 seconds, not {self.first_hit_timeout}")


def stop_budget(own_target: bool, fraction: float | None = None, accept_stop: bool = False) -> StopLimits:
    """The :class:`StopLimits` a target gets: 1 % of wall time in 25 ms bursts, or :data:`LAB_STOP_BUDGET`
    for a target the workbench started itself (``EngineSession.own_target``). ``fraction`` (the user's
    ``--stop-budget``) wins; ``accept_stop`` (``--accept-stop``) lets gdb stop a many-threaded target."""
    budget = LAB_STOP_BUDGET if own_target else StopLimits()
    if fraction:
        budget = replace(budget, max_busy_fraction=fraction)
    if accept_stop:
        budget = replace(budget, accept_stop=True)
    return budget
