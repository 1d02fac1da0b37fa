"""Killing gdb while armed: how often does the target survive?

Each trial attaches a capture window to a fresh SQLCipher process, lets it run
armed for a random moment, kills gdb with SIGKILL, and checks, half a second
later and again after the process finished its own work, that it is alive and
exited 0. Two regimes, side by side in one run:

- ``quiet``: the target decrypts ~100 pages/s (a database doing a few cold reads);
- ``busy``: the target decrypts as fast as it can (~10,000 pages/s offered): the
  hit-rate cap closes such a window within about a second, so the kill lands
  early in it.

The guard (``app/gdb/guard.py``) restores the code when gdb dies while the target
runs. What it cannot save: a kill while the target sits *inside* a breakpoint
stop; the kernel then delivers the pending SIGTRAP. That is the remaining risk,
and it grows with the fraction of time the target spends stopped.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._report import goal

goal("gdb_kill_survival_quiet_pct", "target survives gdb SIGKILL while armed, ~100 pages/s target, %", "≥ 95",
     lambda v: v >= 95)
goal("gdb_kill_survival_busy_pct", "same, target decrypting flat out (hit-rate cap in force), %")
goal("gdb_kill_trials", "trials per regime")

TARGET = r'''
import os, sys, time, sqlcipher3
path, stop, pause = sys.argv[1], sys.argv[2], float(sys.argv[3])
conn = sqlcipher3.connect(path)
conn.execute("PRAGMA key = 'app-secret'")
conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT)")
if conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0:
    conn.executemany("INSERT INTO items (label) VALUES (?)", [("row-%05d" % i,) for i in range(3000)])
    conn.commit()
conn.execute("PRAGMA cache_size = 8")
print(os.getpid(), flush=True)
while not os.path.exists(stop):
    rows = conn.execute("SELECT id, label FROM items ORDER BY id").fetchall()
    assert rows == [(i + 1, "row-%05d" % i) for i in range(3000)], "data corrupted"
    time.sleep(pause)
'''


def _trial(folder: Path, pause: float, rng: random.Random) -> bool:
    from tdescope.app.capture import CaptureLimits, CaptureWindow
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    stop = folder / "stop"
    stop.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", TARGET, str(folder / "t.db"), str(stop), str(pause)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    pid = int(proc.stdout.readline())
    window = CaptureWindow(pid, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=60), "sqlcipher",
                           lambda c: None)
    t = threading.Thread(target=window.run)
    t.start()
    window.armed.wait(30)
    time.sleep(rng.uniform(0.0, 0.5))
    gdb = window._gdb._proc if window._gdb is not None else None
    if gdb is not None and gdb.poll() is None:
        os.kill(gdb.pid, signal.SIGKILL)
    t.join(30)
    time.sleep(0.5)
    alive = proc.poll() is None
    stop.touch()
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = -9
    return alive and code == 0


def run(quick: bool) -> dict:
    trials = 10 if quick else 100
    rng = random.Random(7)
    survived = {"quiet": 0, "busy": 0}
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-kill-") as tmp:
        for _ in range(trials):
            for regime, pause in (("quiet", 0.25), ("busy", 0.0)):  # alternate the regimes
                survived[regime] += _trial(Path(tmp), pause, rng)
    return {
        "gdb_kill_trials": trials,
        "gdb_kill_survival_quiet_pct": round(100 * survived["quiet"] / trials, 1),
        "gdb_kill_survival_busy_pct": round(100 * survived["busy"] / trials, 1),
    }


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
