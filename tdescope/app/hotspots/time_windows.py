"""Cutting a stream of perf samples into windows by their own timestamps (pure, no I/O).

A long-lived ``perf script`` prints samples some time after they were taken (perf record's ring
buffer, the pipe, the unwinding); a window is therefore cut by *sample time*: window ``k`` holds the
samples with ``origin + k * length <= ts < origin + (k + 1) * length``. It is complete, and handed
out, once the stream has passed its end (a later sample came through: perf script prints in time
order) or, for a target too idle to send a later sample, once the clock is ``grace`` past its end
and nothing is waiting in the pipes; ``cap`` past its end it goes out whatever the pipes hold, so
a stalled ``perf script`` cannot make windows pile up unbounded.

A sample older than the next window to close (one that arrived after its window went) counts in
that next window, not dropped; :attr:`WindowCutter.late` says how many did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from tdescope.app.hotspots.perf_script import Sample
from tdescope.app.slots import SLOTS

__all__ = ["Cut", "WindowCutter"]


@dataclass(frozen=True, **SLOTS)
class Cut:
    """One finished window: its edges (the samples' clock) and its samples, in arrival order."""

    start: float
    end: float
    samples: tuple[Sample, ...]


class WindowCutter:
    """Windows of ``length`` seconds from ``origin``, on the clock of the samples' ``ts``.

    Parameters
    ----------
    origin : float
        Start of the first window.
    length : float
        Window length, seconds.
    grace : float
        How long past a window's end an idle stream waits for stragglers.
    cap : float
        How long past a window's end it goes out even while data waits in the pipes.
    """

    def __init__(self, origin: float, length: float, grace: float = 1.0, cap: float = 10.0) -> None:
        if length <= 0:
            raise ValueError("length must be positive")
        self.origin = origin
        self.length = length
        self.grace = grace
        self.cap = cap
        #: Samples that came after their window had gone (counted in the next one instead).
        self.late = 0
        self._next = 0  # index of the next window to hand out
        self._open: dict[int, list[Sample]] = {}
        self._high = -math.inf  # newest sample time seen

    def _edge(self, k: int) -> float:
        return self.origin + k * self.length

    def add(self, sample: Sample) -> None:
        """Put ``sample`` in the window of its time (or the next to close, when that one has gone)."""
        k = math.floor((sample.ts - self.origin) / self.length)
        if k < self._next:
            # before the origin: perf sampled while it attached; after it: a straggler
            self.late += sample.ts >= self.origin
            k = self._next
        self._open.setdefault(k, []).append(sample)
        self._high = max(self._high, sample.ts)

    def due(self, now: float, idle: bool) -> list[Cut]:
        """The windows complete at ``now`` (same clock), oldest first.

        ``idle``: nothing is waiting in the pipes between perf and us (so a quiet stream is a quiet
        target, not a slow ``perf script``).
        """
        out = []
        while True:
            end = self._edge(self._next + 1)
            if not (self._high >= end or (idle and now >= end + self.grace) or now >= end + self.cap):
                return out
            out.append(self._pop(end))

    def rest(self, now: float) -> list[Cut]:
        """Every window left once the stream has ended: the complete ones and the one ``now`` is in.

        The last is cut at ``now`` (or its last sample, if later) and only when it holds samples.
        """
        out = []
        while self._edge(self._next + 1) <= now or any(k > self._next for k in self._open):
            out.append(self._pop(self._edge(self._next + 1)))
        if self._open.get(self._next):
            out.append(self._pop(max(now, self._high)))
        return out

    def _pop(self, end: float) -> Cut:
        samples = tuple(self._open.pop(self._next, ()))
        cut = Cut(self._edge(self._next), end, samples)
        self._next += 1
        return cut
