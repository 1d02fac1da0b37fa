"""Wiring of live observation into the main window: docks, Observe menu, pump, samplers.

:func:`attach_observation` is all ``MainWindow`` calls. It adds the Hotspots,
Waits and Timeline docks, an "Observe" menu (hotspots on/off, waits on/off,
clear), subscribes to the event pump, and starts an
:class:`~tdescope.app.observe.sampling.Observation` of the server pid once the engine
session is connected. Views refresh on a 10 Hz timer, only those with new data.
"""

from __future__ import annotations

import threading
import time

from PySide6.QtCore import QObject, Qt, QTimer
from PySide6.QtGui import QAction

from tdescope.app.events import HotspotWindow, Marker, WaitSample, WorkloadProgress
from tdescope.app.observe.sampling import HotspotLeaves, Observation
from tdescope.app.observe.observed import ObservedRun
from tdescope.ui.hotspots_dock import HotspotsDock, glossary_of
from tdescope.ui.timeline_dock import TimelineDock
from tdescope.ui.waits_dock import WaitsDock

__all__ = ["ObservationWiring", "attach_observation"]

REFRESH_MS = 100


class ObservationWiring(QObject):
    """Owns the observed run, its docks and the running Observation of one window."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.run = ObservedRun()
        self.observation: Observation | None = None
        self.refresh_ms: list[float] = []  # GUI time of each refresh, for the bench
        self.hotspots_dock = HotspotsDock(self.run, glossary_of(window.engine), window)
        self.waits_dock = WaitsDock(self.run, parent=window)
        self.timeline_dock = TimelineDock(self.run, window)
        self.docks = (self.hotspots_dock, self.waits_dock, self.timeline_dock)
        self._place_docks()
        self._build_menu()

        pump = window.pump
        pump.subscribe(HotspotWindow, self.run.add_windows)
        pump.subscribe(HotspotLeaves, self.run.add_leaves)
        pump.subscribe(WaitSample, self.run.add_waits)
        pump.subscribe(WorkloadProgress, self.run.add_progress)
        pump.subscribe(Marker, self.run.add_markers)
        from tdescope.ui import main_window  # noqa: PLC0415 - main_window imports this module

        pump.subscribe(main_window._Captured, lambda b: self.run.add_captures(c.capture.ts for c in b))
        pump.subscribe(main_window._Connected, self._on_connected)
        self.timeline_dock.rangeChanged.connect(self._on_range)
        self.timer = QTimer(self)
        self.timer.setInterval(REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    # -- layout and menu -----------------------------------------------------------
    def _place_docks(self) -> None:
        w = self.window
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.hotspots_dock)
        w.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.waits_dock)
        w.tabifyDockWidget(self.hotspots_dock, self.waits_dock)
        self.hotspots_dock.raise_()
        w.splitDockWidget(w.captures_dock, self.timeline_dock, Qt.Orientation.Horizontal)
        w.resizeDocks([self.hotspots_dock], [620], Qt.Orientation.Horizontal)
        w.resizeDocks([w.captures_dock, self.timeline_dock], [560, 700], Qt.Orientation.Horizontal)

    def _build_menu(self) -> None:
        w = self.window
        menu = w.menuBar().addMenu("&Observe")
        self.hotspots_action = QAction("&Hotspots (perf)", self, checkable=True, checked=True)
        self.waits_action = QAction("&Waits (/proc)", self, checkable=True, checked=True)
        self.hotspots_action.toggled.connect(lambda on: self._toggle("hotspots", on))
        self.waits_action.toggled.connect(lambda on: self._toggle("waits", on))
        menu.addAction(self.hotspots_action)
        menu.addAction(self.waits_action)
        menu.addSeparator()
        menu.addAction(QAction("&Clear observed data", self, triggered=self.clear))
        # The Observe menu sits before Help; the docks join the View menu before its separator.
        bar = w.menuBar()
        actions = bar.actions()
        help_action = next((a for a in actions if a.text() == "&Help"), None)
        if help_action is not None:
            bar.removeAction(menu.menuAction())
            bar.insertAction(help_action, menu.menuAction())
        view = next((a.menu() for a in actions if a.text() == "&View"), None)
        if view is not None:
            sep = next((a for a in view.actions() if a.isSeparator()), None)
            for dock in self.docks:
                view.insertAction(sep, dock.toggleViewAction())

    # -- observation -------------------------------------------------------------------
    def _on_connected(self, _batch) -> None:
        session = self.window.session
        if session is None:
            return
        self.stop()
        self.hotspots_dock.set_glossary(glossary_of(self.window.engine))
        try:
            source = session.wait_source()
        except Exception:  # noqa: BLE001 - a broken engine source must not stop observation
            source = None
        self.hotspots_dock.disasm.pid = session.server_pid()
        self.observation = Observation(
            session.server_pid(), self.window.live.publish, wait_source=source,
            hotspots=self.hotspots_action.isChecked(), waits=self.waits_action.isChecked(),
        ).start()

    def retarget(self, _pid: int) -> None:
        """The probe target changed: observe the new process from now on."""
        self._on_connected([])

    def _toggle(self, which: str, on: bool) -> None:
        obs = self.observation
        if obs is None:
            return
        setter = obs.set_hotspots if which == "hotspots" else obs.set_waits
        # set_hotspots runs the perf check (a subprocess): never on the GUI thread.
        threading.Thread(target=setter, args=(on,), name=f"toggle-{which}", daemon=True).start()

    def stop(self) -> None:
        """Stop the samplers (perf ends). Safe to call twice."""
        obs, self.observation = self.observation, None
        if obs is not None:
            obs.stop()

    def shutdown(self) -> None:
        """Stop refreshing and sampling (window close)."""
        self.timer.stop()
        self.stop()

    def clear(self) -> None:
        """Forget what was observed so far; sampling goes on."""
        self.run.clear()
        self.timeline_dock.reset()
        for dock in (self.hotspots_dock, self.waits_dock, self.timeline_dock):
            dock.refresh(force=True)

    # -- refresh -------------------------------------------------------------------------
    def _on_range(self, rng) -> None:
        self.hotspots_dock.set_range(rng)
        self.waits_dock.set_range(rng)

    def refresh(self) -> None:
        """Update the docks that are visible and got new data."""
        t = time.perf_counter()
        for dock in self.docks:
            if dock.isVisible():
                dock.refresh()
        self.refresh_ms.append((time.perf_counter() - t) * 1000.0)
        if len(self.refresh_ms) > 2000:
            del self.refresh_ms[:1000]


def attach_observation(window) -> ObservationWiring:
    """Add live observation (docks, menu, samplers) to ``window``, a MainWindow."""
    return ObservationWiring(window)
