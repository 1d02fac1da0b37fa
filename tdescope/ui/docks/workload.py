"""The Workload dock: pick an experiment, set its parameters, run it, read the ratio."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QDockWidget,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QMessageBox,
    QProgressBar,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.ab.result_table import interval_text, ratio_cell
from tdescope.app.engines.api import ProbeRecipe, Workload
from tdescope.app.events import ABResult, LessonVerdict, Side, WorkloadProgress, WorkloadResult, is_ab
from tdescope.app.probe.window import CaptureSummary
from tdescope.ui.views.ab_results import ABResultsView

__all__ = ["WorkloadDock"]


class WorkloadDock(QDockWidget):
    """Parameters, Run/Cancel, progress, and results with the encrypted/plain ratio."""

    runRequested = Signal(object, dict, object, int, int)
    """(workload name, or None to watch, params, ProbeRecipe or None, max captures, timed rounds: 0 for one
    run) on Run and Watch."""
    cancelRequested = Signal()
    """When the user presses Cancel."""

    def __init__(self, parent=None) -> None:
        super().__init__("Workload", parent)
        self.setObjectName("WorkloadDock")
        self._workloads: dict[str, Workload] = {}
        self._recipes: list[ProbeRecipe] = []
        self._spins: dict[str, QWidget] = {}  # one editor per parameter, by name

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
        self.recipe.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.recipe.setMinimumContentsLength(12)  # long names elide; the dock keeps its width
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
        self.rounds = QSpinBox()
        self.rounds.setRange(0, 50)
        self.rounds.setValue(5)
        self.rounds.setPrefix("rounds ")
        self.rounds.setSpecialValueText("single run")
        self.rounds.setToolTip("Timed rounds, encrypted and plain interleaved (ABBA…) after a warm-up: the ratio is "
                               "their median with a 95 % interval. Captures happen in a separate, untimed round.")
        self.run_button = QPushButton("Run")
        self.run_button.setToolTip("Run the workload on the encrypted database, then on its plain twin (Ctrl+R)")
        self.run_button.clicked.connect(self._on_run)
        self.watch_button = QPushButton("Watch")
        self.watch_button.setToolTip("Arm the probe on the target and run nothing: capture what the server does for "
                                     "its own clients (Ctrl+Shift+R)")
        self.watch_button.clicked.connect(self._on_watch)
        self.drop_button = QPushButton("Drop what it created")
        self.drop_button.setToolTip("Drop the tables or scratch database this workload created on the server")
        self.drop_button.clicked.connect(self._on_drop)
        self.drop_button.hide()
        self.tasks = None  # the window's TaskRunner: database work never runs on the GUI thread
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setToolTip("Stop at the next statement; both databases stay consistent (Esc)")
        self.cancel_button.setEnabled(False)
        self.cancel_button.clicked.connect(self.cancelRequested)
        buttons = QHBoxLayout()
        buttons.addWidget(self.rounds)
        buttons.addWidget(self.run_button)
        buttons.addWidget(self.watch_button)
        buttons.addWidget(self.drop_button)
        buttons.addWidget(self.cancel_button)
        self.progress = QProgressBar()
        self.progress.setFormat("%p%")
        self.status = QLabel("Ready.")
        self.status.setWordWrap(True)  # a long result line wraps; it never widens the dock
        self.results = ABResultsView()
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.addWidget(self.combo)
        lay.addWidget(self.description)
        lay.addLayout(self.form)
        lay.addLayout(cap_row)
        lay.addLayout(buttons)
        lay.addWidget(self.progress)
        lay.addWidget(self.status)
        lay.addWidget(self.results, 1)
        self.setWidget(body)
        self.set_running(False)
        self.run_button.setEnabled(False)
        self.status.setText("Connecting…")  # a lab starting, or a server being reached

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
        for r in recipes:  # what each catches, in words ("decrypt, decrypt, read" said nothing)
            self.recipe.addItem(r.label.split(" (")[0], r.key)
            self.recipe.setItemData(self.recipe.count() - 1, r.label, Qt.ItemDataRole.ToolTipRole)
        self._on_workload()
        self.run_button.setEnabled(bool(workloads))
        self.watch_button.setEnabled(bool(recipes))
        self.status.setText("Ready. Press Run (Ctrl+R).")

    def _on_workload(self) -> None:
        while self.form.rowCount():
            self.form.removeRow(0)
        self._spins.clear()
        w = self._workloads.get(self.combo.currentData())
        if w is None:
            return
        creates = f"<br><i>Creates on the server: {', '.join(w.creates)}</i>" if w.creates else ""
        self.description.setText(w.description + creates)
        self.drop_button.setVisible(w.cleanup is not None)
        self.rounds.setEnabled(self._is_ab(w))
        for name, default in w.params.items():
            editor = _editor(default)
            self.form.addRow(name.replace("_", " "), editor)
            self._spins[name] = editor

    # -- state -----------------------------------------------------------------
    def params(self) -> dict:
        """Current parameter values, each of its default's type (int, float, bool or text)."""
        return {name: _value(editor) for name, editor in self._spins.items()}

    def _on_run(self) -> None:
        recipe = None
        if self.capture.isChecked() and self._recipes:
            recipe = self._recipes[max(0, self.recipe.currentIndex())]
        w = self._workloads.get(self.combo.currentData())
        rounds = self.rounds.value() if w is not None and self._is_ab(w) else 0
        self.runRequested.emit(self.combo.currentData(), self.params(), recipe, self.max_captures.value(), rounds)

    def _on_drop(self) -> None:
        w = self._workloads.get(self.combo.currentData())
        if w is None or w.cleanup is None or self.tasks is None:
            return
        what = ", ".join(w.creates)
        if QMessageBox.question(self, "tdescope — drop", f"Drop {what}?") != QMessageBox.StandardButton.Yes:
            return
        self.status.setText(f"Dropping {what}…")
        self.tasks.run(lambda _state: w.cleanup(), name="cleanup",
                       on_done=lambda _none: self.status.setText(f"Dropped {what}."),
                       on_exception=lambda exc: self.status.setText(f"Could not drop {what}: {exc}"))

    def _on_watch(self) -> None:
        if self._recipes:
            recipe = self._recipes[max(0, self.recipe.currentIndex())]
            self.runRequested.emit(None, {}, recipe, self.max_captures.value(), 0)

    @staticmethod
    def _is_ab(workload: Workload) -> bool:
        return is_ab(workload.sides)

    def set_running(self, running: bool) -> None:
        """Enable Run or Cancel."""
        self.run_button.setEnabled(not running and bool(self._workloads))
        self.watch_button.setEnabled(not running and bool(self._recipes))
        self.drop_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        self.combo.setEnabled(not running)
        self.rounds.setEnabled(not running and self._is_ab(self._workloads[self.combo.currentData()])
                               if self._workloads and self.combo.currentData() in self._workloads else False)
        for spin in self._spins.values():
            spin.setEnabled(not running)
        if running:
            self.progress.setValue(0)
            self.progress.setFormat("%p%")
            self.status.setText("Running…")

    def show_lesson_done(self, title: str, verdict: LessonVerdict) -> None:
        """A lesson finished: its steps' progress lines were shown here; say it ended, and how."""
        self.progress.setValue(100)
        cancelled = verdict is LessonVerdict.CANCELLED
        self.progress.setFormat("cancelled" if cancelled else "%p%")
        self.status.setText(f"Lesson “{title}” {'was cancelled' if cancelled else f'done: {verdict}'}"
                            " — its card is in the Lessons dock.")

    def show_watch_done(self, summary: CaptureSummary | None, error: str = "") -> None:
        """A watch ended (no workload ran, so no result says so): the pages it captured and why it stopped;
        ``summary`` None when the window never opened."""
        self.progress.setValue(100)
        self.progress.setFormat("ended")
        error = error or (summary.error if summary else "") or ""
        if error or summary is None:
            self.status.setText(f"Watch ended: {error or 'the probe was never armed'}")
            return
        why = f" ({summary.reason})" if summary.reason else ""
        pages = f"{summary.captures} page{'s' if summary.captures != 1 else ''}"
        self.status.setText(f"Watch ended: {pages} captured{why}. Press Watch to arm again.")

    def show_progress(self, batch: list[WorkloadProgress]) -> None:
        """Advance the bar: over all rounds for an A/B run; else encrypted is the first half, plain the second."""
        ev = batch[-1]
        if ev.run_fraction is not None:
            frac = ev.run_fraction
        else:
            index = 0 if ev.side == Side.ENCRYPTED else 1
            frac = (index + ev.done / max(ev.total, 1)) / 2
        self._set_progress(int(frac * 100))
        self.status.setText(ev.message or f"{ev.side}: {ev.done}/{ev.total}")

    def _set_progress(self, value: int) -> None:
        # QProgressBar.setValue repaints at once; with updates off it is drawn with the next frame instead
        # (a replay's seek advances it in every one of its ticks)
        self.progress.setUpdatesEnabled(False)
        self.progress.setValue(value)
        self.progress.setUpdatesEnabled(True)

    def show_results(self, batch: list[WorkloadResult]) -> None:
        """Single runs (or an A/B run's capture round): kept in the history, the last shown."""
        for result in batch:
            ratio = result.ratio()
            if result.capture_round:
                self.status.setText("Capture round done; timed rounds follow with the probe disarmed…")
            else:
                self._set_progress(100)  # finished, cancelled or not: the status line says which
                self.progress.setFormat("cancelled" if result.cancelled else "%p%")
                head = "Cancelled — partial results" if result.cancelled else "Done"
                self.status.setText(f"{head}: encrypted / plain = {ratio_cell(ratio).text} (one run)"
                                    if ratio else head)
        self.results.add(*batch)

    def show_ab_result(self, result: ABResult) -> None:
        """An A/B run: the median ratio with its interval in the status line, the run in the history."""
        self.progress.setValue(100)  # finished, cancelled or not: the status line says which
        self.progress.setFormat("cancelled" if result.cancelled else "%p%")
        total = result.total()
        head = "Cancelled — rounds that completed" if result.cancelled else "Done"
        if total is None:
            self.status.setText(f"{head}: no round completed")
        else:
            warn = result.warnings()
            self.status.setText(f"{head}: encrypted / plain = {total.ratio_median:.2f}× (95 %: "
                                f"{interval_text(total.ratio_ci_low, total.ratio_ci_high)}, "
                                f"{result.completed_rounds()} rounds)" + (f" ⚠ {warn[0]}" if warn else ""))
        self.results.add(result)


def _editor(default) -> QWidget:
    """An editor fit for ``default``'s type: a check box, a spin box or a line of text."""
    if isinstance(default, bool):
        box = QCheckBox()
        box.setChecked(default)
        return box
    if isinstance(default, int):
        spin = QSpinBox()
        spin.setRange(0 if default == 0 else 1, 10_000_000)
        spin.setValue(default)
        spin.setAccelerated(True)
        return spin
    if isinstance(default, float):
        dspin = QDoubleSpinBox()
        dspin.setRange(0.0, 1e9)
        dspin.setDecimals(3)
        dspin.setValue(default)
        return dspin
    return QLineEdit(str(default))  # a database name, a directory, SQL


def _value(editor: QWidget):
    if isinstance(editor, QCheckBox):
        return editor.isChecked()
    if isinstance(editor, (QSpinBox, QDoubleSpinBox)):
        return editor.value()
    return editor.text()
