"""Observation overhead: the lab's A/B DML under a running observation (hotspots + waits) vs none.

What a user pays is the steady state of an observation left running while workloads come and go, so
each round starts the observers, lets a first DML run go by (perf script loads the DSOs' symbols and
unwind tables then, once per observation) and times the second one; the start is reported apart
(its wall time, the observers' CPU up to the end of the first run, and the first run's overhead).
The method is :mod:`bench._steady`. "on" is what the window runs: perf (DWARF, 16 KiB, 499 Hz, 1 s
windows), the /proc wait sampler at 20 Hz and the eBPF wait tracer where it loads
(``exact_waits="auto"``); "strace" is ``strace -f -p PID`` attached for the turn, for comparison.

Run alone: ``python -m bench.bench_observe [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time

from bench._report import goal
from bench._steady import compare, run_rounds

goal("observe_rounds", "rounds (off, on and, in a full run, strace each once, order alternated), in one run")
goal("observe_dml_off_s", "A/B DML elapsed, observation off (median of steady runs)")
goal("observe_dml_on_s", "A/B DML elapsed under a running observation (median of steady runs)")
goal("observe_overhead_pct", "running observation (hotspots + waits) vs off: DML elapsed added, median of paired "
     "ratios (95 % interval in _ci95)", "≤ 3 %", lambda v: v <= 3)
goal("observe_target_cpu_ratio", "lab worker CPU seconds, running observation / off (median of paired ratios)",
     "≤ 1.03", lambda v: v <= 1.03)
goal("observe_observer_core_pct", "CPU the observers use while running (perf record + perf script + samplers + "
     "parsing), % of one core, minus the same figure with observation off")
goal("observe_first_run_overhead_pct", "the first DML run after the observation starts vs off: the start's cost")
goal("observe_start_s", "wall time to start the observers (perf attached, tracer loaded)")
goal("observe_start_observer_cpu_s", "observers' CPU from the start to the end of the first run, seconds")
goal("observe_strace_ratio", "A/B DML elapsed under strace -f / off (median of paired ratios)")
goal("strace_overhead_pct", "the same A/B DML under `strace -f -p` syscall tracing vs off, % (for comparison)")


def _tracer(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0


class _Strace:
    def __init__(self, pid: int) -> None:
        self.proc = subprocess.Popen(["strace", "-f", "-qq", "-p", str(pid), "-o", "/dev/null"])
        end = time.time() + 5
        while _tracer(pid) == 0 and time.time() < end:
            time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def run(quick: bool) -> dict:
    from tdescope.app.observe.sampling import Observation

    rounds = 10 if quick else 16
    modes = {
        "off": None,
        "on": lambda pid, sink: Observation(pid, sink, exact_waits="auto").start_blocking(),
    }
    if shutil.which("strace") and not quick:  # a comparison, not a goal: the full run only
        modes["strace"] = lambda pid, sink: _Strace(pid)
    load0 = os.getloadavg()[0]
    series = run_rounds(modes, rounds, groups=24, progress=lambda m: print(m, file=sys.stderr, flush=True))
    on = compare(series["on"], series["off"])
    off_core = 100 * statistics.median(series["off"].observer_core)
    out = {
        "observe_rounds": rounds,
        "observe_dml_off_s": round(statistics.median(series["off"].steady_s), 3),
        "observe_dml_on_s": round(statistics.median(series["on"].steady_s), 3),
        "observe_overhead_pct": round(on.overhead_pct[0], 2),
        "observe_overhead_pct_ci95": [round(on.overhead_pct[1], 2), round(on.overhead_pct[2], 2)],
        "observe_target_cpu_ratio": round(on.cpu_ratio[0], 3),
        "observe_target_cpu_ratio_ci95": [round(on.cpu_ratio[1], 3), round(on.cpu_ratio[2], 3)],
        "observe_observer_core_pct": round(on.observer_core_pct[0] - off_core, 1),
        "observe_observer_core_pct_off_baseline": round(off_core, 1),
        "observe_first_run_overhead_pct": round(on.first_run_overhead_pct[0], 2),
        "observe_first_run_overhead_pct_ci95": [round(on.first_run_overhead_pct[1], 2),
                                                round(on.first_run_overhead_pct[2], 2)],
        "observe_start_s": round(on.start_s, 3),
        "observe_start_observer_cpu_s": round(on.start_observer_cpu_s, 2),
        "observe_samples_per_s": round(on.samples_per_s, 1),
        "observe_deep_pct": round(on.deep_pct, 1),
        "observe_interval_coverage": round(on.coverage, 3),
        "observe_all_s": {m: [round(t, 3) for t in s.steady_s] for m, s in series.items()},
        "observe_load_avg_1m_at_start": load0,
        "observe_load_avg_1m": os.getloadavg()[0],
    }
    if "strace" in series:
        st = compare(series["strace"], series["off"])
        out["observe_strace_ratio"] = round(1 + st.overhead_pct[0] / 100, 2)
        out["strace_overhead_pct"] = round(st.overhead_pct[0], 1)
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
