"""The one task runner: plain functions on worker threads, outcomes on the GUI thread."""

from __future__ import annotations

import threading

import pytest

from tdescope.app.errors import UserError
from tdescope.ui.gui_thread.tasks import TaskRunner


@pytest.fixture
def runner(qtbot):
    r = TaskRunner()
    yield r
    r.shutdown()


def test_result_and_progress_arrive_on_the_gui_thread(qtbot, runner):
    seen: list = []

    def work(state):
        state.set_progress(0.5)
        return threading.current_thread().name

    runner.run(work, name="worker-x",
               on_progress=lambda f: seen.append(("progress", f, threading.current_thread())),
               on_done=lambda r: seen.append(("done", r, threading.current_thread())))
    qtbot.waitUntil(lambda: len(seen) == 2, timeout=5000)
    assert seen == [("progress", 0.5, threading.main_thread()), ("done", "worker-x", threading.main_thread())]
    assert runner.running == 0


@pytest.mark.parametrize("exc", [UserError("no such database"), ValueError("bad")])
def test_an_exception_is_delivered_as_a_value(qtbot, runner, exc):
    seen: list = []

    def work(_state):
        raise exc

    runner.run(work, on_done=lambda r: seen.append(("done", r)),
               on_exception=lambda e: seen.append(("exc", e, threading.current_thread())))
    qtbot.waitUntil(lambda: bool(seen), timeout=5000)
    assert seen == [("exc", exc, threading.main_thread())]


def test_a_cancelled_task_stops_and_delivers_nothing(qtbot, runner):
    go, stopped, seen = threading.Event(), threading.Event(), []

    def work(state):
        go.wait(5)
        if state.cancelled:
            stopped.set()
        return 1

    state = runner.run(work, on_done=seen.append)
    state.cancel()
    go.set()
    assert stopped.wait(5)
    qtbot.waitUntil(lambda: runner.running == 0, timeout=5000)
    assert seen == []


def test_after_shutdown_nothing_is_called_back(qtbot, runner):
    go, seen = threading.Event(), []
    state = runner.run(lambda s: go.wait(5), on_done=seen.append)
    runner.shutdown()
    assert state.cancelled
    go.set()
    qtbot.waitUntil(lambda: runner.running == 0, timeout=5000)
    assert seen == []
