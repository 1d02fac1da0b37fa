"""The A/B results of a session: every run kept, the chosen one as a table and a ratio chart.

A run of interleaved rounds (:class:`~tdescope.app.events.ABResult`) shows per phase
the median encrypted and plain time, the median ratio and its 95 % interval; the
chart puts each round's ratio as a dot, the median as a bar and the interval as a
whisker, with the "no cost" line at 1×. Single runs (:class:`WorkloadResult`, such
as the capture round) stay in the history too, marked as what they are.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QComboBox, QHeaderView, QLabel, QTableWidget, QTableWidgetItem, QTabWidget, QVBoxLayout, QWidget,
)

from tdescope.app.ab.result_table import AB_HEADER, ResultTable, Verdict, ab_table, single_table
from tdescope.app.events import AB_SIDES, ABResult, PhaseName, Side, WorkloadResult
from tdescope.app.report.plots import SIDE_COLORS

__all__ = ["ABResultsView", "run_title"]

_SIDE_COLORS = {side: QColor(color).getRgb()[:3] for side, color in SIDE_COLORS.items()}  # as in the report
_RATIO_COLOR = _SIDE_COLORS[Side.ENCRYPTED]
#: The dock's header words for the table's own (which the report and the JSON keep): a Workload dock
#: 450 px wide at 1280×720 showed no "95 % interval" column under the long ones. The full words are the tooltip.
_SHORT_HEADER = {"Encrypted (s, median)": "Encrypted s", "Plain (s, median)": "Plain s", "Ratio (median)": "Ratio",
                 "Encrypted (s)": "Encrypted s", "Plain (s)": "Plain s"}
_VERDICT_COLORS = {Verdict.COST: QColor("#b03a2e"), Verdict.NO_CLEAR_COST: QColor("#7f7f7f"),
                   Verdict.NO_COST: QColor("#2e7d32")}


def run_title(result: ABResult | WorkloadResult) -> str:
    """One line naming a run in the history: time, workload, its ratio (and interval)."""
    when = time.strftime("%H:%M:%S", time.localtime(result.ts))
    if isinstance(result, ABResult):
        ratio = ab_table(result).ratio
        if ratio is None:
            return f"{when} · {result.label} · no round completed"
        return f"{when} · {result.label} · {ratio.text} ({ratio.interval.text()}, {result.completed_rounds()} rounds)"
    kind = "capture round (untimed)" if result.capture_round else "single run"
    ratio = single_table(result).ratio
    return f"{when} · {result.label or result.workload} · {kind}" + (f" · {ratio.text}" if ratio else "")


class ABResultsView(QWidget):
    """History of runs, and the chosen one as a table and a chart."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self._runs: list[ABResult | WorkloadResult] = []
        self.history = QComboBox()
        self.history.setToolTip("Every run of this session stays here: pick one to compare")
        self.history.setPlaceholderText("No run yet: press Run (Ctrl+R)")
        self.history.currentIndexChanged.connect(self._on_pick)
        self.history.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.history.setMinimumContentsLength(24)  # long titles elide; the dock never widens for them
        self.table = QTableWidget(0, len(AB_HEADER))
        self._set_header(AB_HEADER)
        self.table.verticalHeader().setVisible(False)
        self.table.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        header = self.table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        header.setStretchLastSection(True)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.table.setMinimumHeight(self.table.verticalHeader().defaultSectionSize() * 3)
        self.chart = pg.PlotWidget(background=None)
        self.chart.setMinimumHeight(90)
        self.chart.setMenuEnabled(False)
        self.chart.setMouseEnabled(x=False, y=False)
        self.chart.hideButtons()
        self._chart_pending: Callable[[], None] | None = None  # the chosen run's chart, drawn once it is seen
        self.chart.installEventFilter(self)
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.table, "Table")
        self.tabs.addTab(self.chart, "Chart")
        lay = QVBoxLayout(self)
        lay.setContentsMargins(0, 0, 0, 0)
        lay.addWidget(self.history)
        lay.addWidget(self.tabs, 1)
        lay.addWidget(self.note)

    # -- history ---------------------------------------------------------------
    def add(self, *results: ABResult | WorkloadResult) -> None:
        """Keep ``results`` and show the last: drawn once, however many came (a replay's seek brings
        a hundred runs in one batch; drawing each held the GUI thread)."""
        if not results:
            return
        self._runs.extend(results)
        self.history.blockSignals(True)
        self.history.addItems([run_title(r) for r in results])
        self.history.setCurrentIndex(len(self._runs) - 1)
        self.history.blockSignals(False)
        self._on_pick(len(self._runs) - 1)

    def clear(self) -> None:
        """Forget every run (a replay restarting from its beginning)."""
        self._runs.clear()
        self.history.clear()
        self.table.setRowCount(0)
        self.chart.clear()
        self._chart_pending = None
        self.note.clear()

    def runs(self) -> list[ABResult | WorkloadResult]:
        """Every run shown, oldest first."""
        return list(self._runs)

    def _on_pick(self, index: int) -> None:
        if 0 <= index < len(self._runs):
            run = self._runs[index]
            self.show_ab(run) if isinstance(run, ABResult) else self.show_single(run)

    # -- one run ---------------------------------------------------------------
    def show_ab(self, result: ABResult) -> None:
        """Table, ratio chart and the run's circumstances."""
        table = ab_table(result)
        self._fill(table)
        self._when_chart_seen(lambda: self._plot_ratios(result))
        text = " · ".join(table.facts)
        if table.warnings:
            text += "<br><b style='color:#b35900'>⚠ " + "; ".join(table.warnings) + "</b>"
        self.note.setText(text)
        self.note.setToolTip(f"Interval: {table.method}. Each round runs the encrypted and the plain side on "
                             "their own, alternating which goes first; the ratio is paired within a round.")

    def show_single(self, result: WorkloadResult) -> None:
        """A single run: its own table, or phases with encrypted/plain bars."""
        self._fill(single_table(result))
        self._when_chart_seen(lambda: self._plot_bars(result))
        counts = "  ".join(f"<b>{side}</b>: " + ", ".join(f"{k} = {v}" for k, v in c.items())
                           for side, c in result.counts.items())
        kind = ("Capture round: probes were armed, so these times are not the measurement."
                if result.capture_round else "One run: no interval; use rounds for a figure.")
        legend = " ".join(f"<span style='color:#{r:02x}{g:02x}{b:02x}'>■</span> {side}"
                          for side, (r, g, b) in _SIDE_COLORS.items())  # under the chart, never over the bars
        self.note.setText(f"{kind} Chart: {legend}" + (f"<br>{counts}" if counts else ""))

    def _when_chart_seen(self, draw: Callable[[], None]) -> None:
        """Draw the chart now if it is on screen, else when it is shown (its tab picked, the dock raised):
        a replay's seek brings runs by the hundred, and the chart behind the Table tab was drawn for each."""
        if self.chart.isVisible():
            self._chart_pending = None
            draw()
        else:
            self._chart_pending = draw

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        if obj is self.chart and event.type() == QEvent.Type.Show and self._chart_pending is not None:
            draw, self._chart_pending = self._chart_pending, None
            draw()
        return False

    def _fill(self, table: ResultTable) -> None:
        self.table.clear()
        self._set_header(table.header)
        self.table.setRowCount(len(table.rows))
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row):
                item = QTableWidgetItem(cell.text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row[0].value == PhaseName.TOTAL or table.header[c].startswith("Ratio"):
                    f = item.font()
                    f.setBold(True)
                    item.setFont(f)
                if cell.verdict is not None:
                    item.setForeground(_VERDICT_COLORS[cell.verdict])
                    item.setToolTip(f"95 % interval {cell.interval.text('×')}: {cell.verdict.value}")
                self.table.setItem(r, c, item)

    def _set_header(self, header: tuple[str, ...]) -> None:
        """Short header words, each with the table's full words as its tooltip."""
        self.table.setColumnCount(len(header))
        self.table.setHorizontalHeaderLabels([_SHORT_HEADER.get(h, h) for h in header])
        for c, words in enumerate(header):
            self.table.horizontalHeaderItem(c).setToolTip(words)

    def _axis(self, labels: list[str], left: str, units: str | None = None) -> None:
        self.chart.clear()
        self.chart.setLabel("left", left, units=units)
        self.chart.getAxis("bottom").setTicks([list(enumerate(labels))])
        self.chart.setXRange(-0.6, len(labels) - 0.4, padding=0)

    def _plot_ratios(self, result: ABResult) -> None:
        phases = list(result.phases)
        self._axis([p.phase for p in phases], "encrypted / plain")
        if not phases:
            return
        xs = list(range(len(phases)))
        self.chart.addItem(pg.BarGraphItem(x=xs, height=[p.ratio_median for p in phases], width=0.5,
                                           brush=pg.mkBrush(*_RATIO_COLOR, 90), pen=pg.mkPen(*_RATIO_COLOR)))
        mid = [(p.ratio_ci_low + p.ratio_ci_high) / 2 for p in phases]
        self.chart.addItem(pg.ErrorBarItem(x=np.array(xs, float), y=np.array(mid),
                                           height=np.array([p.ratio_ci_high - p.ratio_ci_low for p in phases]),
                                           beam=0.2, pen=pg.mkPen(60, 60, 60, width=2)))
        dots_x, dots_y = [], []
        for i, p in enumerate(phases):
            n = len(p.ratios)
            for k, r in enumerate(p.ratios):
                dots_x.append(i + (k - (n - 1) / 2) * 0.06)
                dots_y.append(r)
        self.chart.addItem(pg.ScatterPlotItem(dots_x, dots_y, size=7, brush=pg.mkBrush(40, 40, 40, 200),
                                              pen=None))
        self.chart.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=pg.mkPen(120, 120, 120, style=Qt.PenStyle.DashLine),
                                           label="1× = no cost", labelOpts={"position": 0.95, "color": (90, 90, 90)}))
        top = max([1.0] + [p.ratio_ci_high for p in phases] + list(dots_y))
        self.chart.setYRange(0, top * 1.1, padding=0)

    def _plot_bars(self, result: WorkloadResult) -> None:
        phases = [t.phase for t in result.timings if t.side == Side.ENCRYPTED and t.phase != PhaseName.TOTAL]
        self._axis(phases, "elapsed", "s")
        width = 0.38
        for k, side in enumerate(AB_SIDES):
            values = [next((t.elapsed_s for t in result.timings if t.side == side and t.phase == ph), 0.0)
                      for ph in phases]
            xs = [i + (k - 0.5) * width for i in range(len(phases))]
            self.chart.addItem(pg.BarGraphItem(x=xs, height=values, width=width, brush=pg.mkBrush(*_SIDE_COLORS[side])))
