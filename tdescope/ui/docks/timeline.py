"""The Timeline dock: workload phases, hotspot windows, wait density and captures on one axis.

Lanes, top to bottom: the runs' names, workload sides (encrypted / plain spans), hotspot
windows (shaded by their share of crypto), non-idle wait density, capture ticks, and notes as markers.
The axis shows the session's activity (runs, captures, notes), not the idle time since the window
opened: it zooms to the last run when one ends; "Run" and "All" zoom back; time never goes below 0.
Tick "Filter to range" and drag the shaded region: the hotspot and wait views
narrow to it (``rangeChanged``); the region starts on the last run.
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QDockWidget, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from tdescope.app.observe.observed import ObservedRun
from tdescope.app.report.plots import SIDE_COLORS
from tdescope.ui.docks.timeline_items import ItemPool, SideLabels, WaitSpanBars, text_width
from tdescope.ui.docks.waits import class_brush

__all__ = ["TimelineDock"]

_SIDE_BRUSHES = {side: pg.mkBrush(QColor(color)) for side, color in SIDE_COLORS.items()}  # as in the report
_OTHER_BRUSH = pg.mkBrush(120, 120, 120, 150)
_LANES = {"runs": 4.0, "workload": 3.0, "hotspots": 2.0, "waits": 1.0, "captures": 0.0}
#: Pixels kept between two labels of one row.
_LABEL_GAP = 6
_WINDOW_BRUSHES = [pg.mkBrush(120, 110, 230, 40 + 2 * pct) for pct in range(101)]


def window_brush(crypto: float):
    """A hotspot window's brush: alpha 40 + 2 per % of its time in crypto, one per shade (a seek draws
    thousands of windows; a brush each held the GUI thread)."""
    return _WINDOW_BRUSHES[min(max(int(crypto), 0), 100)]


class TimelineDock(QDockWidget):
    """One time axis (seconds since the first event) for everything observed."""

    rangeChanged = Signal(object)
    """Emitted with ``(start, end)`` epoch seconds, or None when the filter is off."""

    def __init__(self, run: ObservedRun, parent: QWidget | None = None) -> None:
        super().__init__("Timeline", parent)
        self.setObjectName("TimelineDock")
        self.run = run
        self._seen: tuple = ()
        self._note_x: list[float] = []
        self._note_list: list = []
        self._win_brushes: list = []  # one per window drawn, shared by the windows of one shade
        self._captures_drawn = 0
        self.plot = pg.PlotWidget(background="w")
        self.plot.setMouseEnabled(x=True, y=False)
        self.plot.hideButtons()
        self.plot.showGrid(x=True, alpha=0.2)
        self.plot.getViewBox().sigXRangeChanged.connect(self._fit_labels)
        self.plot.getViewBox().sigResized.connect(self._fit_labels)
        axis = self.plot.getAxis("left")
        axis.setTicks([[(y + 0.4, name) for name, y in _LANES.items()]])
        axis.setWidth(70)
        self.plot.setYRange(-0.1, 4.9, padding=0)
        self.plot.setLimits(xMin=0)  # nothing happens before the first event
        self.sides = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brushes=[])
        self.windows = pg.BarGraphItem(x0=[], width=[], y0=[], height=[], brushes=[])
        self.density = pg.PlotDataItem([], [], pen=pg.mkPen(33, 118, 210), fillLevel=_LANES["waits"],
                                       brush=pg.mkBrush(33, 118, 210, 80))
        self.density.setDownsampling(auto=True, method="peak")
        self.density.setClipToView(True)
        # exact waits (the eBPF tracer's sample of the long ones), a thin strip on top of the waits lane
        self.wait_spans = WaitSpanBars(self.plot, _LANES["waits"] + 0.82, 0.14, class_brush)
        self.captures = pg.ScatterPlotItem(symbol="s", size=4, pen=None, brush=pg.mkBrush(60, 60, 60, 200))
        for item in (self.sides, self.windows, self.density, self.captures):
            self.plot.addItem(item)
        self._labels = SideLabels(self.plot)
        self._marker_lines = ItemPool(self.plot, lambda: pg.InfiniteLine(
            0.0, pen=pg.mkPen(90, 90, 90, style=Qt.PenStyle.DashLine)))
        self._run_label_pool = ItemPool(self.plot, lambda: pg.TextItem(anchor=(0, 0.5), color=(60, 60, 60)))
        self._run_labels: list[tuple[float, pg.TextItem]] = []  # (x, label): runs' names in their own row
        self.notes = pg.ScatterPlotItem(symbol="t", size=11, pen=pg.mkPen(120, 80, 0),
                                        brush=pg.mkBrush(255, 193, 7), hoverable=True, tip=self._note_tip)
        self.plot.addItem(self.notes)
        self.region = pg.LinearRegionItem(brush=pg.mkBrush(255, 193, 7, 60))
        self.region.setZValue(50)
        self.region.hide()
        self.plot.addItem(self.region)
        self._head_ts: float | None = None  # the replay's play head (epoch seconds), or None when live
        self.head = pg.InfiniteLine(0, pen=pg.mkPen(230, 110, 0, width=2))
        self.head.setZValue(60)
        self.head.setToolTip("The replay's play head")
        self.head.hide()
        self.plot.addItem(self.head)
        self.filter = QCheckBox("Filter views to range")
        self.info = QLabel("x axis: seconds since the first event")
        self.info.setStyleSheet("color: #555;")
        self.zoom_run = QPushButton("Run")
        self.zoom_run.setToolTip("Zoom to the last run")
        self.zoom_run.clicked.connect(self.zoom_to_run)
        self.zoom_all = QPushButton("All")
        self.zoom_all.setToolTip("Zoom to all activity: runs, captures and notes (not the idle time between)")
        self.zoom_all.clicked.connect(self.zoom_to_activity)
        top = QHBoxLayout()
        top.addWidget(self.filter)
        top.addWidget(self.info, 1)
        top.addWidget(QLabel("Zoom:"))
        top.addWidget(self.zoom_run)
        top.addWidget(self.zoom_all)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 2, 4, 2)
        lay.addLayout(top)
        lay.addWidget(self.plot)
        self.setWidget(body)
        self.filter.toggled.connect(self._on_filter)
        self.region.sigRegionChangeFinished.connect(self._emit_range)

    # -- range -------------------------------------------------------------------
    def _on_filter(self, on: bool) -> None:
        if on:
            (x0, x1), _ = self.plot.viewRange()
            span = x1 - x0
            if not self.region.isVisible():
                run = self._last_run()
                self.region.setRegion(run if run else (x0 + span * 0.4, x0 + span * 0.6))
            self.region.show()
        else:
            self.region.hide()
        self._emit_range()

    def set_range(self, start: float, end: float) -> None:
        """Select ``[start, end]`` (epoch seconds) and turn the filter on."""
        t0 = self.run.t0 or start
        # Signals held back so that exactly one rangeChanged goes out, with the new range.
        for widget in (self.filter, self.region):
            widget.blockSignals(True)
        self.filter.setChecked(True)
        self.region.setRegion((start - t0, end - t0))
        for widget in (self.filter, self.region):
            widget.blockSignals(False)
        self.region.show()
        self._emit_range()

    def selected_range(self) -> tuple[float, float] | None:
        """The filter range in epoch seconds, or None."""
        if not self.filter.isChecked() or self.run.t0 is None:
            return None
        a, b = self.region.getRegion()
        return (self.run.t0 + a, self.run.t0 + b)

    def _emit_range(self) -> None:
        rng = self.selected_range()
        self.info.setText("x axis: seconds since the first event" if rng is None
                          else f"range: {rng[1] - rng[0]:.1f} s (drag its edges)")
        self.rangeChanged.emit(rng)

    # -- refresh -------------------------------------------------------------------
    def refresh(self, force: bool = False) -> None:
        """Redraw lanes that got new data."""
        run = self.run
        if run.t0 is None:
            return
        # Each lane redraws only when its own data moved: waits change every tick,
        # windows once a second, spans a few times per run.
        if self._note_list and len(self._note_x) != len(self._note_list):
            self.set_notes(self._note_list)  # notes read before the first event: placed now
        if self._head_ts is not None and not self.head.isVisible():
            self._place_head()
        lanes = {
            "sides": (len(run.spans), run.spans[-1].end if run.spans else 0),
            "windows": len(run.windows),
            "density": run.waits.samples,
            "spans": len(run.wait_spans),
            "marks": (len(run.capture_ts), len(run.markers))}
        seen = self._seen if isinstance(self._seen, dict) and not force else {}
        if lanes == seen:
            return
        self._seen = lanes
        t0 = run.t0
        if lanes["sides"] != seen.get("sides"):
            self._draw_sides(t0)
        if lanes["windows"] != seen.get("windows"):
            self._draw_windows(t0)
        if lanes["density"] != seen.get("density"):
            self._draw_density()
        if lanes["spans"] != seen.get("spans"):
            self.wait_spans.update(run.wait_spans, t0)
        if lanes["marks"] == seen.get("marks"):
            return
        if len(run.capture_ts) < self._captures_drawn:  # the run was cleared under the dock
            self.captures.setData([], [])
            self._captures_drawn = 0
        new_ts = run.capture_ts[self._captures_drawn:]
        if new_ts:  # the new ones only: setData made every point again (thousands in an eBPF storm)
            self.captures.addPoints(x=np.asarray(new_ts) - t0, y=np.full(len(new_ts), _LANES["captures"] + 0.4))
            self._captures_drawn = len(run.capture_ts)
        new_marks = run.markers[len(self._marker_lines):]
        for m in new_marks:
            line = self._marker_lines.take()
            line.setValue(m.ts - t0)
            line.setToolTip(m.label)
            if m.label.endswith(" start"):  # the run's name in the "runs" row, above the sides' names
                label = self._run_label_pool.take()
                label.setText("▶ " + m.label[:-6])
                label.setPos(m.ts - t0, _LANES["runs"] + 0.4)
                self._run_labels.append((m.ts - t0, label))
        if new_marks:
            self._fit_labels()
        if any(m.label.endswith(" end") for m in new_marks):
            if self._head_ts is None:
                self.zoom_to_run()  # a run just ended: show it, not the idle minutes around it
            else:
                self.focus(self._head_ts)  # a replay: the run the play head is in

    # -- zoom and notes -------------------------------------------------------------
    def _activity(self) -> list[tuple[float, float]]:
        """Spans of activity, seconds on the axis: runs (start to end marker), captures, notes."""
        run, t0 = self.run, self.run.t0
        if t0 is None:
            return []
        out = []
        opened: dict[str, float] = {}
        for m in run.markers:
            if m.label.endswith(" start"):
                opened[m.label[:-6]] = m.ts - t0
            elif m.label.endswith(" end") and m.label[:-4] in opened:
                out.append((opened.pop(m.label[:-4]), m.ts - t0))
        out += [(b, b) for b in opened.values()]  # a run still going: its spans give the rest
        out += [(s.start - t0, s.end - t0) for s in run.spans]
        if run.capture_ts:
            out.append((min(run.capture_ts) - t0, max(run.capture_ts) - t0))
        out += [(x, x) for x in self._note_x]
        return out

    def _last_run(self) -> tuple[float, float] | None:
        t0 = self.run.t0
        marks = self.run.markers
        ends = [m for m in marks if m.label.endswith(" end")]
        if t0 is None or not ends:
            return None
        end = ends[-1]
        start = next((m for m in reversed(marks) if m.label == end.label[:-4] + " start"), None)
        return (start.ts - t0 if start else 0.0, end.ts - t0)

    def _show(self, lo: float, hi: float) -> None:
        pad = max((hi - lo) * 0.04, 0.2)
        x0, x1 = max(0.0, lo - pad), hi + pad
        (v0, v1), _ = self.plot.viewRange()
        if abs(v0 - x0) + abs(v1 - x1) <= 1e-9 * max(1.0, x1 - x0):
            return  # already shown: a replay's refreshes focus the same run again and again (every label re-laid)
        self.plot.setXRange(x0, x1, padding=0)

    def zoom_to_run(self) -> None:
        """Show the last run, start to end."""
        run = self._last_run()
        if run is not None:
            self._show(*run)
        else:
            self.zoom_to_activity()

    def zoom_to_activity(self) -> None:
        """Show everything that happened (runs, captures, notes), and not the idle time before it."""
        spans = self._activity()
        if spans:
            self._show(min(b for b, _ in spans), max(e for _, e in spans))

    def show_play_head(self, ts: float | None) -> None:
        """Draw the replay's play head at ``ts`` (epoch seconds; None hides it); when it is off the
        visible range the view moves to it (see :meth:`focus`), so a seek is always seen."""
        self._head_ts = ts
        self._place_head()

    def focus(self, ts: float) -> None:
        """Show the moment ``ts``: the run it falls in, start to end, or the same span as now around it."""
        t0 = self.run.t0
        if t0 is None:
            return
        x = ts - t0
        run = next(((lo, hi) for lo, hi in self._runs() if lo <= x <= hi), None)
        if run is None:
            (x0, x1), _ = self.plot.viewRange()
            half = min(max((x1 - x0) / 2, 1.0), 30.0)
            run = (max(0.0, x - half), x + half)
        self._show(*run)
        if self._head_ts is not None:
            self.head.setValue(self._head_ts - t0)
            self.head.show()

    def _place_head(self) -> None:
        t0 = self.run.t0
        if self._head_ts is None or t0 is None:
            self.head.setVisible(self._head_ts is not None and t0 is not None)
            return
        x = self._head_ts - t0
        self.head.setValue(x)
        self.head.show()
        (x0, x1), _ = self.plot.viewRange()
        if not x0 <= x <= x1:
            self.focus(self._head_ts)

    def _runs(self) -> list[tuple[float, float]]:
        """Each finished run, start to end marker, in seconds on the axis."""
        t0, out, opened = self.run.t0, [], {}
        for m in self.run.markers:
            if m.label.endswith(" start"):
                opened[m.label[:-6]] = m.ts - t0
            elif m.label.endswith(" end") and m.label[:-4] in opened:
                out.append((opened.pop(m.label[:-4]), m.ts - t0))
        return out

    def set_notes(self, notes) -> None:
        """Draw ``notes`` (their moment) as markers in the capture lane; hovering shows the text."""
        self._note_list = [n for n in notes if n.when is not None]
        t0 = self.run.t0
        if t0 is None:
            self._note_x = []
            self.notes.setData([], [])
            return
        self._note_x = [n.when - t0 for n in self._note_list]
        self.notes.setData(self._note_x, [_LANES["captures"] + 0.75] * len(self._note_x),
                           data=[n.text for n in self._note_list])

    def _note_tip(self, x, y, data) -> str:
        return f"note: {data}"

    def _draw_sides(self, t0: float) -> None:
        spans = self.run.spans
        y = _LANES["workload"]
        self.sides.setOpts(
            x0=[s.start - t0 for s in spans], width=[max(s.end - s.start, 0.05) for s in spans],
            y0=[y + 0.1] * len(spans), height=[0.6] * len(spans),
            brushes=[_SIDE_BRUSHES.get(s.side, _OTHER_BRUSH) for s in spans], pen=pg.mkPen(None),
        )
        self._labels.place([(f"{s.side}", s.start - t0) for s in spans], y + 0.4)
        self._fit_labels()

    def _fit_labels(self, *_args) -> None:
        """Labels never overlap: a side's shows only where its span is wide enough on screen; a run's
        name (its own row) only where it ends before the next one starts, else in its tooltip."""
        vb = self.plot.getViewBox()
        (x0, x1), px = vb.viewRange()[0], max(vb.width(), 1.0)
        per_px = (x1 - x0) / px
        for label, s in zip(self._labels.used, self.run.spans):
            need = text_width(label) + _LABEL_GAP
            label.setVisible((s.end - s.start) / per_px >= need if per_px > 0 else False)
        free_from = float("-inf")  # where, in pixels, the row is free again
        for x, label in sorted(self._run_labels, key=lambda item: item[0]):
            left = (x - x0) / per_px if per_px > 0 else 0.0
            fits = per_px > 0 and left >= free_from
            label.setVisible(fits)
            if fits:
                free_from = left + text_width(label) + _LABEL_GAP

    def _draw_windows(self, t0: float) -> None:
        wins = self.run.windows
        self._win_brushes += [window_brush(c) for c in self.run.window_crypto[len(self._win_brushes):]]
        y = _LANES["hotspots"]
        self.windows.setOpts(
            x0=[w.start - t0 for w in wins], width=[w.ts - w.start for w in wins],
            y0=[y + 0.1] * len(wins), height=[0.6] * len(wins),
            brushes=list(self._win_brushes),
            pen=pg.mkPen(255, 255, 255),
        )

    def _draw_density(self) -> None:
        series = self.run.waits.series
        n = max((len(v) for v in series.values()), default=0)
        if n == 0:
            return
        busy = np.zeros(n)
        for cls, row in series.items():
            if cls != "Idle" and row:
                busy[: len(row)] += row
        peak = busy.max() or 1.0
        x = np.arange(n) * self.run.bucket_s
        self.density.setData(x, _LANES["waits"] + 0.8 * busy / peak)

    def reset(self) -> None:
        """Forget what was drawn (the run was cleared)."""
        self._seen = ()
        self._win_brushes.clear()
        for pool in (self._labels, self._marker_lines, self._run_label_pool):
            pool.release()  # hidden, and used again: removing and making them held a seek back
        self._run_labels.clear()
        self.filter.setChecked(False)
        for item in (self.sides, self.windows):
            item.setOpts(x0=[], width=[], y0=[], height=[], brushes=[])
        self.wait_spans.clear()
        self.density.setData([], [])
        self.captures.setData([], [])
        self._captures_drawn = 0
        self.notes.setData([], [])
        self._note_x = []
        self.head.hide()  # placed again once the replayed events give the axis its origin
