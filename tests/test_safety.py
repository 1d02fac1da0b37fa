"""Target safety, proven by fault injection: kill the workbench, kill gdb, look for int3 left behind.

These promises are the ones in DESIGN.md's "gdb/MI and the safety of the target":
a workbench crash must never crash or hang the database process.
"""

import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import proc_state, tracer_pid, wait_for
from tdescope.app.probe import gdb_backend
from tdescope.app.probe.window import CaptureLimits, CaptureWindow
from tdescope.app.gdb.guard import text_mismatches
from tdescope.app.probe.limits import StopLimits
from tdescope.plugins.sqlcipher.engine import DECRYPT

pytestmark = pytest.mark.gdb
#: Kills per run of the suite (random moments, a new draw each time it grows); the 100-kill figure with its
#: interval is bench/bench_gdb_kill.py's. TDESCOPE_SAFETY_TRIALS=100 runs more here.
TRIALS = int(os.environ.get("TDESCOPE_SAFETY_TRIALS", "20"))


def _released(pid: int, within: float) -> float | None:
    """Seconds until ``pid`` is untraced and not stopped, or None if not within ``within``."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < within:
        if tracer_pid(pid) == 0 and proc_state(pid) not in "tT":
            return time.monotonic() - t0
        time.sleep(0.005)
    return None


def test_killing_the_cli_at_random_moments_releases_the_target(sqlcipher_app):
    """kill -9 of `tdescope capture` while attaching, armed and running, or stopped in a capture."""
    app = sqlcipher_app()
    app.go()  # the app decrypts pages continuously: hits happen all the time while armed
    rng = random.Random(1234)
    release_times = []
    for _ in range(TRIALS):
        cli = subprocess.Popen([sys.executable, "-m", "tdescope", "capture", "--backend", "gdb", "--pid", str(app.pid),
                                "--count", "100000", "--timeout", "120", "--json"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # from "not attached yet" through "attached" to "armed, hits under way"
        t0 = time.monotonic()
        if rng.random() < 0.7:
            while tracer_pid(app.pid) == 0 and time.monotonic() - t0 < 15:
                time.sleep(0.002)
        time.sleep(rng.uniform(0, 0.4))
        cli.kill()
        cli.wait()
        # released is the promise; how fast is the figure printed below (p50 ~7 ms quiet). The bound is 3 s:
        # gdb must run to detach, and on two cores under a load of 7 it once took just over 1 s
        took = _released(app.pid, within=3.0)
        assert took is not None, f"target still traced/stopped 3 s after the kill ({proc_state(app.pid)})"
        release_times.append(took)
        assert app.proc.poll() is None, f"target died: {app.proc.returncode}"
    app.stop()
    code, out, err = app.finish()
    assert code == 0 and out.startswith("ok "), err  # it verified every row it read
    print(f"\n{TRIALS} kills: release p50 {sorted(release_times)[len(release_times) // 2] * 1000:.0f} ms, "
          f"max {max(release_times) * 1000:.0f} ms")


def test_killing_the_gui_stops_the_lab_cleanly(tmp_path):
    """kill -9 of the GUI mid-capture: gdb detaches, the lab worker sees EOF and exits 0."""
    code = (
        "import os, sys, time\n"
        "os.environ['QT_QPA_PLATFORM'] = 'offscreen'\n"
        "from PySide6.QtWidgets import QApplication\n"
        "from PySide6.QtCore import QSettings\n"
        "from tdescope.app.engines import ConnectParams, discover_engines\n"
        "from tdescope.ui.window.main_window import MainWindow\n"
        "app = QApplication([])\n"
        f"w = MainWindow(discover_engines()[0]['sqlcipher'], QSettings({str(tmp_path / 's.ini')!r}, QSettings.Format.IniFormat))\n"
        "w.show(); w.connect_engine(ConnectParams(lab=True))\n"
        "while w.session is None: app.processEvents(); time.sleep(0.01)\n"
        "w.workload_dock.max_captures.setValue(100000)\n"
        "w.workload_dock.backend.setCurrentIndex(w.workload_dock.backend.findData('gdb'))\n"
        "w.workload_dock._spins['groups'].setValue(100000)\n"
        "w.workload_dock.run_button.click()\n"
        "print(w.session.server_pid(), flush=True)\n"
        "app.exec()\n"
    )
    for _ in range(3):
        gui = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        worker = int(gui.stdout.readline())
        # the GUI starts the lab, then gdb, then the run: on a loaded machine that is slow, not wrong
        wait_for(lambda: tracer_pid(worker) != 0, timeout=90, what="the lab worker traced (the probe arming)")
        time.sleep(0.3)  # a moment for captures to be under way when the workbench dies (nothing counts on it)
        gui.kill()
        gui.wait()
        # the worker is not our child: its exit status is gone with it; it must not linger, hang or stay stopped
        wait_for(lambda: _ended_never_stopped(worker), timeout=30, interval=0.01, what="the lab worker's exit")


def _ended_never_stopped(pid: int) -> bool:
    """``pid`` has exited (gone or a zombie); while it runs, it is not left stopped."""
    try:
        state = proc_state(pid)
    except FileNotFoundError:
        return True
    assert state not in "T", f"{pid} left stopped"
    return state == "Z"


def _arm_on_idle(app, guard: bool):
    window = CaptureWindow(app.pid, DECRYPT, CaptureLimits(max_captures=1000, max_seconds=120), "sqlcipher",
                           lambda c: None)
    saved = gdb_backend._start_guard
    if not guard:
        gdb_backend._start_guard = lambda *a: None
    try:
        t = threading.Thread(target=window.run)
        t.start()
        assert window.armed.wait(20)
    finally:
        gdb_backend._start_guard = saved
    return window, t


@pytest.mark.parametrize("guard", [True, False], ids=["with-guard", "without-guard"])
def test_gdb_killed_while_armed(sqlcipher_app, guard):
    """gdb dies while int3 sits in an idle target. With the guard the target's code is restored
    before its next hit; without it, the next hit kills the target with SIGTRAP (the control)."""
    trials = 5 if guard else 1
    for _ in range(trials):
        app = sqlcipher_app()
        window, t = _arm_on_idle(app, guard)
        assert any(m.memory == 0xCC for m in text_mismatches(app.pid)), "no breakpoint in the target?"
        os.kill(window.handle.gdb.gdb_pid, signal.SIGKILL)
        t.join(20)
        if guard:  # the guard (its own process) restores the code once gdb is gone: wait for it
            wait_for(lambda: not any(m.memory == 0xCC for m in text_mismatches(app.pid)), timeout=20,
                     what="the guard's restore of the code")
        else:
            time.sleep(0.1)  # the control: nothing restores it, however long one waits
        left = [m for m in text_mismatches(app.pid) if m.memory == 0xCC]
        app.go()  # now it decrypts (a whole round at least, stop or not): every breakpoint address is hit
        if guard:
            assert left == []
            app.stop()
            code, out, _ = app.finish()
            assert code == 0 and out.startswith("ok ")
        else:
            assert left
            code, _, _ = app.finish()
            assert code == -signal.SIGTRAP


def test_no_int3_left_after_a_normal_window(sqlcipher_app):
    app = sqlcipher_app()
    window = CaptureWindow(app.pid, DECRYPT, CaptureLimits(max_captures=50, max_seconds=60), "sqlcipher",
                           lambda c: None)
    t = threading.Thread(target=window.run)
    t.start()
    assert window.armed.wait(20)
    app.go()
    t.join(60)
    assert text_mismatches(app.pid) == []  # the code in memory equals the files on disk
    assert tracer_pid(app.pid) == 0


def test_watchdog_detaches_a_target_held_stopped(sqlcipher_app, monkeypatch):
    """A probe that keeps the target stopped too long is cut off by the watchdog."""
    # gdb's interrupt is a SIGINT stop, which the window would pass on as a query cancel;
    # here it stands for any stop the window does not act on
    monkeypatch.setattr(gdb_backend, "_is_exit_or_sigint", gdb_backend._is_exit)
    app = sqlcipher_app()
    window = CaptureWindow(app.pid, DECRYPT, CaptureLimits(max_captures=1000, max_seconds=60,
                                                           stops=StopLimits(watchdog_s=0.25)),
                           "sqlcipher", lambda c: None)
    t = threading.Thread(target=lambda: setattr(window, "summary", window.run()))
    t.start()
    assert window.armed.wait(20)
    # hold the target in a ptrace stop, as a wedged gdb would
    window.handle.gdb.command("-exec-interrupt")
    t.join(10)
    assert window.summary.reason.startswith("watchdog")
    assert _released(app.pid, within=1.0) is not None
    app.go()
    app.stop()
    assert app.finish()[0] == 0


def test_a_query_cancel_sigint_reaches_an_armed_target(sqlcipher_app):
    """gdb keeps SIGINT for itself; the window passes one sent by someone else on at once."""
    app = sqlcipher_app()
    app.go()
    states, got = [], []
    window = CaptureWindow(app.pid, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=60), "sqlcipher",
                           got.append, states.append)
    t = threading.Thread(target=lambda: setattr(window, "summary", window.run()))
    t.start()
    assert window.armed.wait(20)
    wait_for(lambda: len(got) >= 5, timeout=30, what="captures: the SIGINT is to land on a target being probed")
    os.kill(app.pid, signal.SIGINT)  # what pg_cancel_backend() does to a PostgreSQL backend
    try:
        wait_for(lambda: any("passed a SIGINT" in s.message for s in states), timeout=20, what="the SIGINT passed on")
    finally:
        window.cancel()
    t.join(10)
    assert any("passed a SIGINT" in s.message for s in states), [s.message for s in states]
    assert window.summary.reason == "cancelled"
    app.stop()
    code, out, err = app.finish()
    assert code == 0 and out.strip().endswith("cancels 1"), (out, err)


def test_stop_budget_is_a_duty_cycle_that_pauses_the_window(sqlcipher_app):
    """A target decrypting flat out: the window pauses (its int3 leaves the code),
    re-arms once the budget is paid back, and the stopped time stays within
    burst + 1 % of the wall time."""
    app = sqlcipher_app()
    app.go()
    states, clean_while_paused = [], []

    def on_state(state):
        states.append(state)
        if state.state == "paused" and len(clean_while_paused) < 3:
            # gdb takes the breakpoint out right after the stop that overflowed: wait for it (a raise
            # here would land in the window), and keep what the code held last for the asserts below
            found = []

            def only_the_loader_left() -> bool:
                found[:] = text_mismatches(app.pid)
                return all("/ld-linux" in m.path for m in found)

            try:
                wait_for(only_the_loader_left, timeout=10, what="the probe's int3 out of the code")
            except AssertionError:
                pass
            clean_while_paused.append(list(found))

    limits = CaptureLimits(max_captures=100000, max_seconds=6,
                           stops=StopLimits(max_busy_fraction=0.01, max_burst_s=0.02))
    summary = CaptureWindow(app.pid, DECRYPT, limits, "sqlcipher", lambda c: None, on_state).run()
    kinds = [s.state for s in states]
    assert "paused" in kinds, kinds
    first_pause = kinds.index("paused")
    assert "armed" in kinds[first_pause:], "the window never re-armed after its pause"
    # the probe's int3 is out; only gdb's own shared-library event breakpoint stays in the
    # dynamic loader while gdb is attached (the guard learns it when it starts)
    assert clean_while_paused, kinds
    assert all("/ld-linux" in m.path for found in clean_while_paused for m in found), clean_while_paused
    assert summary.reason == "limit: max seconds"
    # each pause lasts until the bucket has drained at 1 %: the captured stops stay near the bound
    assert summary.stopped_s <= (limits.stops.max_burst_s + 0.01 * summary.elapsed_s) * 1.5, summary
    app.stop()
    assert app.finish()[0] == 0
