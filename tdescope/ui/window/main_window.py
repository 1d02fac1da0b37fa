"""The main window: engine panel, workload, captures and the page view, on one screen.

It builds the live session hub (producers publish there; the recording and the
event pump take every event from it), the docks, the menus, the event pump and the
task runner, then the controllers (observation, recording, replay, notes, file
actions), giving each the collaborators it needs and connecting to their signals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from PySide6.QtCore import QSettings, QSize, Qt
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMainWindow

from tdescope.app.engines.api import ConnectParams, Engine, EngineSession, PageDecoder, ProbeRecipe
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.engines.registry import open_session, recorded_decoder
from tdescope.app.errors import UserError
from tdescope.app.events import (ABResult, CaptureWindowState, LostConnection, PageCapture, Problem, WorkloadProgress,
                                 WorkloadResult, is_ab)
from tdescope.app.experiment import ABRun, CaptureSpec, Experiment, WorkloadRun
from tdescope.app.probe.capture_record import CaptureRecord, describe_capture
from tdescope.app.probe.window import KEEP_PER_S, CaptureLimits, stop_budget
from tdescope.app.remote.host_engine import open_host_session
from tdescope.app.remote.host_session import HostSession
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.live import LiveSession
from tdescope.ui.docks.captures import CapturesDock
from tdescope.ui.docks.plugin_docks import EngineDocks, create_engine_docks
from tdescope.ui.docks.engine import EngineDock
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.views.pageview import PageView
from tdescope.ui.gui_thread.tasks import TaskRunner, describe
from tdescope.ui.window.capture_presenter import CapturePresenter
from tdescope.ui.window.closing import close_down, leave_behind
from tdescope.ui.window.file_actions import FileActions, RecentFiles
from tdescope.ui.window.layout import default_layout, restore_layout, save_layout
from tdescope.ui.window.lessons import LessonsController, LessonViews
from tdescope.ui.window.menus import Menu, MenuRegistry, show_about
from tdescope.ui.window.messages import Captured, Connected
from tdescope.ui.window.notes import NotesController
from tdescope.ui.window.observation import ObservationController
from tdescope.ui.window.presentation import Presentation
from tdescope.ui.window.probe_status import ProbeStatus, probe_backend_for
from tdescope.ui.window.remote_host import RemoteHost, host_params
from tdescope.ui.window.retarget import follow_target, pick_target
from tdescope.ui.window.recording import RecordingController
from tdescope.ui.window.runs import RunSlot
from tdescope.ui.window.replay import ReplayController, engine_for
from tdescope.ui.window.replay_view import ReplayView
from tdescope.ui.docks.workload import WorkloadDock

__all__ = ["MainWindow", "open_replay_window"]


class MainWindow(QMainWindow):
    """tdescope's workbench window for one engine session."""

    def __init__(self, engine: Engine, settings: QSettings | None = None, decoder: PageDecoder | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.session: EngineSession | None = None
        self.experiment: Experiment | None = None
        self.allow_critical = False  # the user chose a critical process as the target, on purpose
        self.decoder = decoder or engine.page_decoder()  # a replay's: the one its recording was shown with
        self.settings = settings or QSettings("tdescope", "tdescope")
        self.setWindowTitle(f"tdescope — {engine.label}")
        self.label = engine.label  # the Engine dock's title: "SQLCipher on db1 via ssh" for a host's process

        self.live = LiveSession()  # producers publish here; the recorder and the pump take it from here
        self.pump = EventPump(parent=self)
        self.live.subscribe(self._to_pump)
        self.tasks = TaskRunner(self)
        self.menus = MenuRegistry(self.menuBar())
        self.page_view = PageView()
        self.capture_presenter = CapturePresenter(self.tasks, self.page_view, lambda: self.decoder,
                                                  lambda line: self.statusBar().showMessage(line, 10000))
        self.setCentralWidget(self.page_view)
        self.engine_dock = EngineDock(self)
        self.workload_dock = WorkloadDock(self)
        self.captures_dock = CapturesDock(self)
        self.probe_status = ProbeStatus(self.statusBar())
        self.remote = RemoteHost(self, self.settings, self.reconnect)

        self.observation = ObservationController(engine, self.live.publish, self.pump, self.tasks, self)
        self.notes = NotesController(self.captures_dock, self.page_view, self.observation.timeline_dock,
                                     self._note_store, lambda: self.replay.play_head(), self._seek_and_show,
                                     self.capture_presenter.when_shown, self)
        recent = RecentFiles(self.settings)
        self.recording = RecordingController(engine, lambda: self.session, self.live, self.pump,
                                             self.notes.dock, recent.add, self)
        self.replay = ReplayController(self.live.publish, self.pump, self._reset_views, self.notes.dock, recent.add, self)
        self.files = FileActions(self.recording, self.replay, recent, self.decoder, self.tasks,
                                 lambda path, passphrase: open_replay_window(path, self.settings, passphrase),
                                 lambda: self.session is not None, self._reset_views, self)
        self.runs = RunSlot(self.live, self.tasks, self.pump, self._on_running)
        self.lessons = LessonsController(engine, self.live, self.pump, self.runs, LessonViews(
            session=lambda: self.session, replaying=lambda: self.replay.replaying,
            backend_choice=lambda: self.workload_dock.backend.currentData() or "auto",
            say=lambda line: self.statusBar().showMessage(line, 6000),
            workload_status=self.workload_dock.status.setText, lesson_done=self.workload_dock.show_lesson_done,
            show_range=self.observation.timeline_dock.set_range,
            select_capture=lambda seq: self.captures_dock.select_capture(None, seq),
            add_note=self.notes.dock.add_note), self)
        try:
            self.engine_docks = create_engine_docks(engine, self)
        except UserError as exc:
            self.engine_docks = EngineDocks()
            self.statusBar().showMessage(str(exc), 15000)
        self._place_docks()
        self.presentation = Presentation(self, self.captures_dock, self.workload_dock, self.page_view)
        self._fill_menus()

        for controller in (self.recording, self.replay, self.files):
            controller.status.connect(self.statusBar().showMessage)
        self.notes.dock.noteAdded.connect(lambda line: self.statusBar().showMessage(line, 6000))
        self.replay_view = ReplayView(self)
        self.workload_dock.runRequested.connect(self.run_workload)
        self.workload_dock.tasks = self.tasks
        self.workload_dock.cancelRequested.connect(self.cancel)
        self.captures_dock.captureSelected.connect(self.show_capture)
        self.engine_dock.change_target.clicked.connect(self.pick_target)
        self.engine_dock.reconnect.clicked.connect(lambda: self.reconnect())
        self.pump.subscribe(Captured, self._on_captures)
        self.pump.subscribe(CaptureWindowState, self._on_window_state)
        self.pump.subscribe(WorkloadProgress, self._on_progress)
        self.pump.subscribe(WorkloadResult, self.workload_dock.show_results)
        self.pump.subscribe(ABResult, lambda batch: [self.workload_dock.show_ab_result(r) for r in batch])
        self.pump.subscribe(Problem, self._on_problems)
        self.pump.subscribe(LostConnection, self._on_problems)
        for view in self.engine_docks.result_views:
            self.pump.subscribe(WorkloadResult, lambda batch, v=view: v.show_result(batch[-1]))
        self.setAcceptDrops(True)
        self.installEventFilter(self.files)
        self._default_layout()
        self._restore_layout()
        self.lessons.update_gate()

    # -- docks and menus -----------------------------------------------------------
    def _place_docks(self) -> None:
        obs = self.observation
        for dock in (self.engine_dock, self.workload_dock, self.captures_dock, obs.timeline_dock, *self._side_docks()):
            self.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, dock)
        self.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.replay.replay_bar)

    def _side_docks(self) -> list:
        obs = self.observation
        return [obs.hotspots_dock, obs.waits_dock, self.notes.dock, self.lessons.dock, *self.engine_docks.docks]

    def _fill_menus(self) -> None:
        file_menu = self.menus[Menu.FILE]
        self.files.fill_menu(file_menu)
        self.remote.fill_menu(file_menu)
        file_menu.addSeparator()
        file_menu.addAction(QAction("&Quit", self, shortcut=QKeySequence.StandardKey.Quit, triggered=self.close))
        self.notes.fill_menu(self.menus[Menu.EDIT])
        run_menu = self.menus[Menu.RUN]
        run_menu.addAction(QAction("&Run workload", self, shortcut="Ctrl+R", triggered=self.workload_dock.run_button.click))
        run_menu.addAction(QAction("&Watch the target", self, shortcut="Ctrl+Shift+R",
                                   triggered=self.workload_dock.watch_button.click))
        run_menu.addAction(QAction("&Cancel", self, shortcut="Esc", triggered=self.cancel))
        run_menu.addAction(QAction("C&lear captures", self, shortcut="Ctrl+L", triggered=self._clear_captures))
        view_menu = self.menus[Menu.VIEW]
        for dock in (self.notes.dock, self.engine_dock, self.workload_dock, self.captures_dock,
                     *self.observation.docks, self.lessons.dock):
            view_menu.addAction(dock.toggleViewAction())
        view_menu.addSeparator()
        view_menu.addAction(QAction("&Presentation mode", self, shortcut="F5", triggered=self.presentation.toggle))
        view_menu.addAction(QAction("&Next teaching view", self, shortcut="F6", triggered=self.presentation.next_view))
        view_menu.addAction(QAction("&Full screen", self, shortcut="F11",
                                    triggered=self.presentation.toggle_full_screen))
        view_menu.addAction(QAction("&Reset layout", self, triggered=self._reset_layout))
        for dock in self.engine_docks.docks:
            view_menu.addAction(dock.toggleViewAction())
        self.observation.fill_menu(self.menus[Menu.OBSERVE])
        self.menus[Menu.HELP].addAction(QAction("&About tdescope", self, triggered=lambda: show_about(self)))

    # -- session ---------------------------------------------------------------
    def connect_engine(self, params: ConnectParams):
        """Connect (start the lab; a process on an ssh host: ``host_params``) on the task runner; its TaskState."""
        self.statusBar().showMessage(f"Connecting to {params.options.get('ssh') or self.engine.label}…")
        self._connect_params = params  # kept for Reconnect (the password is asked again, never kept)
        engine, o = self.engine, params.options

        def connect(state) -> Connected | None:
            session = open_host_session(engine, o["ssh"], o["ssh_options"], params.pid, o["ssh_prompt"], params.dsn,
                                        params.prompt) if o.get("ssh") else open_session(engine, params)
            if state.cancelled:  # the window closed while connecting: nobody will close it later
                session.close()
                return None
            catalog = has_ability(session, Ability.CATALOG_DECODER)
            return Connected(session, session.inventory(), session.catalog_decoder() if catalog else None)
        return self.tasks.run(connect, name="connect", on_done=self._on_connected, on_exception=self._on_connect_failed)

    def _on_connect_failed(self, exc: BaseException) -> None:
        self.remote.failed()
        message = describe(exc)
        self.engine_dock.show_error(message)
        self.workload_dock.status.setText(message)
        self.statusBar().showMessage(message, 10000)

    def _on_connected(self, ev: Connected) -> None:
        self.session, self.decoder = ev.session, ev.decoder or self.decoder
        self.files.decoder = self.decoder  # the report decodes as the window does, now and from the file
        self.recording.set_inventory(ev.inventory, self.decoder)  # both kept in the recording's metadata
        pid, self.label = self.session.server_pid(), self.remote.show(self.session, self.engine.label)
        self.engine_dock.show_inventory(self.label, ev.inventory, pid)
        for view in self.engine_docks.inventory_views:
            view.show_inventory(ev.inventory)
        self.workload_dock.set_workloads(self.session.workloads(), self.engine.probe_recipes())
        self.engine_dock.change_target.setVisible(has_ability(self.session, Ability.CHOOSE_TARGET))
        self.engine_dock.offer_sampling(self.session, self.tasks, self.recording.set_inventory)
        self.statusBar().showMessage(f"Connected: target pid {pid}", 5000)
        if self.session is not None:  # closed meanwhile (Ctrl+C while connecting): nothing to observe
            self.observation.observe(self.session)
        self.lessons.update_gate()
        self.remote.rearm(self.run_workload)  # reconnected after the host went mid-capture: the same run again

    def pick_target(self) -> None:
        """Let the user probe another server process (sessions that offer ``targets()``)."""
        if self.runs.busy():
            self.statusBar().showMessage("Finish or cancel the running workload first", 5000)
            return
        pick_target(self, self.session, self.tasks, lambda session, allow: follow_target(self, session, allow))

    # -- running ---------------------------------------------------------------
    def run_workload(self, name: str | None, params: dict, recipe: ProbeRecipe | None, max_captures: int,
                     rounds: int = 0) -> None:
        """Start ``name`` with ``params``, capturing with ``recipe`` when given; ``rounds`` > 0 times an
        A/B workload over interleaved rounds after an untimed capture round. ``name`` None: watch, run
        nothing, and capture what the target does for its own clients (a server's backend)."""
        if self.session is None or self.runs.busy():
            return
        workload = next((w for w in self.session.workloads() if w.name == name), None)
        if workload is None and (name is not None or recipe is None):
            return
        host = self.session if isinstance(self.session, HostSession) else None  # the agent there probes
        backend = probe_backend_for(self.workload_dock.backend.currentData(), recipe,
                                    lambda line: self.statusBar().showMessage(line, 15000)) if recipe and not host else None
        if recipe is not None and backend is None and host is None:
            return
        self.remote.last_run = (name, params, recipe, max_captures, rounds)
        limits = CaptureLimits(max_captures=max_captures, max_seconds=300.0, first_seq=self.live.first_capture_seq(),
                               max_kept_per_s=KEEP_PER_S, stops=stop_budget(self.session.own_target))
        capture = CaptureSpec(recipe=recipe, limits=limits, backend=backend, isolated=True,
                              allow_critical=self.allow_critical, windows=host.window if host else None) \
            if recipe is not None else None
        run = (ABRun(workload=workload, params=params, rounds=rounds, local_server=host is None)
               if rounds and is_ab(workload.sides)
               else WorkloadRun(workload=workload, params=params)) if workload is not None else None
        exp = Experiment(self.session, self.engine.name, self.live.publish, capture=capture, run=run)
        self.experiment = exp
        self.runs.start(exp, workload.name if workload else None, lambda: exp.start().wait(), "experiment",
                        then=lambda _result, error: self._on_experiment_finished(exp, error))

    def _on_running(self, running: bool) -> None:
        """A run (a workload's or a lesson's) started or ended: Run or Cancel, the lessons' gate, the badge."""
        self.workload_dock.set_running(running)
        self.lessons.update_gate()
        if not running:
            self.probe_status.set_armed(False)

    def _on_experiment_finished(self, exp: Experiment, error: str) -> None:
        if exp.run is None:  # a watch: no workload result comes to end the dock's "Running…"
            self.workload_dock.show_watch_done(exp.capture_summary, error or exp.error or "")
        session = self.session
        if session is not None:  # file sizes and page counts moved with the workload
            self.tasks.run(lambda _state: session.inventory(), name="inventory",
                           on_done=lambda inv: self.engine_dock.show_inventory(self.label, inv, session.server_pid()))

    def _seek_and_show(self, ts: float, then: Callable[[], None] | None = None) -> None:
        """Move the replay to ``ts``; once its events are fed, deliver them and run ``then`` on views at ``ts``."""
        def shown() -> None:
            self.observation.timeline_dock.focus(ts)  # the run it falls in, not the view the timeline had
            (then or (lambda: None))()

        # fed, then delivered: the pump hands a long stretch over in short ticks, not in one stall
        self.replay.seek_to(ts, lambda: self.pump.when_idle(shown))

    def feed(self, event) -> None:
        """Publish ``event`` as a producer would (a replay records nothing)."""
        self.live.publish(event)

    def _to_pump(self, event) -> None:
        # subscribed to the live session, on producer threads: summarise captures here, not on the GUI thread
        if isinstance(event, PageCapture):
            record, _ = describe_capture(event, self.decoder, full=False)
            self.pump.put(Captured(event, record))
        else:
            self.pump.put(event)

    def cancel(self) -> None:
        """Cancel the running workload (or lesson) and disarm."""
        if self.runs.cancel():
            self.workload_dock.status.setText("Cancelling…")

    # -- event handlers (GUI thread, batched) ------------------------------------
    def _on_captures(self, batch: list[Captured]) -> None:
        self.captures_dock.add([(c.capture, c.record) for c in batch])

    def _on_window_state(self, batch: list[CaptureWindowState]) -> None:
        limits = self.experiment.limits if self.experiment is not None else None
        for ev in batch:
            self.probe_status.show_state(ev, limits)

    def _on_progress(self, batch: list[WorkloadProgress]) -> None:
        # a lesson's own steps are the Lessons dock's; its runs' progress is the Workload dock's
        runs = [ev for ev in batch if not ev.workload.startswith("lesson:")]
        if runs:
            self.workload_dock.show_progress(runs)

    def _on_problems(self, batch: list[Problem]) -> None:
        text = batch[-1].message
        self.workload_dock.status.setText(text)
        self.statusBar().showMessage(text, 15000)
        if self.session is not None and isinstance(batch[-1], LostConnection):
            # offers Reconnect: no restart of the window (on an ssh host: the same host and target again)
            self.remote.connection_lost(text) if self.remote.host else self.engine_dock.show_error(text, lost=True)

    def reconnect(self, params: ConnectParams | None = None):
        """Close the session (broken, never made, or left for ``params``: another host) and connect again
        (a host's process: the same host and target); the TaskState of leaving the old session."""
        exp, old, self.session = self.experiment, self.session, None
        if params is None and isinstance(old, HostSession):
            params = host_params(old.dest, old.ssh_options, old.reopen_pid, old.agent.host.allow_prompts, old.dsn,
                                 self._connect_params.prompt)
        params = params or getattr(self, "_connect_params", ConnectParams(lab=True))
        self.observation.stop()
        self.workload_dock.set_workloads([], [])
        # a running experiment disarms (up to 15 s) off the GUI thread, then the new connection starts
        return self.tasks.run(lambda _state: leave_behind(exp, old), name="leave-session",
                              on_done=lambda _none: self.connect_engine(params), on_exception=self._on_connect_failed)

    def _clear_captures(self) -> None:
        self.captures_dock.clear()
        self.page_view.clear()
        self.capture_presenter.forget()

    def show_capture(self, capture: PageCapture, _record: CaptureRecord | None = None) -> None:
        self.capture_presenter.show(capture)  # decoded off the GUI thread (ui/window/capture_presenter.py)

    # -- what the controllers are given ---------------------------------------------
    def _reset_views(self) -> None:
        self.pump.drain()  # what was fed before a seek lands now, then is cleared with the rest
        self._clear_captures()
        self.workload_dock.progress.setValue(0)
        self.workload_dock.results.clear()  # results come back as the replay passes them
        self.probe_status.set_armed(False)
        self.observation.clear()

    def _note_store(self):
        return self.replay.note_store() if self.replay.replaying else self.recording.note_store()

    # -- layout (tdescope.ui.window.layout) ------------------------------------------
    def _default_layout(self, size: QSize | None = None) -> None:
        self.layout_kind = default_layout(self, size, self.engine_dock, self.workload_dock, self.captures_dock,
                                          self.observation.timeline_dock, self._side_docks())

    def _restore_layout(self) -> None:
        restore_layout(self, self.settings)
        self.replay.replay_bar.setVisible(self.replay.player is not None)  # a live window never shows it

    def _reset_layout(self) -> None:
        self.settings.remove("layout")
        if self.presentation.active:
            self.presentation.leave()
        self._default_layout()  # sized for the screen again, whatever size the window had grown to

    def closeEvent(self, event) -> None:  # noqa: N802 - Qt API
        save_layout(self, self.settings)
        self.shutdown(wait=False)  # the window goes at once; the process waits for the disarm before it exits
        super().closeEvent(event)

    def shutdown(self, wait: bool = True) -> threading.Thread | None:
        """Disarm, detach and stop the engine session (safe twice). The waits run on the thread returned
        (:func:`~tdescope.ui.window.closing.close_down`); ``wait`` joins it, a closing window does not."""
        self.tasks.shutdown()
        self.pump.stop()
        self.observation.shutdown(wait)  # a closing window does not wait for perf's end either
        self.recording.shutdown()
        self.replay.close_file()
        closing, self.session = close_down(self.experiment, self.session), None
        if closing is not None and wait:
            closing.join()
        return closing


def open_replay_window(path: str, settings: QSettings | None = None, passphrase: str | None = None) -> MainWindow:
    """A new main window replaying ``path``; raises UserError for a bad file or a wrong passphrase."""
    with SessionReader(path, writable=False, passphrase=passphrase) as reader:
        meta = reader.meta
    window = MainWindow(engine := engine_for(meta), settings, recorded_decoder(engine, meta.decoder))
    window.replay.enter_replay(path, passphrase)
    return window
