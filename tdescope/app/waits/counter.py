"""Counting wait samples: the one way to count them per class and event, over a time range.

A :class:`WaitCounter` takes wait samples (live :class:`WaitSample` events, or
light ``(ts, source, wait_class, event)`` rows read from a session file) and answers:

* the top-N (source, class, event) of the whole run or of ``[start, end]``,
  with each row's share of its source's samples (:meth:`WaitCounter.top`);
* samples per class in fixed time buckets from :attr:`WaitCounter.origin`,
  OS and engine apart (:attr:`~WaitCounter.series`,
  :attr:`~WaitCounter.engine_series`) or together (:meth:`~WaitCounter.class_series`).

The Waits dock and the timeline read it through
:class:`~tdescope.app.observe.observed.ObservedRun`, ``tdescope waits`` ranks
with it, and the report's "Waits over time" plot is its :meth:`class_series`
of the rows from :meth:`~tdescope.app.session.reader.SessionReader.wait_rows`.

A sample at ``ts`` falls in bucket ``int((ts - origin) / bucket_s)``, the
quotient truncated as SQLite's ``CAST(... AS INTEGER)`` does; a sample before
the origin is in no bucket (it still counts in :meth:`top`).
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from tdescope.app.events import WaitSample
from tdescope.app.waits.os_sampler import WAIT_CLASSES

__all__ = ["WaitCounter", "WaitTopRow"]


@dataclass(frozen=True, slots=True)
class WaitTopRow:
    """One row of the wait top-N: ``source`` is ``"os"`` or the engine's name.

    ``pct`` is the share of ``samples`` in the samples of ``source`` that were
    ranked (excluded classes left out).
    """

    source: str
    wait_class: str
    event: str
    samples: int
    pct: float


class WaitCounter:
    """Running wait counts: totals per (source, class, event), time-ordered samples, class series.

    Parameters
    ----------
    bucket_s : float
        Width of the series buckets, in seconds.
    origin : float, optional
        Start of bucket 0 (epoch seconds); the first sample's time when not given.
    """

    def __init__(self, bucket_s: float = 0.25, origin: float | None = None) -> None:
        self.bucket_s = bucket_s
        self.origin = origin
        self.samples = 0
        #: OS samples per class per bucket (every OS class present, for a steady legend).
        self.series: dict[str, list[int]] = {c: [] for c in WAIT_CLASSES}
        #: Engine samples per engine class per bucket.
        self.engine_series: dict[str, list[int]] = {}
        # parallel lists, one entry per sample, kept in time order for range lookups
        self._ts: list[float] = []
        self._key: list[tuple[str, str, str]] = []
        self._totals: Counter[tuple[str, str, str]] = Counter()

    # -- adding ------------------------------------------------------------------------
    def add(self, samples: Iterable[WaitSample]) -> None:
        """Count wait samples (any order; samplers interleave)."""
        for s in samples:
            self._count(s.ts, (s.source, s.wait_class, s.event))

    def add_rows(self, rows: Iterable[tuple[float, str, str | None, str]]) -> None:
        """Count ``(ts, source, wait_class, event)`` samples (a class left empty is Other)."""
        for ts, source, wait_class, event in rows:
            self._count(ts, (source, wait_class or "Other", event))

    def _count(self, ts: float, key: tuple[str, str, str]) -> None:
        if self.origin is None:
            self.origin = ts
        if self._ts and ts < self._ts[-1]:
            i = bisect.bisect_right(self._ts, ts)
            self._ts.insert(i, ts)
            self._key.insert(i, key)
        else:
            self._ts.append(ts)
            self._key.append(key)
        self._totals[key] += 1
        self.samples += 1
        x = (ts - self.origin) / self.bucket_s
        if x < 0:
            return
        i = int(x)
        series = self.series if key[0] == "os" else self.engine_series
        row = series.setdefault(key[1], [])
        if len(row) <= i:
            row.extend([0] * (i + 1 - len(row)))
        row[i] += 1

    # -- answers ---------------------------------------------------------------------------
    def top(self, n: int = 15, start: float | None = None, end: float | None = None,
            exclude: Iterable[str] = ()) -> list[WaitTopRow]:
        """The ``n`` most sampled (source, class, event) in ``[start, end]`` (default: all).

        ``exclude`` drops classes (e.g. ``["Idle"]``) before ranking and before
        the percentages, which are within each source. Ties rank by source,
        class, event.
        """
        if start is None and end is None:
            counts = self._totals
        else:
            lo = 0 if start is None else bisect.bisect_left(self._ts, start)
            hi = len(self._ts) if end is None else bisect.bisect_right(self._ts, end)
            counts = Counter(self._key[lo:hi])
        skip = set(exclude)
        per_source: Counter[str] = Counter()
        for (src, cls, _), k in counts.items():
            if cls not in skip:
                per_source[src] += k
        rows = [
            WaitTopRow(src, cls, ev, k, 100.0 * k / (per_source[src] or 1))
            for (src, cls, ev), k in counts.items() if cls not in skip
        ]
        rows.sort(key=lambda r: (-r.samples, r.source, r.wait_class, r.event))
        return rows[:n]

    def class_series(self, buckets: int) -> dict[str, list[int]]:
        """Samples per class in the first ``buckets`` buckets, OS and engine together.

        Only classes with a sample in those buckets are present; a class named
        by both (``CPU``) adds up.
        """
        out: dict[str, list[int]] = {}
        for series in (self.series, self.engine_series):
            for cls, row in series.items():
                acc = out.setdefault(cls, [0] * buckets)
                for i, k in enumerate(row[:buckets]):
                    acc[i] += k
        return {c: v for c, v in out.items() if any(v)}
