"""end_child: how a lab ends its server (the MariaDB and pg-tde labs share it), with real child processes."""

from __future__ import annotations

import signal
import subprocess
import sys

from tdescope.app.system.reaper import end_child, reap_with_me

#: A child that says it is ready, then exits 7 on SIGTERM, or ignores it when told to.
_CHILD = ("import signal, sys, time\n"
          "signal.signal(signal.SIGTERM, signal.SIG_IGN if sys.argv[1] == 'stubborn' else lambda *a: sys.exit(7))\n"
          "print('ready', flush=True)\n"
          "time.sleep(60)\n")


def _child(kind: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, kind], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline() == "ready\n"
    return proc


def test_the_signal_the_server_wants_then_its_folder_and_its_guard(tmp_path):
    folder = tmp_path / "lab"
    (folder / "data").mkdir(parents=True)
    proc = _child("polite")
    guard = reap_with_me(proc.pid, signal.SIGKILL, 0.0, str(folder))
    end_child(proc, signal.SIGTERM, 10.0, folder, guard)
    assert proc.returncode == 7  # ended by its own handler, not killed
    assert not folder.exists() and guard._proc is None  # released: its watcher has exited


def test_a_child_that_ignores_the_signal_is_killed_after_the_timeout(tmp_path):
    proc = _child("stubborn")
    end_child(proc, signal.SIGTERM, 0.3)
    assert proc.returncode == -signal.SIGKILL


def test_nothing_to_end_is_no_error(tmp_path):
    end_child(None, signal.SIGTERM, 1.0, tmp_path / "never-made")
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    end_child(done, signal.SIGTERM, 1.0)
    assert done.returncode == 0
