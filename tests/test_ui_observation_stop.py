"""Stopping the window's samplers never holds the GUI thread: ObservationController.stop asks and returns,
the samplers end on a thread of their own and its `StopOutcome` says so (issue #25 leftovers)."""

from __future__ import annotations

import subprocess
import threading
import time

from PySide6.QtWidgets import QWidget

from tdescope.app.engines import discover_engines
from tdescope.app.observe.sampling import Observation
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.gui_thread.tasks import TaskRunner
from tdescope.ui.window.observation import ObservationController


class _SlowToStop(Observation):
    """The real /proc sampler, whose stop takes as long as perf's end can (seconds under load)."""

    stopped_on: threading.Thread | None = None

    def stop(self) -> None:
        self.stopped_on = threading.current_thread()
        time.sleep(1.5)
        super().stop()


def test_stop_returns_at_once_and_the_samplers_end_off_the_gui_thread(qtbot):
    target = subprocess.Popen(["sleep", "60"])
    parent = QWidget()
    qtbot.addWidget(parent)
    ctl = ObservationController(discover_engines()[0]["sqlcipher"], lambda ev: None, EventPump(parent=parent),
                                TaskRunner(parent), parent)
    try:
        obs = _SlowToStop(target.pid, lambda ev: None, hotspots=False, waits=True).start_blocking()
        assert obs.waits_on
        ctl.observation = obs
        t = time.monotonic()
        thread = ctl.stop()
        assert time.monotonic() - t < 0.5  # asked, not waited for
        assert ctl.observation is None and thread is not None and not thread.daemon
        assert ctl.stopping.done.wait(10) and ctl.stopping.error == ""
        assert obs.stopped_on is thread and obs.stopped_on is not threading.main_thread()
        assert not obs.waits_on  # it did stop
        assert ctl.stop() is None  # twice: nothing more to stop
        ctl.observation = again = _SlowToStop(target.pid, lambda ev: None, hotspots=False, waits=True).start_blocking()
        ctl.shutdown(wait=True)  # a window shut down by code (not closed by its user) waits for the end
        assert not again.waits_on and again.stopped_on is not threading.main_thread()
    finally:
        ctl.timer.stop()
        target.kill()
        target.wait()


def test_a_controller_deleted_while_its_samplers_stop_crashes_nothing(qtbot):
    """A closing window goes at once; its controller's C++ object may be deleted before perf has ended. The
    stopping thread once emitted a signal on it then: a segmentation fault of the whole workbench."""
    target = subprocess.Popen(["sleep", "60"])
    parent = QWidget()
    ctl = ObservationController(discover_engines()[0]["sqlcipher"], lambda ev: None, EventPump(parent=parent),
                                TaskRunner(parent), parent)
    try:
        ctl.observation = obs = _SlowToStop(target.pid, lambda ev: None, hotspots=False, waits=True).start_blocking()
        ctl.timer.stop()
        thread = ctl.stop()
        outcome = ctl.stopping
        parent.deleteLater()
        del ctl, parent
        qtbot.wait(100)  # the deferred delete runs: the controller's C++ object is gone
        thread.join(10)
        assert outcome.done.is_set() and outcome.error == "" and not obs.waits_on
    finally:
        target.kill()
        target.wait()
