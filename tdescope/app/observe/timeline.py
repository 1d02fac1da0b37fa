"""Workload phases on the time axis: which side (encrypted or plain) ran when.

Workloads report ``WorkloadProgress(side, done, total)`` after each step. A
run of consecutive progress events of one side is one :class:`SideSpan`;
it began about one step before its first event. Hotspot windows are then
tagged with the side they overlap most (:func:`side_of`), which is how the
differential view puts the encrypted phase beside the plain one.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

from tdescope.app.events import WorkloadProgress

__all__ = ["SideSpan", "SpanCutter", "side_spans", "side_of"]

#: Longest gap (s) still read as "the previous step ended where this one began".
_MAX_STEP_S = 10.0


@dataclass(frozen=True, slots=True)
class SideSpan:
    """``workload`` ran on ``side`` from ``start`` to ``end`` (epoch seconds)."""

    workload: str
    side: str
    start: float
    end: float


def _groups(events: list[WorkloadProgress]) -> list[list[WorkloadProgress]]:
    groups: list[list[WorkloadProgress]] = []
    for ev in events:
        g = groups[-1] if groups else None
        if g and g[-1].workload == ev.workload and g[-1].side == ev.side and ev.done >= g[-1].done:
            g.append(ev)
        else:
            groups.append([ev])
    return groups


def side_spans(progress: Iterable[WorkloadProgress], after: float | None = None) -> list[SideSpan]:
    """Cut progress events into spans of one side, in time order.

    A span ends at its last event; it starts one typical step (the median gap
    between its events) before its first one, or at the previous event when
    the span has a single event and that event is close. ``after`` is the end
    of an earlier span, when the events continue a run already cut.
    """
    return [span for span, _ in _spans(sorted(progress, key=lambda e: e.ts), after)]


def _spans(events: list[WorkloadProgress], prev_end: float | None) -> list[tuple[SideSpan, int]]:
    """Spans with the number of events in each."""
    out = []
    for g in _groups(events):
        first, last = g[0].ts, g[-1].ts
        if len(g) > 1:
            step = statistics.median(b.ts - a.ts for a, b in zip(g, g[1:]))
            start = first - step
        elif prev_end is not None and first - prev_end <= _MAX_STEP_S:
            start = prev_end
        else:
            start = first - 1.0
        if prev_end is not None:
            start = max(start, prev_end)  # spans never overlap
        out.append((SideSpan(g[0].workload, g[0].side, start, last), len(g)))
        prev_end = last
    return out


class SpanCutter:
    """:func:`side_spans` kept incrementally: only the last, still open, span is recut.

    Progress arrives in time order (one workload runner), so every span but
    the last is final; adding a batch costs the size of the open span.
    """

    def __init__(self) -> None:
        self.spans: list[SideSpan] = []
        self._open: list[WorkloadProgress] = []  # events of the last span

    def add(self, batch: Iterable[WorkloadProgress]) -> list[SideSpan]:
        """Add events; returns every span so far."""
        events = sorted([*self._open, *batch], key=lambda e: e.ts)
        if not events:
            return self.spans
        closed = self.spans[:-1] if self._open else self.spans
        cut = _spans(events, closed[-1].end if closed else None)
        n_last = cut[-1][1]
        self._open = events[-n_last:]
        self.spans = closed + [span for span, _ in cut]
        return self.spans


def side_of(start: float, end: float, spans: Iterable[SideSpan]) -> str | None:
    """The side whose spans overlap ``[start, end]`` most; None when none does."""
    overlap: dict[str, float] = {}
    for s in spans:
        o = min(end, s.end) - max(start, s.start)
        if o > 0:
            overlap[s.side] = overlap.get(s.side, 0.0) + o
    if not overlap:
        return None
    return max(overlap, key=overlap.__getitem__)
