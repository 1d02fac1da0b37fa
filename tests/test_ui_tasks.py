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


def test_a_task_after_another_runs_on_an_idle_worker_and_tasks_that_wait_on_each_other_all_run(qtbot, runner):
    from tdescope.ui.gui_thread import tasks

    done: list = []
    runner.run(lambda s: threading.get_ident(), name="first", on_done=done.append)
    qtbot.waitUntil(lambda: len(done) == 1 and tasks._WORKERS._idle > 0, timeout=5000)
    before = {t.ident for t in threading.enumerate()}
    runner.run(lambda s: (threading.get_ident(), threading.current_thread().name), name="second", on_done=done.append)
    qtbot.waitUntil(lambda: len(done) == 2, timeout=5000)
    assert done[1][0] in before and done[1][1] == "second"  # no thread started (Thread.start waits), named for its task
    # more tasks than idle workers, each waiting for all of them: every one gets a thread of its own
    n = 12
    barrier = threading.Barrier(n, timeout=10)
    names: list = []
    for k in range(n):
        runner.run(lambda s, k=k: (barrier.wait(), threading.current_thread().name)[1], name=f"t{k}",
                   on_done=names.append)
    qtbot.waitUntil(lambda: len(names) == n, timeout=15000)
    assert sorted(names) == sorted(f"t{k}" for k in range(n))
