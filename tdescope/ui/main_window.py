"""The main window: engine panel, workload, captures and the page view, on one screen."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QByteArray, QSettings, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QLabel, QMainWindow, QMessageBox

from tdescope import __version__
from tdescope.app.probe.window import CaptureLimits, stop_budget
from tdescope.app.probe.capture_record import CaptureRecord, describe_capture
from tdescope.app.engines.api import ConnectParams, Engine, EngineSession, Inventory, ProbeRecipe
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.engines.registry import open_session
from tdescope.app.probe.entropy import chunk_entropy, diff_mask
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, PageCapture, Problem, WorkloadProgress, WorkloadResult
from tdescope.app.experiment import Experiment
from tdescope.ui.captures_dock import CapturesDock
from tdescope.ui.engine_docks import attach_engine_docks
from tdescope.ui.engine_panel import EngineDock
from tdescope.ui.event_pump import EventPump
from tdescope.ui.observation import attach_observation
from tdescope.ui.pageview import PageView
from tdescope.ui.session_controller import attach_sessions
from tdescope.ui.workload_dock import WorkloadDock

__all__ = ["MainWindow"]

#: Bumped when docks are added or renamed, so an old saved layout is not restored.
_LAYOUT_VERSION = 3


@dataclass(frozen=True, slots=True)
class _Captured:
    capture: PageCapture
    record: CaptureRecord


@dataclass(frozen=True, slots=True)
class _Connected:
    session: EngineSession | None
    inventory: Inventory | None
    error: str | None = None


class MainWindow(QMainWindow):
    """tdescope's workbench window for one engine session."""

    def __init__(self, engine: Engine, settings: QSettings | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.session: EngineSession | None = None
        self.experiment: Experiment | None = None
        self.decoder = engine.page_decoder()
        self.settings = settings or QSettings("tdescope", "tdescope")
        self.setWindowTitle(f"tdescope — {engine.label}")
        screen = self.screen().availableGeometry() if self.screen() else None
        # first start: most of the screen (a saved layout restores its own size below)
        self.resize(max(1280, int(screen.width() * 0.95)) if screen else 1500,
                    max(800, int(screen.height() * 0.95)) if screen else 900)

        self.pump = EventPump(parent=self)
        self.page_view = PageView()
        self.setCentralWidget(self.page_view)
        self.engine_dock = EngineDock(self)
        self.workload_dock = WorkloadDock(self)
        self.captures_dock = CapturesDock(self)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.engine_dock)
        self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, self.workload_dock)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.captures_dock)
        self.resizeDocks([self.engine_dock, self.workload_dock], [430, 430], Qt.Orientation.Horizontal)
        self.resizeDocks([self.engine_dock, self.workload_dock], [300, 560], Qt.Orientation.Vertical)
        self.resizeDocks([self.captures_dock], [230], Qt.Orientation.Vertical)

        self.armed_label = QLabel("")
        self.stopped_label = QLabel("")
        self.statusBar().addPermanentWidget(self.stopped_label)
        self.statusBar().addPermanentWidget(self.armed_label)
        self._set_armed(False)
        self._build_menus()
        self.engine_docks = attach_engine_docks(self)

        self.workload_dock.runRequested.connect(self.run_workload)
        self.workload_dock.cancelRequested.connect(self.cancel)
        self.captures_dock.captureSelected.connect(self.show_capture)
        self.engine_dock.change_target.clicked.connect(self.pick_target)
        self.pump.subscribe(_Captured, self._on_captures)
        self.pump.subscribe(CaptureWindowState, self._on_window_state)
        self.pump.subscribe(WorkloadProgress, self.workload_dock.show_progress)
        self.pump.subscribe(WorkloadResult, self._on_results)
        self.pump.subscribe(Problem, self._on_problems)
        self.pump.subscribe(_Connected, self._on_connected)
        self.observation = attach_observation(self)  # Hotspots, Waits, Timeline docks + Observe menu
        self.sessions = attach_sessions(self)  # recording, replay, notes, File > Open/Save As/Export
        self._default_layout()
        self._restore_layout()

    # -- menus -----------------------------------------------------------------
    def _build_menus(self) -> None:
        file_menu = self.menuBar().addMenu("&File")
        quit_action = QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit, triggered=self.close)
        file_menu.addAction(quit_action)
        run_menu = self.menuBar().addMenu("&Run")
        run_menu.addAction(QAction("&Run workload", self, shortcut="Ctrl+R", triggered=self.workload_dock.run_button.click))
        run_menu.addAction(QAction("&Cancel", self, shortcut="Esc", triggered=self.cancel))
        run_menu.addAction(QAction("C&lear captures", self, shortcut="Ctrl+L", triggered=self._clear_captures))
        view_menu = self.menuBar().addMenu("&View")
        for dock in (self.engine_dock, self.workload_dock, self.captures_dock):
            view_menu.addAction(dock.toggleViewAction())
        view_menu.addSeparator()
        view_menu.addAction(QAction("&Reset layout", self, triggered=self._reset_layout))
        help_menu = self.menuBar().addMenu("&Help")
        help_menu.addAction(QAction("&About tdescope", self, triggered=self._about))

    def _about(self) -> None:
        QMessageBox.about(
            self,
            "About tdescope",
            f"<b>tdescope {__version__}</b><br>Look inside database encryption while it happens.<br><br>"
            "Probes are read-only gdb breakpoints in bounded windows; the target never waits on this window.",
        )

    # -- session ---------------------------------------------------------------
    def connect_engine(self, params: ConnectParams) -> None:
        """Connect (start the lab) on a worker thread; the window stays responsive."""
        self.statusBar().showMessage(f"Connecting to {self.engine.label}…")

        def work() -> None:
            try:
                session = open_session(self.engine, params)
                self.pump.put(_Connected(session, session.inventory()))
            except UserError as exc:
                self.pump.put(_Connected(None, None, str(exc)))
            except Exception as exc:  # noqa: BLE001 - shown as one line
                self.pump.put(_Connected(None, None, f"{type(exc).__name__}: {exc}"))

        threading.Thread(target=work, name="connect", daemon=True).start()

    def _on_connected(self, batch: list[_Connected]) -> None:
        ev = batch[-1]
        if ev.error or ev.session is None:
            self.engine_dock.show_error(ev.error or "not connected")
            self.workload_dock.status.setText(ev.error or "not connected")
            self.statusBar().showMessage(ev.error or "", 10000)
            return
        self.session = ev.session
        pid = self.session.server_pid()
        self.engine_dock.show_inventory(self.engine.label, ev.inventory, pid)
        for dock in self.engine_docks:
            if hasattr(dock, "show_inventory"):
                dock.show_inventory(ev.inventory)
        self.workload_dock.set_workloads(self.session.workloads(), self.engine.probe_recipes())
        self.engine_dock.change_target.setVisible(has_ability(self.session, Ability.CHOOSE_TARGET))
        self.statusBar().showMessage(f"Connected: target pid {pid}", 5000)

    def pick_target(self) -> None:
        """Let the user probe another server process (sessions that offer ``targets()``)."""
        from tdescope.ui.target_dialog import TargetDialog

        if not has_ability(self.session, Ability.CHOOSE_TARGET):
            return
        if self.experiment is not None and not self.experiment.done.is_set():
            self.statusBar().showMessage("Finish or cancel the running workload first", 5000)
            return
        try:
            choices = self.session.targets()
        except UserError as exc:
            self.statusBar().showMessage(str(exc), 10000)
            return
        dialog = TargetDialog(choices, self.session.server_pid(), self)
        if not dialog.exec() or dialog.chosen() is None:
            return
        try:
            self.session.choose_target(dialog.chosen(), dialog.allow_critical.isChecked())
        except UserError as exc:
            QMessageBox.warning(self, "tdescope — probe target", str(exc))
            return
        pid = self.session.server_pid()
        self.engine_dock.target.setText(f"Probe target: pid {pid}")
        self.statusBar().showMessage(f"Probe target is now pid {pid}", 5000)
        observation = getattr(self, "observation", None)
        if observation is not None and hasattr(observation, "retarget"):
            observation.retarget(pid)

    # -- running ---------------------------------------------------------------
    def run_workload(self, name: str, params: dict, recipe: ProbeRecipe | None, max_captures: int) -> None:
        """Start ``name`` with ``params``, capturing with ``recipe`` when given."""
        if self.session is None or (self.experiment is not None and not self.experiment.done.is_set()):
            return
        workload = next((w for w in self.session.workloads() if w.name == name), None)
        if workload is None:
            return
        self.workload_dock.set_running(True)
        limits = CaptureLimits(max_captures=max_captures, max_seconds=300.0,
                               **stop_budget(has_ability(self.session, Ability.OWN_TARGET)))
        self.experiment = Experiment(self.session, workload, params, recipe, limits, self.engine.name, self._sink)
        self.experiment.start()
        self._watch_done(self.experiment)

    def _watch_done(self, exp: Experiment) -> None:
        def wait() -> None:
            exp.wait()
            self.pump.put(_Done())

        threading.Thread(target=wait, name="experiment-watch", daemon=True).start()
        self.pump.subscribe(_Done, self._on_done)

    def _on_done(self, _batch) -> None:
        self.pump.unsubscribe(_Done, self._on_done)
        self.workload_dock.set_running(False)
        self._set_armed(False)

    def feed(self, event) -> None:
        """Show ``event`` as if a producer emitted it (replay of a recorded session)."""
        self._sink(event)

    def _sink(self, event) -> None:
        # Runs on worker threads: summarise captures here, not on the GUI thread.
        if isinstance(event, PageCapture):
            record, _ = describe_capture(event, self.decoder, full=False)
            self.pump.put(_Captured(event, record))
        else:
            self.pump.put(event)

    def cancel(self) -> None:
        """Cancel the running workload and disarm."""
        if self.experiment is not None and not self.experiment.done.is_set():
            self.experiment.cancel()
            self.workload_dock.status.setText("Cancelling…")

    # -- event handlers (GUI thread, batched) ------------------------------------
    def _on_captures(self, batch: list[_Captured]) -> None:
        self.captures_dock.add([(c.capture, c.record) for c in batch])

    def _on_window_state(self, batch: list[CaptureWindowState]) -> None:
        for ev in batch:
            self._set_armed(ev.state == "armed", ev.message, paused=ev.state == "paused")
            limits = self.experiment.limits if self.experiment is not None else None
            budget = f" (budget {limits.max_busy_fraction:.0%} of wall time)" if limits else ""
            if ev.state == "armed":
                # live while armed: the window sends its stopped time every half second
                self.stopped_label.setText(
                    f"armed: {ev.captures} pages, target stopped {ev.stopped_s * 1000:.1f} ms{budget}"
                )
            elif ev.state == "paused":
                rearm = ev.message.rsplit(", ", 1)[-1]
                self.stopped_label.setText(
                    f"stop budget spent: {ev.captures} pages, target stopped {ev.stopped_s * 1000:.1f} ms{budget}; "
                    f"{rearm}"
                )
            else:
                self.stopped_label.setText(
                    f"probe window closed ({ev.message}): {ev.captures} pages, "
                    f"target stopped {ev.stopped_s * 1000:.1f} ms in total"
                )

    def _on_results(self, batch: list[WorkloadResult]) -> None:
        self.workload_dock.show_result(batch[-1])

    def _on_problems(self, batch: list[Problem]) -> None:
        text = batch[-1].message
        self.workload_dock.status.setText(text)
        self.statusBar().showMessage(text, 15000)

    def _set_armed(self, armed: bool, message: str = "", paused: bool = False) -> None:
        if paused:
            self.armed_label.setText("  PAUSED  ")
            self.armed_label.setToolTip(f"The probe spent its stop budget and is out of the target: {message}")
            self.armed_label.setStyleSheet("background: #e67e22; color: white; font-weight: bold; border-radius: 3px;")
        elif armed:
            self.armed_label.setText("  ARMED  ")
            self.armed_label.setToolTip(f"Breakpoints sit in the target: {message}")
            self.armed_label.setStyleSheet("background: #c0392b; color: white; font-weight: bold; border-radius: 3px;")
        else:
            self.armed_label.setText("  not armed  ")
            self.armed_label.setToolTip("No breakpoint in the target")
            self.armed_label.setStyleSheet("color: gray;")

    def _clear_captures(self) -> None:
        self.captures_dock.clear()
        self.page_view.clear()

    def show_capture(self, capture: PageCapture, record: CaptureRecord) -> None:
        """Show one capture in the page view."""
        decoded_after = self.decoder.decode(capture.after, capture.pgno) if capture.after else None
        decoded_before = self.decoder.decode(capture.before, capture.pgno) if capture.before else None
        title = (
            f"page {capture.pgno} · {capture.direction} · {capture.symbol} · capture #{capture.seq} · "
            f"{time.strftime('%H:%M:%S', time.localtime(capture.ts))}"
        )
        self.page_view.show_capture(
            capture.before,
            capture.after,
            decoded_after,
            decoded_before,
            title,
            chunk_entropy(capture.before, 256),
            chunk_entropy(capture.after, 256),
            np.array(diff_mask(capture.before, capture.after), dtype=bool),
        )

    # -- layout ----------------------------------------------------------------
    def _default_layout(self) -> None:
        """One tab group on the right (Hotspots, Waits, Notes, the engine's own docks), so
        the page view keeps its width; Hotspots in front."""
        right = [self.observation.hotspots_dock, self.observation.waits_dock, self.sessions.notes_dock,
                 *self.engine_docks]
        for dock in right[1:]:
            self.tabifyDockWidget(right[0], dock)
        right[0].raise_()
        # the page view gets the middle half: two hex panes with their ASCII columns
        self.resizeDocks([right[0], self.workload_dock], [max(380, self.width() * 26 // 100),
                                                          max(330, self.width() * 22 // 100)],
                         Qt.Orientation.Horizontal)

    def _restore_layout(self) -> None:
        if self.settings.value("layout/version", 0, type=int) != _LAYOUT_VERSION:
            return
        geometry = self.settings.value("layout/geometry")
        state = self.settings.value("layout/state")
        if isinstance(geometry, QByteArray):
            self.restoreGeometry(geometry)
        if isinstance(state, QByteArray):
            self.restoreState(state, _LAYOUT_VERSION)

    def _reset_layout(self) -> None:
        self.settings.remove("layout")
        for dock in (self.engine_dock, self.workload_dock, self.captures_dock, *self.observation.docks):
            dock.setFloating(False)
            dock.show()

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        self.settings.setValue("layout/version", _LAYOUT_VERSION)
        self.settings.setValue("layout/geometry", self.saveGeometry())
        self.settings.setValue("layout/state", self.saveState(_LAYOUT_VERSION))
        self.shutdown()
        super().closeEvent(event)

    def shutdown(self) -> None:
        """Disarm, detach and stop the engine session. Safe to call twice."""
        self.pump.stop()
        self.observation.shutdown()
        self.sessions.shutdown()
        if self.experiment is not None:
            self.experiment.cancel()
            self.experiment.wait(15)
        if self.session is not None:
            self.session.close()
            self.session = None


class _Done:
    """Internal: the current experiment finished."""
