"""Capture throughput on a real SQLCipher process, side by side in one run.

Three ways to take N page pairs (ciphertext at entry, plaintext at return of
``sqlcipher_page_cipher``) from the same continuously-reading target:

- tdescope: the capture window (gdb/MI, ``Breakpoint.stop()`` copies, bytes out of band);
- gdb CLI: seed 003's method, a gdb script whose loop dumps the buffers with CLI commands;
- floor: two bare breakpoint stops per page (entry and return), nothing copied.

Methods alternate; each figure is the median over the repetitions.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from bench._report import goal

ROOT = Path(__file__).resolve().parent.parent
APP = ROOT / "tests" / "clients" / "sqlcipher_app.py"

goal("capture_pairs_per_s", "before+after page pairs per second (tdescope, SQLCipher target)")
goal("capture_vs_gdb_cli", "tdescope ÷ gdb CLI dump script (seed 003's method)", "≥ 1.5", lambda v: v >= 1.5)
goal("capture_vs_floor", "tdescope ÷ two bare breakpoint stops per page", "≥ 0.8", lambda v: v >= 0.8)
goal("capture_stop_us_p50", "target stopped per capture (copy time + stop cost), µs")
goal("capture_stop_us_p99", "same, 99th percentile, µs", "≤ 20000", lambda v: v <= 20000)


class Target:
    """The sqlcipher3 test client, scanning its encrypted table over and over."""

    def __init__(self, folder: Path) -> None:
        self.stop = folder / "app.stop"
        self.proc = subprocess.Popen([sys.executable, str(APP), str(folder / "app.db"), str(10**9), str(self.stop)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = int(self.proc.stdout.readline())
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def close(self) -> None:
        self.stop.touch()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def tdescope_rate(pid: int, n: int) -> tuple[float, list[float]]:
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    caps = []
    window = CaptureWindow(pid, DECRYPT, CaptureLimits(max_captures=n, max_seconds=600,
                                                       stops=StopLimits(max_busy_fraction=1.0)),
                           "sqlcipher", caps.append)
    window.run()
    span = caps[-1].ts - caps[0].ts
    return (len(caps) - 1) / span, [c.stop_us for c in caps]


def _gdb_script_rate(pid: int, n: int, body: str, folder: Path, python: bool = False) -> float:
    stamp = folder / "stamps"
    stamp.unlink(missing_ok=True)
    script = folder / ("s.py" if python else "s.gdb")
    script.write_text(body.replace("@N@", str(n)).replace("@STAMP@", str(stamp)).replace("@DIR@", str(folder)))
    subprocess.run(["gdb", "-nx", "-q", "-batch", "-p", str(pid), "-x", str(script)],
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
    t0, t1 = (float(x) for x in stamp.read_text().split())
    return (n - 1) / (t1 - t0)


GDB_CLI = textwrap.dedent("""\
    set pagination off
    set confirm off
    break sqlcipher_page_cipher if mode == 0
    set $i = 0
    continue
    shell date +%s.%N >> @STAMP@
    while $i < @N@
      dump binary memory @DIR@/before.bin in in+page_sz
      set $o = out
      set $n = page_sz
      finish
      eval "dump binary memory @DIR@/after.bin %lu %lu", $o, $o + $n
      set $i = $i + 1
      continue
    end
    shell date +%s.%N >> @STAMP@
    delete
    detach
""")

FLOOR = textwrap.dedent("""\
    import gdb, time
    state = {"n": 0, "t": []}
    class Fin(gdb.FinishBreakpoint):
        def stop(self):
            return False
        def out_of_scope(self):
            pass
    class B(gdb.Breakpoint):
        def stop(self):
            f = gdb.selected_frame()
            if int(f.read_var("mode")) != 0:
                return False
            state["n"] += 1
            if state["n"] == 1 or state["n"] == @N@:
                state["t"].append(time.time())
            if state["n"] >= @N@:
                return True
            Fin(f, internal=True)
            return False
    B("sqlcipher_page_cipher")
    gdb.execute("continue")
    open("@STAMP@", "w").write("%f %f" % tuple(state["t"]))
    gdb.execute("delete")
    gdb.execute("detach")
""")


def run(quick: bool) -> dict:
    n = 300 if quick else 1000
    reps = 2 if quick else 3
    rates = {"tdescope": [], "cli": [], "floor": []}
    stops: list[float] = []
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-") as tmp:
        folder = Path(tmp)
        target = Target(folder)
        try:
            time.sleep(0.5)
            for _ in range(reps):
                rate, stop_us = tdescope_rate(target.pid, n)
                rates["tdescope"].append(rate)
                stops.extend(stop_us)
                rates["cli"].append(_gdb_script_rate(target.pid, n, GDB_CLI, folder))
                rates["floor"].append(_gdb_script_rate(target.pid, n, FLOOR, folder, python=True))
        finally:
            target.close()
    med = {k: statistics.median(v) for k, v in rates.items()}
    stops.sort()
    return {
        "capture_pairs_per_s": round(med["tdescope"], 1),
        "capture_gdb_cli_pairs_per_s": round(med["cli"], 1),
        "capture_floor_pairs_per_s": round(med["floor"], 1),
        "capture_vs_gdb_cli": round(med["tdescope"] / med["cli"], 3),
        "capture_vs_floor": round(med["tdescope"] / med["floor"], 3),
        "capture_stop_us_p50": round(stops[len(stops) // 2], 1),
        "capture_stop_us_p99": round(stops[int(len(stops) * 0.99)], 1),
    }


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
