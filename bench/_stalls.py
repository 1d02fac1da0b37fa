"""GUI-thread stalls, measured as the user meets them: the gaps between a heartbeat timer's ticks.

A :class:`Heartbeat` is a QTimer on the GUI thread asking to tick every few milliseconds; a gap well
over its interval is the event loop busy (or starved of the GIL): a stall. Its percentiles come with
a distribution-free 95 % interval (:func:`percentile_interval`, from the binomial order statistics),
so a p99 over a few thousand gaps says how far it could move in another run.

Each gap is also measured in the GUI thread's CPU time (``time.thread_time`` at each tick): the
work that held the loop, without the wait for a core that other processes hold. On a shared 2-core
machine with a load of 10 the wall figures are mostly that wait; both are reported.
"""

from __future__ import annotations

import math
import time

__all__ = ["Heartbeat", "percentile", "percentile_interval", "spin", "stall_figures"]

Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``: the value at rank ``int(n * q)`` of the sorted list."""
    s = sorted(values)
    return s[min(int(len(s) * q), len(s) - 1)]


def percentile_interval(values: list[float], q: float, z: float = Z95) -> tuple[float, float]:
    """A 95 % interval of the ``q`` quantile: the order statistics ``n q ± z sqrt(n q (1 - q))`` apart
    (the normal approximation to the binomial count of values below the true quantile)."""
    s = sorted(values)
    n = len(s)
    half = z * math.sqrt(n * q * (1 - q))
    lo = max(int(math.floor(n * q - half)), 0)
    hi = min(int(math.ceil(n * q + half)), n - 1)
    return s[lo], s[hi]


def stall_figures(prefix: str, beat: Heartbeat) -> dict:
    """``{prefix}_p99_ms`` with its interval, p50, max and the number of gaps; the same over the GUI
    thread's CPU time as ``{prefix}_cpu_*``; rounded."""
    out: dict = {}
    for kind, gaps in (("", beat.gaps), ("_cpu", beat.cpu_gaps)):
        lo, hi = percentile_interval(gaps, 0.99)
        out.update({f"{prefix}{kind}_p99_ms": round(percentile(gaps, 0.99), 1),
                    f"{prefix}{kind}_p99_interval_ms": [round(lo, 1), round(hi, 1)],
                    f"{prefix}{kind}_p50_ms": round(percentile(gaps, 0.5), 1),
                    f"{prefix}{kind}_max_ms": round(max(gaps), 1)})
    out[f"{prefix}_ticks"] = len(beat.gaps)
    return out


class Heartbeat:
    """Ticks every ``interval_ms`` on the GUI thread while started; :attr:`gaps` holds the gaps (ms, wall)
    and :attr:`cpu_gaps` the GUI thread's CPU time over each."""

    def __init__(self, interval_ms: int = 5) -> None:
        from PySide6.QtCore import QElapsedTimer, QTimer

        self.gaps: list[float] = []
        self.cpu_gaps: list[float] = []
        self._clock = QElapsedTimer()
        self._timer = QTimer()
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self._tick)
        self._last = 0
        self._last_cpu = 0.0

    def start(self) -> None:
        """Start (again), forgetting nothing: gaps accumulate over start/stop pairs."""
        self._clock.start()
        self._last = self._clock.nsecsElapsed()
        self._last_cpu = time.thread_time()
        self._timer.start()

    def stop(self) -> None:
        """Stop ticking (the time until the next start is no gap)."""
        self._timer.stop()

    def _tick(self) -> None:
        now, cpu = self._clock.nsecsElapsed(), time.thread_time()
        self.gaps.append((now - self._last) / 1e6)
        self.cpu_gaps.append((cpu - self._last_cpu) * 1e3)
        self._last, self._last_cpu = now, cpu


def spin(cond, timeout: float, poll_ms: int = 20) -> bool:
    """Run an idle event loop (as ``app.exec()`` is) until ``cond()`` or ``timeout`` seconds; returns
    ``cond()``. A busy ``processEvents()`` loop would hold the GIL and a core the workers need."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop, poll = QEventLoop(), QTimer()
    end = time.monotonic() + timeout
    poll.timeout.connect(lambda: (cond() or time.monotonic() > end) and loop.quit())
    poll.start(poll_ms)
    if not cond():
        loop.exec()
    poll.stop()
    return bool(cond())
