"""The report's figures of a recorded session, drawn by the same domain rules as the window's views.

The workload sides on the timeline are :func:`~tdescope.app.observe.timeline.side_spans` (what the
window's timeline draws from the same events, through :class:`~tdescope.app.observe.observed.ObservedRun`),
and the hotspot bars are :meth:`Profile.top <tdescope.app.hotspots.profile.Profile.top>` of the
session's hotspot windows (what the Hotspots dock lists): a report and a window showing one file agree.
"""

from __future__ import annotations

import base64
import time
from dataclasses import dataclass

from tdescope.app.events import CaptureWindowState, HotspotWindow, LostConnection, Marker, PageCapture, Problem, \
    WindowState, WorkloadProgress
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.hotspots.profile import Profile, SymbolStat
from tdescope.app.observe.timeline import side_spans
from tdescope.app.report.plots import SIDE_COLORS, TimelineLane, flame_graph, horizontal_bars, stacked_bars, timeline
from tdescope.app.session.notes import Note
from tdescope.app.session.reader import SessionReader
from tdescope.app.waits.counter import WaitCounter

__all__ = ["Plot", "hotspot_plots", "hotspot_rows", "timeline_lanes", "timeline_plot", "wait_plot"]


@dataclass(frozen=True, slots=True)
class Plot:
    """One figure: ``svg`` is a complete SVG document."""

    name: str
    title: str
    svg: str
    caption: str = ""

    @property
    def data_uri(self) -> str:
        """The SVG as a ``data:`` URI, for ``<img src>``."""
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode()).decode()


def wait_plot(reader: SessionReader, t0: float, t1: float) -> Plot:
    """Thread samples per bucket over the session, stacked by wait class."""
    span = max(t1 - t0, 1.0)
    bucket = max(span / 120, 0.25)
    n = int(span / bucket) + 1
    waits = WaitCounter(bucket, origin=t0)
    waits.add_rows(reader.wait_rows())
    series = {c: [float(k) for k in v] for c, v in waits.class_series(n).items()}
    order = ["CPU", "File I/O", "Sync", "Memory operation", "Lock", "Network", "Other", "Idle"]
    ordered = {c: series[c] for c in order if c in series}
    # the engine's own classes after, by first bucket they show in
    ordered.update({c: series[c] for c in sorted(set(series) - set(ordered),
                                                 key=lambda c: (next(i for i, k in enumerate(series[c]) if k), c))})
    svg = stacked_bars([t0 + i * bucket for i in range(n)] if series else [], ordered, t0, unit="thread samples")
    return Plot("waits", "Waits over time", svg, f"Thread samples per {bucket:.1f} s bucket, by wait class.")


def hotspot_rows(profile: Profile, n: int = 15) -> list[SymbolStat]:
    """The ``n`` hottest symbols by self time (:meth:`Profile.top`), those sampled on top of a stack."""
    return [row for row in profile.top(n, by="self") if row.self_samples]


def hotspot_plots(reader: SessionReader) -> list[Plot]:
    """Top hotspots by self time, and the flame graph of every stack."""
    windows = list(reader.events(kinds=[HotspotWindow]))
    profile = Profile.from_windows(windows)
    rows = [(r.symbol, r.self_pct, "crypto" if is_crypto(r.symbol) else "") for r in hotspot_rows(profile)]
    stacks: dict[str, int] = {}
    for w in windows:
        for stack, count in w.stacks.items():
            stacks[stack] = stacks.get(stack, 0) + count
    return [
        Plot("hotspots", "Top hotspots (self time)", horizontal_bars(rows),
             f"{profile.samples} perf samples; cipher and hash functions in red."),
        Plot("flame", "Flame graph", flame_graph(stacks),
             "All call stacks merged, outermost frame on top; width is share of samples."),
    ]


def _probe_windows(reader: SessionReader, t1: float) -> list[tuple[float, float, str]]:
    windows, armed_at = [], None
    for s in reader.events(kinds=[CaptureWindowState]):
        if s.state is WindowState.ARMED:
            # the first "armed" opens the window; later ones are live progress of the same window
            armed_at = s.ts if armed_at is None else armed_at
        elif armed_at is not None:
            why = " (paused: stop budget)" if s.state is WindowState.PAUSED else ""
            kept = f", {s.unsent} not kept (keep rate)" if s.unsent else ""
            windows.append((armed_at, s.ts, f"probe window: {s.captures} pages{kept}{why}"))
            armed_at = None
    if armed_at is not None:
        windows.append((armed_at, t1, "probe window (still armed at the end)"))
    return windows


def timeline_lanes(reader: SessionReader, notes: list[Note], t1: float) -> list[TimelineLane]:
    """The timeline's lanes: one per workload side (:func:`side_spans`), probe windows, captures, markers,
    problems and notes; lanes with nothing in them left out."""
    spans = side_spans(reader.events(kinds=[WorkloadProgress]))
    lanes = [TimelineLane(f"workload {side}", spans=tuple((s.start, s.end, side) for s in spans if s.side == side),
                          color=SIDE_COLORS.get(side, "#888888"))
             for side in dict.fromkeys(s.side for s in spans)]
    captures = [(c.ts, f"capture #{c.seq}" + (f" page {c.pgno}" if c.pgno >= 0 else ""))
                for c in reader.events(kinds=[PageCapture], with_bytes=False)]
    lanes += [TimelineLane("probe armed", spans=tuple(_probe_windows(reader, t1)), color="#c0392b"),
              TimelineLane("captures", ticks=tuple(captures[:2000]), color="#2ca02c"),
              TimelineLane("markers", ticks=tuple((m.ts, m.label) for m in reader.events(kinds=[Marker])),
                           color="#9467bd"),
              TimelineLane("problems", ticks=tuple((p.ts, p.message)
                                                  for p in reader.events(kinds=[Problem, LostConnection])),
                           color="#d62728"),
              TimelineLane("notes", ticks=tuple((n.when, n.text[:80]) for n in notes), color="#ff7f0e")]
    return [lane for lane in lanes if lane.spans or lane.ticks]


def timeline_plot(reader: SessionReader, notes: list[Note], t0: float, t1: float) -> Plot:
    """The session on one clock, cropped to where something happened."""
    lanes = timeline_lanes(reader, notes, t1)
    # cropped to what happened (runs, probe windows, captures, markers, notes), not the idle time around it
    moments = [t for lane in lanes for s, e, _ in lane.spans for t in (s, e)]
    moments += [ts for lane in lanes for ts, _ in lane.ticks if ts is not None]
    lo, hi = (min(moments), max(moments)) if moments else (t0, t1)
    pad = max((hi - lo) * 0.02, 0.5)
    lo, hi = max(t0, lo - pad), min(t1, hi + pad) if hi + pad > lo else hi + pad
    cropped = f" Shown: {time.strftime('%H:%M:%S', time.localtime(lo))} to {time.strftime('%H:%M:%S', time.localtime(hi))}" \
              f" ({hi - lo:.0f} s of the session's {t1 - t0:.0f} s), where something happened." \
        if (hi - lo) < 0.9 * (t1 - t0) else ""
    return Plot("timeline", "Timeline", timeline(lanes, lo, hi),
                "Workload sides, probe windows, captures, markers and notes on one clock." + cropped)
