"""The capture window in a worker process: a slow stream arrives whole, a storm as a sample, and the
worker ends its window when its parent dies."""

import os
import subprocess
import sys
import threading
import time

from conftest import proc_state, tracer_pid, wait_for
from tdescope.app.probe.ebpf.backend import EbpfBackend
from tdescope.app.probe.gdb_backend import GdbBackend
from tdescope.app.probe.remote import RemoteWindow
from tdescope.app.probe.window import CaptureLimits
from tdescope.plugins.sqlcipher.engine import DECRYPT


def _children(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_a_storm_arrives_as_a_sample_with_the_full_counts(sqlcipher_app):
    app = sqlcipher_app(rounds=100)
    got, states = [], []
    window = RemoteWindow(app.pid, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=60, max_kept_per_s=100),
                          "sqlcipher", got.append, states.append, backend=EbpfBackend())
    result = []
    thread = threading.Thread(target=lambda: result.append(window.run()))
    thread.start()
    assert window.armed.wait(20)
    t0 = time.monotonic()
    app.go()
    assert app.finish()[0] == 0
    thread.join(30)
    elapsed = time.monotonic() - t0
    summary = result[0]
    assert summary.backend == "ebpf" and summary.captures > 1000
    assert len(got) + window.skipped == summary.captures
    assert states[-1].state == "failed" and states[-1].unsent == window.skipped > 0  # the app ended first
    assert len(got) <= 100 * (elapsed + 1) + 100  # the bucket's rate, plus its first fill
    assert max(s.captures for s in states) <= summary.captures and states[-1].hits >= summary.captures
    assert [c.seq for c in got] == sorted(c.seq for c in got)


def test_a_slow_stream_arrives_whole(sqlcipher_app):
    app = sqlcipher_app()
    got = []
    window = RemoteWindow(app.pid, DECRYPT, CaptureLimits(max_captures=5, max_seconds=60), "sqlcipher",
                          got.append, backend=GdbBackend())
    app.go()
    summary = window.run()
    assert summary.error is None and summary.captures == 5 and [c.seq for c in got] == [1, 2, 3, 4, 5]
    assert tracer_pid(app.pid) == 0


def test_the_worker_disarms_when_its_parent_is_killed(sqlcipher_app, tmp_path):
    app = sqlcipher_app()
    app.go()
    code = (
        "import sys, time\n"
        "from tdescope.app.probe.gdb_backend import GdbBackend\n"
        "from tdescope.app.probe.remote import RemoteWindow\n"
        "from tdescope.app.probe.window import CaptureLimits\n"
        "from tdescope.plugins.sqlcipher.engine import DECRYPT\n"
        # no `if __name__ == "__main__"` guard: the worker must not re-run its parent's script
        f"w = RemoteWindow({app.pid}, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=120), 'sqlcipher',\n"
        "                 lambda c: None, backend=GdbBackend())\n"
        "import threading; threading.Thread(target=w.run, daemon=True).start()\n"
        "w.armed.wait(30); print('armed', flush=True); time.sleep(600)\n"
    )
    script = tmp_path / "parent.py"
    script.write_text(code)
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert parent.stdout.readline().strip() == "armed"
    workers = _children(parent.pid)
    assert workers and tracer_pid(app.pid) != 0
    parent.kill()
    parent.wait()
    wait_for(lambda: tracer_pid(app.pid) == 0 and not any(
        os.path.exists(f"/proc/{w}") and proc_state(w) != "Z" for w in workers), timeout=30,
        what="the target released and the workers gone")
    assert proc_state(app.pid) in "RS"
    assert not any(os.path.exists(f"/proc/{w}") and proc_state(w) != "Z" for w in workers)
    app.stop()
    code, out, _ = app.finish()
    assert code == 0 and out.startswith("ok ")
