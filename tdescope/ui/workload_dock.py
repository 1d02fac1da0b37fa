"""The Workload dock: pick an experiment, set its parameters, run it, read the ratio."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDockWidget,
    QFormLayout,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QTabWidget,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.engines.api import ProbeRecipe, Workload
from tdescope.app.events import WorkloadProgress, WorkloadResult

__all__ = ["WorkloadDock"]

_SIDE_COLORS = {"encrypted": (214, 96, 77), "plain": (67, 147, 195)}


class WorkloadDock(QDockWidget):
    """Parameters, Run/Cancel, progress, and results with the encrypted/plain ratio."""

    runRequested = Signal(str, dict, object, int)
    """(workload name, params, ProbeRecipe or None, max captures) when the user presses Run."""
    cancelRequested = Signal()
    """When the user presses Cancel."""

    def __init__(self, parent=None) -> None:
        super().__init__("Workload", parent)
        self.setObjectName("WorkloadDock")
        self._workloads: dict[str, Workload] = {}
        self._recipes: list[ProbeRecipe] = []
        self._spins: dict[str, QSpinBox] = {}

        self.combo = QComboBox()
        self.combo.currentIndexChanged.connect(self._on_workload)
        self.description = QLabel()
        self.description.setWordWrap(True)
        self.description.setStyleSheet("color: gray;")
        self.form = QFormLayout()
        self.capture = QCheckBox("Capture pages")
        self.capture.setChecked(True)
        self.capture.setToolTip("Arm a bounded probe window on the engine's cipher call while the workload runs")
        self.recipe = QComboBox()
        self.max_captures = QSpinBox()
        self.max_captures.setRange(1, 100000)
        self.max_captures.setValue(200)
        self.max_captures.setToolTip("The probe disarms itself after this many page pairs")
        self.backend = QComboBox()
        for label, name in (("auto", "auto"), ("eBPF", "ebpf"), ("gdb", "gdb")):
            self.backend.addItem(label, name)
        self.backend.setToolTip("What places the probe: eBPF uprobes (microseconds per page, the target never "
                                "stops), gdb breakpoints (the teaching view), or auto: eBPF where it can load")
        cap_row = QHBoxLayout()
        cap_row.addWidget(self.capture)
        cap_row.addWidget(self.recipe, 1)
        cap_row.addWidget(QLabel("max"))
        cap_row.addWidget(self.max_captures)
        cap_row.addWidget(self.backend)
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run the workload on the encrypted database, then on its plain twin (Ctrl+R)")
        self.run_button.clicked.connect(self._on_run)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop at the next statement; both databases stay consistent (Esc)")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancelRequested)
        buttons = QHBoxLayout()
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setFormat("%p%")
        self.status = QLabel("Ready.")
        self.results = QTableWidget(0, 4)
        self.results.setHorizontalHeaderLabels(["Phase", "Encrypted (s)", "Plain (s)", "Ratio"])
        self.results.verticalHeader().setVisible(False)
        self.results.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Stretch)
        self.results.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.counts = QLabel()
        self.counts.setWordWrap(True)
        self.counts.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.chart = pg.PlotWidget(background=None)
        self.chart.setMinimumHeight(120)
        self.chart.setMenuEnabled(False)
        self.chart.setMouseEnabled(x=False, y=False)
        self.chart.setLabel("left", "elapsed", units="s")
        self.chart.addLegend(offset=(-5, 5))

        body = QWidget()
        lay = QVBoxLayout(body)
        lay.addWidget(self.combo)
        lay.addWidget(self.description)
        lay.addLayout(self.form)
        lay.addLayout(cap_row)
        lay.addLayout(buttons)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        # table and chart share one place: both readable in a narrow dock
        self.result_tabs = QTabWidget()
        self.result_tabs.addTab(self.results, "Table")
        self.result_tabs.addTab(self.chart, "Chart")
        lay.addWidget(self.result_tabs, 1)
        lay.addWidget(self.counts)
        self.setWidget(body)
        self.set_running(False)
        self.run_button.setEnabled(False)
        self.status.setText("Starting the lab…")

    # -- setup -----------------------------------------------------------------
    def set_workloads(self, workloads: list[Workload], recipes: list[ProbeRecipe]) -> None:
        """Offer these workloads and probe recipes."""
        self._workloads = {w.name: w for w in workloads}
        self._recipes = list(recipes)
        self.combo.blockSignals(True)
        self.combo.clear()
        for w in workloads:
            self.combo.addItem(w.label, w.name)
        self.combo.blockSignals(False)
        self.recipe.clear()
        for r in recipes:
            self.recipe.addItem(r.direction, r.key)
            self.recipe.setItemData(self.recipe.count() - 1, r.label, Qt.ItemDataRole.ToolTipRole)
        self._on_workload()
        self.run_button.setEnabled(bool(workloads))
        self.status.setText("Ready. Press Run (Ctrl+R).")

    def _on_workload(self) -> None:
        while self.form.rowCount():
            self.form.removeRow(0)
        self._spins.clear()
        w = self._workloads.get(self.combo.currentData())
        if w is None:
            return
        self.description.setText(w.description)
        for name, default in w.params.items():
            spin = QSpinBox()
            spin.setRange(1, 10_000_000)
            spin.setValue(int(default))
            spin.setAccelerated(True)
            self.form.addRow(name.replace("_", " "), spin)
            self._spins[name] = spin

    # -- state -----------------------------------------------------------------
    def params(self) -> dict:
        """Current parameter values."""
        return {name: spin.value() for name, spin in self._spins.items()}

    def _on_run(self) -> None:
        recipe = None
        if self.capture.isChecked() and self._recipes:
            recipe = self._recipes[max(0, self.recipe.currentIndex())]
        self.runRequested.emit(self.combo.currentData(), self.params(), recipe, self.max_captures.value())

    def set_running(self, running: bool) -> None:
        """Enable Run or Cancel."""
        self.run_button.setEnabled(not running and bool(self._workloads))
        self.cancel_button.setEnabled(running)
        self.combo.setEnabled(not running)
        for spin in self._spins.values():
            spin.setEnabled(not running)
        if running:
            self.progress.setValue(0)
            self.status.setText("Running…")

    def show_progress(self, batch: list[WorkloadProgress]) -> None:
        """Advance the bar: the encrypted side is the first half, plain the second."""
        ev = batch[-1]
        sides = 2
        index = 0 if ev.side == "encrypted" else 1
        frac = (index + ev.done / max(ev.total, 1)) / sides
        self.progress.setValue(int(frac * 100))
        self.status.setText(ev.message or f"{ev.side}: {ev.done}/{ev.total}")

    def show_result(self, result: WorkloadResult) -> None:
        """Fill the table and chart from ``result``."""
        self.progress.setValue(100 if not result.cancelled else self.progress.value())
        ratio = result.ratio()
        head = "Cancelled — partial results" if result.cancelled else "Done"
        self.status.setText(f"{head}: encrypted / plain = {ratio:.2f}" if ratio else head)
        if result.table:
            header, *rows = result.table
            self._fill(header, rows)
        else:
            phases = [t.phase for t in result.timings if t.side == "encrypted"]
            rows = []
            for ph in phases:
                enc = next((t.elapsed_s for t in result.timings if t.side == "encrypted" and t.phase == ph), None)
                pl = next((t.elapsed_s for t in result.timings if t.side == "plain" and t.phase == ph), None)
                r = f"{enc / pl:.2f}" if enc is not None and pl else ""
                rows.append((ph, f"{enc:.3f}" if enc is not None else "", f"{pl:.3f}" if pl is not None else "", r))
            self._fill(("Phase", "Encrypted (s)", "Plain (s)", "Ratio"), rows)
        self.counts.setText(
            "  ".join(f"<b>{side}</b>: " + ", ".join(f"{k} = {v}" for k, v in c.items())
                      for side, c in result.counts.items())
        )
        self._plot(result)

    def _fill(self, header, rows) -> None:
        self.results.clear()
        self.results.setColumnCount(len(header))
        self.results.setHorizontalHeaderLabels([str(h) for h in header])
        self.results.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                item = QTableWidgetItem(str(value))
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if str(row[0]) == "total" or (c == len(row) - 1 and header[-1] == "Ratio"):
                    f = item.font()
                    f.setBold(True)
                    item.setFont(f)
                self.results.setItem(r, c, item)

    def _plot(self, result: WorkloadResult) -> None:
        self.chart.clear()
        phases = [t.phase for t in result.timings if t.side == "encrypted" and t.phase != "total"]
        if not phases:
            return
        width = 0.38
        for k, side in enumerate(("encrypted", "plain")):
            values = [next((t.elapsed_s for t in result.timings if t.side == side and t.phase == ph), 0.0)
                      for ph in phases]
            xs = [i + (k - 0.5) * width for i in range(len(phases))]
            bars = pg.BarGraphItem(x=xs, height=values, width=width, brush=pg.mkBrush(*_SIDE_COLORS[side]), name=side)
            self.chart.addItem(bars)
        self.chart.getAxis("bottom").setTicks([list(enumerate(phases))])
