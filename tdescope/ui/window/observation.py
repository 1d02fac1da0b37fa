"""Live observation in the window: the Hotspots, Waits and Timeline docks, the Observe menu, the samplers.

:class:`ObservationController` subscribes its docks to the event pump and, once
told which session to observe (:meth:`~ObservationController.observe`), starts an
:class:`~tdescope.app.observe.sampling.Observation` of the server pid, publishing
into the window's live session (recorded there, and brought back to the docks by
the event pump, one of its subscribers). Opening the
engine's wait source (a database connection) and switching samplers (a perf check)
run on the task runner, never on the GUI thread. Views refresh on a 10 Hz timer,
only those with new data. The window places the docks.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction, QActionGroup
from PySide6.QtWidgets import QMenu, QWidget

from tdescope.app.engines.api import Engine, EngineSession
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.hotspots.perf_record import DEFAULT_HZ
from tdescope.app.events import Event, HotspotLeaves, HotspotWindow, Marker, WaitFigures, WaitSample, WaitSpans, WorkloadProgress
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.observe.sampling import ENGINE_WAIT_HZ, Observation, engine_poll_text
from tdescope.app.remote.host_observation import HostObservation
from tdescope.app.remote.host_session import HostSession
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.docks.hotspots import HotspotsDock, glossary_of
from tdescope.ui.gui_thread.tasks import TaskRunner, describe
from tdescope.ui.docks.timeline import TimelineDock
from tdescope.ui.docks.waits import WaitsDock
from tdescope.ui.window.messages import Captured

__all__ = ["ObservationController"]

REFRESH_MS = 100
#: While the pump catches up on a backlog (a replay seeking through an hour), the docks are redrawn
#: this often at most: each redraw costs the whole history, and the next tick brings more of it.
CATCH_UP_REFRESH_S = 1.0


@dataclass
class StopOutcome:
    """How stopping one observation's samplers ended: :attr:`done` once they have (perf gone, temp files
    removed), :attr:`error` "" or one line saying why not. Filled on the stopping thread."""

    done: threading.Event = field(default_factory=threading.Event)
    error: str = ""

    def stop(self, obs: Observation | HostObservation) -> None:
        """On the stopping thread: stop ``obs``, then say so."""
        try:
            obs.stop()
        except Exception as exc:  # noqa: BLE001 - a lost host's agent: one line, never a traceback
            self.error = f"stopping the samplers: {describe(exc)}"
        self.done.set()


class ObservationController(QObject):
    """Owns the observed run, its docks and the running Observation of one window.

    Parameters
    ----------
    engine : Engine
        Its glossary explains the hotspots.
    publish : callable
        Where the samplers publish their events (the window's
        :meth:`LiveSession.publish <tdescope.app.session.live.LiveSession.publish>`).
    pump : EventPump
        Brings the samplers' events (and captures, progress, markers) to the docks.
    tasks : TaskRunner
        Runs the blocking calls (wait source, perf check).
    parent : QWidget
        Parent of the docks (the window).
    """

    def __init__(self, engine: Engine, publish: Callable[[Event], None], pump: EventPump, tasks: TaskRunner,
                 parent: QWidget) -> None:
        super().__init__(parent)
        self.engine = engine
        self._publish = publish
        self.pump = pump
        self.tasks = tasks
        self.run = ObservedRun()
        self.frequency = DEFAULT_HZ  # perf's sampling rate (Observe → Hotspot sampling rate)
        self.engine_hz = ENGINE_WAIT_HZ  # engine-wait polls a second, one statement each (Observe menu)
        self._session: EngineSession | None = None
        self.observation: Observation | HostObservation | None = None
        self._generation = 0  # bumped by stop(): a wait source that opens later starts nothing
        self.refresh_ms: list[float] = []  # GUI time of each dock's refresh, for the bench
        self._refreshed = 0.0  # time.monotonic() of the last refresh
        self.stopping: StopOutcome | None = None  # the last stop's outcome, filled by its thread
        self._turn = 0  # the dock refreshed last while the pump catches up
        self._due: list = []  # docks this refresh has still to redraw, one per turn of the event loop
        self._next_dock = QTimer(self)
        self._next_dock.setSingleShot(True)
        self._next_dock.setInterval(0)
        self._next_dock.timeout.connect(self._refresh_next)
        self.hotspots_dock = HotspotsDock(self.run, glossary_of(engine), parent)
        self.waits_dock = WaitsDock(self.run, parent=parent)
        self.timeline_dock = TimelineDock(self.run, parent)
        self.docks = (self.hotspots_dock, self.waits_dock, self.timeline_dock)
        self.hotspots_action = QAction("&Hotspots (perf)", self, checkable=True, checked=True)
        self.waits_action = QAction("&Waits (/proc)", self, checkable=True, checked=True)
        self.hotspots_action.toggled.connect(lambda on: self._toggle("hotspots", on))
        self.waits_action.toggled.connect(lambda on: self._toggle("waits", on))
        self.clear_action = QAction("&Clear observed data", self, triggered=self.clear)

        pump.subscribe(HotspotWindow, self.run.add_windows)
        pump.subscribe(HotspotLeaves, self.run.add_leaves)
        pump.subscribe(WaitSample, self.run.add_waits)
        pump.subscribe(WaitFigures, self.run.add_exact)
        pump.subscribe(WaitSpans, self.run.add_spans)
        pump.subscribe(WorkloadProgress, self.run.add_progress)
        pump.subscribe(Marker, self.run.add_markers)
        pump.subscribe(Captured, lambda b: self.run.add_captures(c.capture.ts for c in b))
        self.timeline_dock.rangeChanged.connect(self._on_range)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    def fill_menu(self, menu: QMenu) -> None:
        """Add the sampler switches, the hotspot sampling rate and Clear to ``menu`` (the Observe menu)."""
        menu.addAction(self.hotspots_action)
        menu.addAction(self.waits_action)
        rates = menu.addMenu("Hotspot sampling &rate")
        group = QActionGroup(rates)
        for hz, words in ((99, "99 Hz (lightest)"), (DEFAULT_HZ, f"{DEFAULT_HZ} Hz (default: ≥ 1000 samples in 5 s)"),
                          (499, "499 Hz (finer; ~1 % more of the target's CPU)"),
                          (999, "999 Hz (finest; more cost)")):
            action = QAction(words, rates, checkable=True, checked=hz == self.frequency)
            action.triggered.connect(lambda _checked, hz=hz: self.set_frequency(hz))
            group.addAction(action)
            rates.addAction(action)
        polls = menu.addMenu("Engine wait &polling")
        group = QActionGroup(polls)
        for hz in (1.0, 2.0, ENGINE_WAIT_HZ, 10.0):
            words = f"every {1000 / hz:.0f} ms" + (" (default)" if hz == ENGINE_WAIT_HZ else "")
            action = QAction(words, polls, checkable=True, checked=hz == self.engine_hz)
            action.triggered.connect(lambda _checked, hz=hz: self.set_engine_hz(hz))
            group.addAction(action)
            polls.addAction(action)
        menu.addSeparator()
        menu.addAction(self.clear_action)

    def set_frequency(self, hz: int) -> None:
        """Sample hotspots at ``hz`` from now on (perf restarts on the same target)."""
        self.frequency = int(hz)
        if self._session is not None:
            self.observe(self._session)

    def set_engine_hz(self, hz: float) -> None:
        """Poll the engine's waits ``hz`` times a second from now on (one statement on the server each)."""
        self.engine_hz = float(hz)
        if self._session is not None:
            self.observe(self._session)

    # -- observation -------------------------------------------------------------------
    def observe(self, session: EngineSession) -> None:
        """Observe ``session``'s server process from now on (connected, or its target changed)."""
        self.stop()
        self._session = session
        generation = self._generation
        self.hotspots_dock.set_glossary(glossary_of(self.engine))
        pid = session.server_pid()
        self.hotspots_dock.disasm.pid = pid
        self.hotspots_dock.disasm.read_code = session.read_function if isinstance(session, HostSession) else None
        self.tasks.run(lambda _state: session.wait_source(), name="wait-source",
                       on_done=lambda source: self._start(generation, pid, source),
                       # a broken engine source must not stop observation
                       on_exception=lambda _exc: self._start(generation, pid, None))

    def _start(self, generation: int, pid: int, source) -> None:
        if generation != self._generation:
            return  # stopped, or told to observe another process, while the source opened
        self.waits_dock.set_engine_poll(engine_poll_text(source, self.engine_hz), self.engine_hz)
        if isinstance(self._session, HostSession):  # perf and /proc run in the agent on the host
            self.observation = HostObservation(self._session, self._publish, frequency=self.frequency,
                                               hotspots=self.hotspots_action.isChecked(),
                                               waits=self.waits_action.isChecked(), wait_source=source,
                                               engine_hz=self.engine_hz).start()
            return
        self.observation = Observation(
            pid, self._publish, wait_source=source, frequency=self.frequency, engine_hz=self.engine_hz,
            hotspots=self.hotspots_action.isChecked(), waits=self.waits_action.isChecked(), exact_waits="auto",
            lost=self._session.connection_lost if has_ability(self._session, Ability.TELL_LOST) else None,
        ).start()

    def _toggle(self, which: str, on: bool) -> None:
        obs = self.observation
        if obs is None:
            return
        setter = obs.set_hotspots if which == "hotspots" else obs.set_waits
        # set_hotspots runs the perf check (a subprocess): never on the GUI thread.
        self.tasks.run(lambda _state: setter(on), name=f"toggle-{which}")

    def stop(self) -> threading.Thread | None:
        """Ask the samplers to stop and return at once: perf's end, the last perf script output and the
        eBPF tracer's detach can take seconds, so they run on a thread of their own and :attr:`stopped`
        tells when they ended. That thread is no daemon (as in :mod:`~tdescope.ui.window.closing`): a
        window that closed at once still ends its perf. Returns the thread (None: nothing ran). Safe to
        call twice."""
        self._generation += 1
        obs, self.observation = self.observation, None
        if obs is None:
            return None
        self.stopping = outcome = StopOutcome()
        # the thread holds the outcome, never this QObject: the window may be gone (and its C++ objects
        # deleted) before perf has ended, and a signal emitted on a deleted object crashed the process
        thread = threading.Thread(target=outcome.stop, args=(obs,), name="observation-stop", daemon=False)
        thread.start()
        return thread

    def shutdown(self, wait: bool = False) -> None:
        """Stop refreshing and sampling (window close); ``wait``: until the samplers ended (perf gone)."""
        self.timer.stop()
        self._next_dock.stop()
        self._due = []
        stopping = self.stop()
        if stopping is not None and wait:
            stopping.join()

    def clear(self) -> None:
        """Forget what was observed so far; sampling goes on."""
        self.run.clear()
        self.timeline_dock.reset()
        for dock in self.docks:
            dock.refresh(force=True)

    # -- refresh -------------------------------------------------------------------------
    def _on_range(self, rng) -> None:
        self.hotspots_dock.set_range(rng)
        self.waits_dock.set_range(rng)

    def refresh(self) -> None:
        """Update the docks that are visible and got new data, each in its own turn of the event loop (the
        three in one turn were one long stall in a capture storm). While the pump catches up, each dock once
        a second, one dock per refresh (a replay's seek)."""
        docks = self.docks
        if self.pump.catching_up:
            if time.monotonic() - self._refreshed < CATCH_UP_REFRESH_S / len(docks):
                return
            self._turn = (self._turn + 1) % len(docks)
            docks = (docks[self._turn],)
        self._refreshed = time.monotonic()
        obs = self.observation
        if obs is not None and obs.exact_problem != self.waits_dock.exact_note:
            self.waits_dock.set_exact_note(obs.exact_problem)
        self._due = list(docks)
        self._refresh_next()

    def _refresh_next(self) -> None:
        """Refresh the next due dock; the one after it comes in the next turn of the event loop."""
        if not self._due:
            return
        dock = self._due.pop(0)
        if dock.isVisible():
            t = time.perf_counter()
            dock.refresh()
            self.refresh_ms.append((time.perf_counter() - t) * 1000.0)
            if len(self.refresh_ms) > 2000:
                del self.refresh_ms[:1000]
        if self._due:
            self._next_dock.start()
