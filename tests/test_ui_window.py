"""The window's structure: menus by key in a fixed order, and no database call on the GUI thread."""

from __future__ import annotations

import threading

import pytest

from tdescope.app.engines import discover_engines
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.gui_thread.tasks import TaskRunner
from tdescope.ui.window.main_window import MainWindow
from tdescope.ui.window.menus import Menu
from tdescope.ui.window.observation import ObservationController


def test_menus_are_created_once_in_enum_order(qtbot, qsettings):
    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    bar = [a.text() for a in win.menuBar().actions()]
    assert bar == ["&File", "&Edit", "&Run", "&View", "&Observe", "&Help"] == [m.value for m in Menu]
    for key in Menu:
        assert win.menus[key].title() == key.value and win.menus[key].actions(), key
    files = [a.text() for a in win.menus[Menu.FILE].actions()]
    assert files[0] == "&New (clear)" and files[-1] == "&Quit"
    view = [a.text() for a in win.menus[Menu.VIEW].actions()]
    assert view[:7] == ["Notes", "Engine", "Workload", "Captures", "Hotspots", "Waits", "Timeline"]
    assert view[-1] == "&Reset layout"
    win.shutdown()


class _Engine:
    name, label = "fake", "Fake engine"

    def glossary(self):
        return {}


class _Source:
    """A wait source that is never sampled (the samplers are off): what it says of itself only."""

    def sample(self) -> list:
        return []

    def describe(self) -> str:
        return "nothing"


class _Session:
    """Records the thread that opens its wait source (a database connection in real engines)."""

    def __init__(self) -> None:
        self.opened_on: list[threading.Thread] = []
        self.source = _Source()

    def server_pid(self) -> int:
        return 1  # nothing is sampled: both samplers are switched off below

    def wait_source(self):
        self.opened_on.append(threading.current_thread())
        return self.source


@pytest.mark.parametrize("broken", [False, True])
def test_wait_source_is_opened_off_the_gui_thread(qtbot, broken):
    pump, tasks = EventPump(), TaskRunner()
    from PySide6.QtWidgets import QMainWindow

    parent = QMainWindow()
    qtbot.addWidget(parent)
    obs = ObservationController(_Engine(), pump.put, pump, tasks, parent)
    obs.hotspots_action.setChecked(False)
    obs.waits_action.setChecked(False)
    session = _Session()
    if broken:
        def fail():
            session.opened_on.append(threading.current_thread())
            raise OSError("database is down")
        session.wait_source = fail
    obs.observe(session)
    qtbot.waitUntil(lambda: obs.observation is not None, timeout=5000)
    assert session.opened_on and session.opened_on[0] is not threading.main_thread()
    # observation goes on either way; a broken source is left out
    assert obs.observation.wait_source is (None if broken else session.source)
    obs.shutdown()
    tasks.shutdown()
    pump.stop()


def test_a_source_that_opens_after_stop_starts_nothing(qtbot):
    from PySide6.QtWidgets import QMainWindow

    pump, tasks, parent = EventPump(), TaskRunner(), QMainWindow()
    qtbot.addWidget(parent)
    obs = ObservationController(_Engine(), pump.put, pump, tasks, parent)
    gate = threading.Event()
    session = _Session()
    session.wait_source = lambda: gate.wait(5) and session.source
    obs.observe(session)
    obs.stop()
    gate.set()
    qtbot.waitUntil(lambda: tasks.running == 0, timeout=5000)
    assert obs.observation is None
    obs.shutdown()
    tasks.shutdown()
    pump.stop()
