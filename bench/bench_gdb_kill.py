"""Killing gdb while armed: how often does the target survive?

Each trial attaches a capture window (production defaults: stop budget 1 % of
wall time, bursts up to 25 ms) to a fresh SQLCipher process, lets it run for a
random moment, kills gdb with SIGKILL, and checks, half a second later and again
after the process finished its own work, that it is alive and exited 0. Two
regimes, side by side in one run:

- ``quiet``: the target decrypts ~70 pages/s (a database doing a few cold reads);
- ``busy``: the target decrypts as fast as it can (~10,000 pages/s offered).

and two kill moments: within the first 0.5 s after arming (the opening burst,
before the stop budget has paused the probe once: the worst case), and anywhere
in the first 5 s (a kill at a random moment of a capture session).

Just before each kill the bench notes where the target was: inside a breakpoint
stop (state ``t``), running with the probe's ``int3`` in its code, or running
with the probe paused by the stop budget (no ``int3``). The guard
(``app/gdb/guard.py``) saves the running cases; a kill that lands *inside* a stop
cannot be saved (the kernel delivers the pending SIGTRAP when the tracer dies),
so the risk is the share of time the target spends stopped, which the stop
budget bounds.
"""

from __future__ import annotations

import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from bench._report import goal

goal("gdb_kill_survival_quiet_pct", "target survives gdb SIGKILL at a random moment of an armed window "
     "(0-5 s), ~70 pages/s target, %", "≥ 95", lambda v: v >= 95)
goal("gdb_kill_survival_busy_pct", "same, target decrypting flat out (the stop budget pauses the probe), %",
     "≥ 95", lambda v: v >= 95)
goal("gdb_kill_survival_quiet_burst_pct", "same, kill in the opening burst (0-0.5 s after arming), quiet target, %",
     "≥ 95", lambda v: v >= 95)
goal("gdb_kill_survival_busy_burst_pct", "same, kill in the opening burst, busy target, %", "≥ 95", lambda v: v >= 95)
goal("gdb_kill_trials", "trials per regime")
goal("gdb_kill_in_stop", "kills that landed while the target sat in a breakpoint stop (all four series)")
goal("gdb_kill_in_stop_survived", "of those, how many survived")
goal("gdb_kill_running_int3", "kills that landed while the target ran with the probe's int3 in its code")
goal("gdb_kill_running_int3_survived", "of those, how many survived (the guard's case)")
goal("gdb_kill_paused", "kills that landed while the stop budget had paused the probe (no int3)")
goal("gdb_kill_paused_survived", "of those, how many survived")
goal("gdb_kill_guard_fast_ms_p50", "guard: from its wake-up (gdb dead) to the probe's bytes restored, median, ms")

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


def _int3_at(pid: int, address: int) -> bool:
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            mem.seek(address)
            return mem.read(1) == b"\xcc"
    except OSError:
        return False


def _trial(folder: Path, pause: float, rng: random.Random, within: float) -> dict:
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.app.system.elf import resolve_in_process
    from tdescope.app.system.procstat import process_state
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    stop = folder / "stop"
    stop.unlink(missing_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", TARGET, str(folder / "t.db"), str(stop), str(pause)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                            preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
    pid = int(proc.stdout.readline())
    address = resolve_in_process(pid, DECRYPT.symbols).address
    window = CaptureWindow(pid, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=60), "sqlcipher",
                           lambda c: None)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(summary=window.run()))
    t.start()
    window.armed.wait(30)
    time.sleep(rng.uniform(0.0, within))
    gdb = window.handle.gdb if window.handle is not None else None
    where = "running-int3" if _int3_at(pid, address) else "paused"
    if process_state(pid) == "t":
        where = "in-stop"
    if gdb is not None and gdb.alive:
        os.kill(gdb.gdb_pid, signal.SIGKILL)
    t.join(30)
    time.sleep(0.5)
    alive = proc.poll() is None
    stop.touch()
    try:
        code = proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        code = -9
    summary = result.get("summary")
    guard = summary.guard if summary is not None else None
    return {"survived": alive and code == 0, "where": where, "fast_ms": guard.fast_ms if guard else None}


def run(quick: bool) -> dict:
    trials = 10 if quick else 100
    rng = random.Random(7)
    survived = {"quiet": 0, "busy": 0, "quiet_burst": 0, "busy_burst": 0}
    where = {"in-stop": [0, 0], "running-int3": [0, 0], "paused": [0, 0]}
    fast = []
    series = [(regime + suffix, pause, within) for suffix, within in (("", 5.0), ("_burst", 0.5))
              for regime, pause in (("quiet", 0.25), ("busy", 0.0))]
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-kill-") as tmp:
        for _ in range(trials):
            for name, pause, within in series:  # alternate the series
                r = _trial(Path(tmp), pause, rng, within)
                survived[name] += r["survived"]
                where[r["where"]][0] += 1
                where[r["where"]][1] += r["survived"]
                if r["fast_ms"] is not None:
                    fast.append(r["fast_ms"])
    return {
        "gdb_kill_trials": trials,
        "gdb_kill_survival_quiet_pct": round(100 * survived["quiet"] / trials, 1),
        "gdb_kill_survival_busy_pct": round(100 * survived["busy"] / trials, 1),
        "gdb_kill_survival_quiet_burst_pct": round(100 * survived["quiet_burst"] / trials, 1),
        "gdb_kill_survival_busy_burst_pct": round(100 * survived["busy_burst"] / trials, 1),
        "gdb_kill_in_stop": where["in-stop"][0],
        "gdb_kill_in_stop_survived": where["in-stop"][1],
        "gdb_kill_running_int3": where["running-int3"][0],
        "gdb_kill_running_int3_survived": where["running-int3"][1],
        "gdb_kill_paused": where["paused"][0],
        "gdb_kill_paused_survived": where["paused"][1],
        "gdb_kill_guard_fast_ms_p50": round(statistics.median(fast), 3) if fast else None,
    }


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
