"""The Waits dock: what the target waits on, as a live stacked area chart and a top-N table.

The chart shows the average number of threads in each class per bucket (like
Oracle's average active sessions), OS classes above and the engine's own
classes below when the engine has a wait source. The table ranks (source,
class, event) by samples, narrowed to the timeline's range when one is selected.
Below it, the exact OS waits (the eBPF tracer's, every call timed and sized in the
kernel) per class and syscall, as Oracle's V$SESSION_EVENT: count, total, average,
p50, p99 and the most common sizes; its heading says the source, and where eBPF
could not load, why.
"""

from __future__ import annotations

import functools
import time

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import QCheckBox, QDockWidget, QHBoxLayout, QHeaderView, QLabel, QSplitter, QTableView, QVBoxLayout, QWidget

from tdescope.app.events import WaitFigure
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.waits.counter import WaitTopRow
from tdescope.app.waits.exact import avg_us, format_sizes
from tdescope.app.waits.os_sampler import WAIT_CLASSES
from tdescope.ui.models.table import RowTableModel

__all__ = ["WaitsDock", "WaitTopModel", "ExactWaitModel", "CLASS_COLORS"]

#: One colour per class, the same in the chart, the table and the timeline.
CLASS_COLORS = {
    "CPU": (76, 175, 80),
    "File I/O": (33, 118, 210),
    "Sync": (0, 172, 193),
    "Memory operation": (255, 152, 0),
    "Lock": (229, 57, 53),
    "Network": (142, 36, 170),
    "Idle": (189, 189, 189),
    "Other": (121, 85, 72),
    "CPU queue": (139, 195, 74),
    "Off CPU": (158, 158, 158),
}
#: Seconds of history the chart shows while it follows the live edge.
FOLLOW_S = 120.0
_ENGINE_COLORS = [(63, 81, 181), (0, 150, 136), (205, 220, 57), (255, 87, 34), (96, 125, 139), (233, 30, 99)]


def class_color(name: str, i: int = 0) -> tuple[int, int, int]:
    """Colour of a wait class (engine classes cycle through a second palette)."""
    return CLASS_COLORS.get(name, _ENGINE_COLORS[i % len(_ENGINE_COLORS)])


@functools.lru_cache(maxsize=64)
def class_brush(name: str):
    """A wait class's brush, made once: an eBPF storm samples tens of thousands of wait spans, and making
    a brush per bar on each redraw held the GUI thread for half a second."""
    return pg.mkBrush(*class_color(name))


class _WaitClassRows(RowTableModel):
    """Rows whose ``class_column`` shows its wait class's colour and whose ``numbers`` columns align right.

    A subclass says the texts of one row (:meth:`texts`); every row has a ``wait_class``.
    """

    class_column = 0
    numbers: range = range(0)

    def texts(self, row) -> tuple[str, ...]:
        """The shown texts of ``row``, one per column."""
        raise NotImplementedError

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r = self.rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return self.texts(r)[col]
        if role == Qt.ItemDataRole.DecorationRole and col == self.class_column:
            return QColor(*class_color(r.wait_class))
        if role == Qt.ItemDataRole.TextAlignmentRole and col in self.numbers:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None


class WaitTopModel(_WaitClassRows):
    """Source, class, event, samples, %: refreshed in place."""

    columns = ("Source", "Class", "Event", "Samples", "%")
    class_column = 1
    numbers = range(3, 5)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[WaitTopRow] = []

    def texts(self, row: WaitTopRow) -> tuple[str, ...]:
        return (row.source, row.wait_class, row.event, str(row.samples), f"{row.pct:.1f}")


def _us(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f}"


class ExactWaitModel(_WaitClassRows):
    """Exact OS waits per (class, syscall): count, total, average, p50, p99, sizes; refreshed in place."""

    columns = ("Class", "Syscall", "Count", "Total ms", "Avg µs", "p50 µs", "p99 µs", "Sizes (most common)")
    numbers = range(2, 7)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[WaitFigure] = []

    def texts(self, row: WaitFigure) -> tuple[str, ...]:
        return (row.wait_class, row.syscall, f"{row.count:,}", f"{row.total_us / 1e3:,.2f}", _us(avg_us(row)),
                _us(row.p50_us), _us(row.p99_us), format_sizes(row))
        r = self.rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            us = lambda v: "–" if v is None else f"{v:,.1f}"  # noqa: E731
            return (r.wait_class, r.syscall, f"{r.count:,}", f"{r.total_us / 1e3:,.2f}", us(avg_us(r)),
                    us(r.p50_us), us(r.p99_us), format_sizes(r))[col]
        if role == Qt.ItemDataRole.DecorationRole and col == 0:
            return QColor(*class_color(r.wait_class))
        if role == Qt.ItemDataRole.TextAlignmentRole and 2 <= col <= 6:
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None



class _StackedChart(pg.PlotWidget):
    """Stacked areas of per-class counts over time; cumulative curves filled to zero."""

    def __init__(self, title: str, bucket_s: float, ticks_per_s: float) -> None:
        super().__init__()
        self.setBackground("w")
        self.bucket_s = bucket_s
        self.scale = 1.0 / max(ticks_per_s * bucket_s, 1e-9)
        self.setLabel("left", title)
        self.setLabel("bottom", "s since start")
        self.showGrid(x=True, y=True, alpha=0.2)
        self.setMouseEnabled(x=True, y=False)
        # the legend is a line of text under the chart (the dock places it): it never covers the areas
        self.legend = QLabel("")
        self.legend.setWordWrap(True)
        self.legend.setTextFormat(Qt.TextFormat.RichText)
        self.curves: dict[str, pg.PlotDataItem] = {}
        # Follow the last FOLLOW_S seconds (like a strip chart) until the user pans or zooms;
        # clipToView then draws only those points, which keeps a long run's repaint cheap.
        self.follow = True
        self.getViewBox().sigRangeChangedManually.connect(self._stop_following)
        self.region = pg.LinearRegionItem(movable=False, brush=pg.mkBrush(0, 0, 0, 25))
        self.region.setZValue(100)
        self.region.hide()
        self.addItem(self.region)

    def _curve(self, name: str, order: int) -> pg.PlotDataItem:
        c = self.curves.get(name)
        if c is None:
            color = class_color(name, order)
            c = self.plot([], [], name=name, pen=pg.mkPen(color, width=1), fillLevel=0,
                          brush=pg.mkBrush(*color, 200))
            c.setDownsampling(auto=True, method="peak")
            c.setClipToView(True)
            self.curves[name] = c
        return c

    def set_series(self, series: dict[str, list[int]], order: list[str]) -> None:
        """Stack ``series`` in ``order`` (first at the bottom)."""
        names = [n for n in order if n in series and any(series[n])]
        n = max((len(series[k]) for k in names), default=0)
        if n == 0:
            return
        x = np.arange(n, dtype=float) * self.bucket_s
        acc = np.zeros(n)
        for z, name in enumerate(names):
            row = series[name]
            acc = acc + np.pad(np.asarray(row, dtype=float), (0, n - len(row))) * self.scale
            c = self._curve(name, z)
            c.setData(x, acc.copy())
            c.setZValue(-z)  # the highest cumulative curve lies behind the others
        for name, c in self.curves.items():
            if name not in names:
                c.setData([], [])
        self.legend.setText(" ".join(
            f"<span style='color: rgb{class_color(name, z)}'>■</span>&nbsp;{name}" for z, name in enumerate(names)))
        if self.follow:
            end = n * self.bucket_s
            self.setXRange(max(0.0, end - FOLLOW_S), end, padding=0)

    def _stop_following(self, *_args) -> None:
        self.follow = False


class WaitsDock(QDockWidget):
    """Live wait classes and the top events."""

    def __init__(self, run: ObservedRun, ticks_per_s: float = 20.0, parent: QWidget | None = None) -> None:
        super().__init__("Waits", parent)
        self.setObjectName("WaitsDock")
        self.run = run
        self.range: tuple[float, float] | None = None
        self._seen = -1
        self._drawn_at = 0.0
        self.show_idle = QCheckBox("Show idle")
        self.summary = QLabel("Waiting for samples…")
        self.summary.setWordWrap(True)  # a longer count wraps; the dock keeps its width
        self.summary.setStyleSheet("color: #555;")
        self.engine_poll = QLabel("")  # what each engine-wait poll reads on the server, and how often
        self.engine_poll.setStyleSheet("color: #555;")
        self.engine_poll.setWordWrap(True)
        self.engine_poll.hide()
        self.chart = _StackedChart("threads (avg)", run.bucket_s, ticks_per_s)
        self.engine_chart = _StackedChart("engine waits", run.bucket_s, 10.0)
        self.engine_chart.setXLink(self.chart)
        self.engine_chart.hide()
        self.model = WaitTopModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(20)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        for col, w in enumerate((60, 130, 170, 70)):
            self.table.setColumnWidth(col, w)
        # the event's name takes what is left; Samples and % keep their width, never cut
        header.setSectionResizeMode(2, QHeaderView.ResizeMode.Stretch)
        header.setSectionResizeMode(3, QHeaderView.ResizeMode.ResizeToContents)
        header.setSectionResizeMode(4, QHeaderView.ResizeMode.ResizeToContents)
        self.exact_label = QLabel("Exact OS waits: not traced")
        self.exact_label.setStyleSheet("color: #555;")
        self.exact_label.setWordWrap(True)
        self.exact_model = ExactWaitModel(self)
        self.exact_table = QTableView()
        self.exact_table.setModel(self.exact_model)
        self.exact_table.verticalHeader().hide()
        self.exact_table.verticalHeader().setDefaultSectionSize(20)
        self.exact_table.horizontalHeader().setStretchLastSection(True)
        for col, w in enumerate((120, 90, 70, 75, 65, 65, 65)):
            self.exact_table.setColumnWidth(col, w)
        exact = QWidget()
        el = QVBoxLayout(exact)
        el.setContentsMargins(0, 0, 0, 0)
        el.addWidget(self.exact_label)
        el.addWidget(self.exact_table)
        self._exact_seen = -1
        self.exact_note = ""
        top = QHBoxLayout()
        top.addWidget(self.summary, 1)
        top.addWidget(self.show_idle)
        charts = QWidget()
        cl = QVBoxLayout(charts)
        cl.setContentsMargins(0, 0, 0, 0)
        cl.addWidget(self.chart, 3)
        cl.addWidget(self.chart.legend)
        cl.addWidget(self.engine_chart, 2)
        cl.addWidget(self.engine_chart.legend)
        self.engine_chart.legend.hide()
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(charts)
        split.addWidget(self.table)
        split.addWidget(exact)
        split.setSizes([260, 160, 200])
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.engine_poll)
        lay.addWidget(split)
        self.setWidget(body)
        self.show_idle.toggled.connect(lambda _on: self.refresh(force=True))

    def set_engine_poll(self, text: str, hz: float) -> None:
        """Say what the engine-wait source reads and how often (``text``; empty: no engine waits); its chart
        counts ``hz`` polls a second."""
        self.engine_poll.setText(text)
        self.engine_poll.setVisible(bool(text))
        self.engine_chart.scale = 1.0 / max(hz * self.run.bucket_s, 1e-9)

    def set_exact_note(self, text: str) -> None:
        """Why the exact OS waits are not from eBPF (one line; empty when they are)."""
        self.exact_note = text
        self.refresh(force=True)

    def set_range(self, rng: tuple[float, float] | None) -> None:
        """Narrow the table to ``(start, end)`` epoch seconds and shade it on the chart."""
        self.range = rng
        if rng is None or self.run.t0 is None:
            self.chart.region.hide()
            self.chart.follow = True  # back to the live edge
        else:
            lo, hi = rng[0] - self.run.t0, rng[1] - self.run.t0
            self.chart.region.setRegion((lo, hi))
            self.chart.region.show()
            self.chart.follow = False
            pad = max((hi - lo) * 0.05, self.run.bucket_s)
            self.chart.setXRange(max(0.0, lo - pad), hi + pad, padding=0)  # the range fills the chart
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Redraw when new samples arrived (or ``force``)."""
        self._refresh_exact(force)
        n = self.run.waits.samples
        if n == self._seen and not force:
            return
        now = time.monotonic()
        if not force and now - self._drawn_at < self.run.bucket_s:
            return  # the chart moves one bucket at a time: redrawing faster only costs the GUI thread
        self._seen, self._drawn_at = n, now
        order = [c for c in WAIT_CLASSES if c != "Idle" or self.show_idle.isChecked()]
        self.chart.set_series(self.run.waits.series, order)
        engine = self.run.waits.engine_series
        if engine:
            self.engine_chart.show()
            self.engine_chart.legend.show()
            self.engine_chart.set_series(engine, sorted(engine))
        exclude = () if self.show_idle.isChecked() else ("Idle",)
        rng = self.range or (None, None)
        rows = self.run.waits.top(15, *rng, exclude=exclude)
        self.model.set_rows(rows)
        busy = sum(r.samples for r in rows if r.source == "os")
        scope = "selected range" if self.range else "whole run"
        self.summary.setText(f"{n} samples · {scope} · top {len(rows)} events ({busy} OS samples shown)")

    def _refresh_exact(self, force: bool) -> None:
        n = len(self.run.exact_batches)
        if n == self._exact_seen and not force:
            return
        self._exact_seen = n
        rng = self.range or (None, None)
        skip = () if self.show_idle.isChecked() else ("Idle",)
        rows = [r for r in self.run.exact(*rng) if r.wait_class not in skip]
        self.exact_model.set_rows(rows)
        scope = "selected range" if self.range else "whole run"
        if n:
            calls = sum(r.count for r in rows if r.wait_class not in ("CPU queue", "Off CPU"))
            self.exact_label.setText(f"Exact OS waits · source: eBPF, every call timed and sized in the kernel · "
                                     f"{calls:,} calls · {scope}")
        elif self.exact_note:
            self.exact_label.setText(f"Exact OS waits · source: /proc samples only ({self.exact_note})")
