"""What has been observed of one run, kept incrementally for the live views.

:class:`ObservedRun` takes batches of events as they arrive (hotspot windows,
leaf offsets, wait samples, workload progress, capture times) and answers the
views' questions cheaply: the profile of the last window, of the whole run or
of a time range; the encrypted and plain profiles. Its
:attr:`~ObservedRun.waits` (a :class:`~tdescope.app.waits.counter.WaitCounter`
whose buckets start at the run's first event) counts the wait samples; the exact OS waits (the eBPF
tracer's :class:`~tdescope.app.events.WaitFigures`, one batch a second) add up per (class, syscall)
in :meth:`~ObservedRun.exact`.
Whole-run answers come from running totals, so a refresh costs the size of
the answer, not the length of the run.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable

from tdescope.app.events import (HotspotLeaves, HotspotWindow, Marker, WaitFigure, WaitFigures, WaitSample, WaitSpan,
                                 WaitSpans, WorkloadProgress)
from tdescope.app.hotspots.profile import Profile, crypto_pct
from tdescope.app.waits.counter import WaitCounter
from tdescope.app.waits.exact import merge
from tdescope.app.observe.timeline import SideSpan, SpanCutter, side_of

__all__ = ["ObservedRun"]


class ObservedRun:
    """Running aggregates of one observed run.

    Parameters
    ----------
    bucket_s : float
        Width of the wait series buckets.

    Attributes
    ----------
    waits : WaitCounter
        The wait samples: top-N, per-class series from :attr:`t0`, sample count.
    """

    def __init__(self, bucket_s: float = 0.25) -> None:
        self.bucket_s = bucket_s
        self.t0: float | None = None
        self.windows: list[HotspotWindow] = []
        #: Time in crypto per window, %, beside :attr:`windows` (counted once, as each arrives).
        self.window_crypto: list[float] = []
        self._self: Counter[str] = Counter()
        self._total: Counter[str] = Counter()
        self._dsos: dict[str, str] = {}
        self._samples = 0
        self._stacks: Counter[str] = Counter()
        self._leaves: list[HotspotLeaves] = []
        self._heat: dict[str, Counter[int]] = {}
        self.progress: list[WorkloadProgress] = []
        self.spans: list[SideSpan] = []
        self._cutter = SpanCutter()
        self._decided = 0  # windows whose side is final
        self._side_acc: dict[str, list] = {}
        self._ends: list[float] = []
        self.capture_ts: list[float] = []
        self.markers: list[Marker] = []
        self.waits = WaitCounter(bucket_s)
        #: The exact OS wait batches, in arrival (time) order.
        self.exact_batches: list[WaitFigures] = []
        #: The sampled exact waits (the long ones), for the timeline.
        self.wait_spans: list[WaitSpan] = []

    def _seen(self, ts: float) -> None:
        # The first event fixes the origin of the axis; a late one from before
        # it (a window ending after a progress event) keeps that origin.
        if self.t0 is None:
            self.t0 = self.waits.origin = ts

    # -- adding ------------------------------------------------------------------
    def add_windows(self, batch: Iterable[HotspotWindow]) -> None:
        """Count hotspot windows into the running totals."""
        for w in batch:
            self._seen(w.start)
            self.windows.append(w)
            p = Profile.from_stacks(w.stacks, w.dsos)
            self.window_crypto.append(crypto_pct(p))
            self._samples += p.samples
            self._stacks.update(w.stacks)
            self._self.update(p.self_counts)
            self._total.update(p.total_counts)
            for k, v in w.dsos.items():
                self._dsos.setdefault(k, v)

    def add_leaves(self, batch: Iterable[HotspotLeaves]) -> None:
        """Count leaf offsets (for the disassembly heat)."""
        for lv in batch:
            self._leaves.append(lv)
            for sym, offs in lv.offsets.items():
                self._heat.setdefault(sym, Counter()).update(offs)

    def add_waits(self, batch: Iterable[WaitSample]) -> None:
        """Count wait samples into :attr:`waits`."""
        batch = list(batch)
        if batch:
            self._seen(batch[0].ts)
        self.waits.add(batch)

    def add_exact(self, batch: Iterable[WaitFigures]) -> None:
        """Keep exact OS wait batches (each covers the ``interval_s`` before its ``ts``)."""
        for ev in batch:
            self._seen(ev.ts - ev.interval_s)
            self.exact_batches.append(ev)

    def add_spans(self, batch: Iterable[WaitSpans]) -> None:
        """Keep the sampled exact waits of each batch."""
        for ev in batch:
            for sp in ev.spans:
                self._seen(sp.start)
                self.wait_spans.append(sp)

    def exact(self, start: float | None = None, end: float | None = None) -> list[WaitFigure]:
        """Exact OS waits per (class, syscall) of the batches overlapping ``[start, end]`` (default: all).

        A batch is a second's aggregate: a range counts the whole seconds it touches.
        """
        lo = float("-inf") if start is None else start
        hi = float("inf") if end is None else end
        return merge(b for b in self.exact_batches if b.ts >= lo and b.ts - b.interval_s <= hi)

    def add_progress(self, batch: Iterable[WorkloadProgress]) -> None:
        """Record workload progress and recompute the side spans."""
        batch = list(batch)
        for ev in batch:
            self._seen(ev.ts)
        self.progress.extend(batch)
        self.spans = self._cutter.add(batch)

    def add_markers(self, batch: Iterable[Marker]) -> None:
        """Record labelled instants (phase boundaries and the like)."""
        for m in batch:
            self._seen(m.ts)
            self.markers.append(m)

    def clear(self) -> None:
        """Forget everything (the views keep this object)."""
        self.__init__(self.bucket_s)

    def add_captures(self, times: Iterable[float]) -> None:
        """Record capture instants (epoch seconds)."""
        for ts in times:
            self._seen(ts)
            self.capture_ts.append(ts)

    # -- hotspots ------------------------------------------------------------------
    def profile(self, start: float | None = None, end: float | None = None) -> Profile:
        """The whole run's profile, or the windows overlapping ``[start, end]``."""
        if start is None and end is None:
            return Profile(self._samples, dict(self._self), dict(self._total), dict(self._dsos))
        return Profile.from_windows(self.windows, start, end)

    def last_profile(self) -> Profile:
        """The profile of the latest window (empty before the first)."""
        if not self.windows:
            return Profile()
        w = self.windows[-1]
        return Profile.from_stacks(w.stacks, w.dsos)

    def stacks(self, start: float | None = None, end: float | None = None,
               last: bool = False) -> dict[str, int]:
        """Folded stacks of the last window, the whole run or a range (for the flame graph)."""
        if last:
            return dict(self.windows[-1].stacks) if self.windows else {}
        if start is None and end is None:
            return dict(self._stacks)
        out: Counter[str] = Counter()
        for w in self.windows:
            if (start is None or w.ts >= start) and (end is None or w.start <= end):
                out.update(w.stacks)
        return dict(out)

    def side_profiles(self) -> dict[str, Profile]:
        """Profiles per workload side (``encrypted``, ``plain``), windows tagged by overlap.

        A window is tagged once for good when every span it overlaps is
        closed; only the windows near the open span are tagged again.
        """
        closed_end = self.spans[-2].end if len(self.spans) >= 2 else float("-inf")
        while self._decided < len(self.windows) and self.windows[self._decided].ts <= closed_end:
            w = self.windows[self._decided]
            side = self._side_of(w)
            if side is not None:
                acc = self._side_acc.setdefault(side, [0, Counter(), Counter(), {}])
                p = Profile.from_stacks(w.stacks, w.dsos)
                acc[0] += p.samples
                acc[1].update(p.self_counts)
                acc[2].update(p.total_counts)
                acc[3].update(w.dsos)
            self._decided += 1
        out = {side: Profile(a[0], dict(a[1]), dict(a[2]), dict(a[3])) for side, a in self._side_acc.items()}
        for w in self.windows[self._decided:]:
            side = self._side_of(w)
            if side is not None:
                out[side] = out.get(side, Profile()).merge(Profile.from_stacks(w.stacks, w.dsos))
        return out

    def _side_of(self, w: HotspotWindow) -> str | None:
        # Spans are in time order and never overlap: look only at those near the window.
        i = bisect.bisect_right(self._span_ends(), w.start)
        near = []
        while i < len(self.spans) and self.spans[i].start < w.ts:
            near.append(self.spans[i])
            i += 1
        return side_of(w.start, w.ts, near)

    def _span_ends(self) -> list[float]:
        if len(self._ends) != len(self.spans) or (self.spans and self._ends[-1] != self.spans[-1].end):
            # the open span's end moves; rebuilding is cheap next to a refresh
            self._ends = [s.end for s in self.spans]
        return self._ends

    def heat(self, symbol: str, start: float | None = None, end: float | None = None) -> Counter[int]:
        """Samples per offset inside ``symbol``, whole run or in ``[start, end]``."""
        if start is None and end is None:
            return Counter(self._heat.get(symbol, {}))
        out: Counter[int] = Counter()
        for lv in self._leaves:
            if (start is None or lv.ts >= start) and (end is None or lv.ts <= end + 2.0):
                out.update(lv.offsets.get(symbol, {}))
        return out
