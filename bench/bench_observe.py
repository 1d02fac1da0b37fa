"""Observation overhead: the lab's A/B DML under a running observation (hotspots + waits), on vs off.

What a user pays is the steady state of an observation left running while workloads come and go; the
old bench started perf for each ~1 s run and weighed its start (perf script loading every DSO's symbols
and unwind tables) in every run. Here (:func:`bench._steady.run_windows`) the observation starts, a
first DML run goes by, and then DML runs alternate with the observation resumed and paused (perf's
events off in the kernel, the wait samplers stopped), in pairs seconds apart, so a drifting load weighs
on both sides. The start is reported apart: its wall time, the observers' CPU up to the end of the
first run, and the first run's overhead against a run with no observers.

"on" is what the window runs: perf (DWARF, 16 KiB, 499 Hz, 1 s windows), the /proc wait sampler at
20 Hz and the eBPF wait tracer where it loads (``exact_waits="auto"``); "strace" (full run only) is
``strace -f -p PID`` attached and detached the same way, for comparison.

Run alone: ``python -m bench.bench_observe [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

from bench._report import goal
from bench._steady import run_windows

goal("observe_pairs", "on/off pairs of A/B DML runs (16 groups) under one running observation, over its starts")
goal("observe_dml_off_s", "A/B DML elapsed, observation paused (median)")
goal("observe_dml_on_s", "A/B DML elapsed under the running observation (median)")
goal("observe_overhead_pct", "running observation (hotspots + waits) vs off: DML elapsed added, median of paired "
     "ratios (95 % interval in _ci95)", "≤ 3 %", lambda v: v <= 3)
goal("observe_target_cpu_ratio", "lab worker CPU seconds, running observation / off (median of paired ratios)",
     "≤ 1.03", lambda v: v <= 1.03)
goal("observe_observer_core_pct", "CPU the observers use while running (perf record + perf script + samplers + "
     "parsing), % of one core, minus the same figure with observation off")
goal("observe_blocks", "observation starts (each followed by its on/off pairs)")
goal("observe_samples_per_s", "hotspot samples per second of the timed runs (under load: the CPU the target got)")
goal("observe_deep_pct", "hotspot samples whose stack is more than 3 frames deep, %")
goal("observe_load_avg_1m", "load average at the end (2 cores; other work on the machine)")
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


class _Tracing:
    """strace as a mode of :func:`run_windows`: pausing detaches it, resuming attaches again."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.strace: _Strace | None = _Strace(pid)

    def pause(self) -> None:
        if self.strace is not None:
            self.strace.stop()
            self.strace = None

    def resume(self) -> None:
        if self.strace is None:
            self.strace = _Strace(self.pid)

    stop = pause


def run(quick: bool) -> dict:
    from tdescope.app.observe.sampling import Observation

    blocks, pairs = (2, 6) if quick else (3, 8)
    modes = {"on": lambda pid, sink: Observation(pid, sink, exact_waits="auto").start_blocking()}
    if shutil.which("strace") and not quick:  # a comparison, not a goal: the full run only
        modes["strace"] = lambda pid, sink: _Tracing(pid)
    load0 = os.getloadavg()[0]
    series = run_windows(modes, blocks, pairs, groups=16, progress=lambda m: print(m, file=sys.stderr, flush=True))
    on = series["on"].figures("observe")
    out = {
        "observe_blocks": blocks,
        "observe_pairs": on["observe_pairs"],
        "observe_dml_off_s": on["observe_dml_off_s"],
        "observe_dml_on_s": on["observe_dml_on_s"],
        "observe_overhead_pct": on["observe_overhead_pct"],
        "observe_overhead_pct_ci95": on["observe_overhead_pct_ci95"],
        "observe_target_cpu_ratio": on["observe_cpu_ratio"],
        "observe_target_cpu_ratio_ci95": on["observe_cpu_ratio_ci95"],
        "observe_observer_core_pct": on["observe_observer_core_pct"],
        "observe_observer_core_pct_ci95": on["observe_observer_core_pct_ci95"],
        "observe_interval_coverage": on["observe_overhead_pct_coverage"],
        "observe_first_run_overhead_pct": on["observe_first_run_overhead_pct"],
        "observe_first_run_overhead_pct_ci95": on["observe_first_run_overhead_pct_ci95"],
        "observe_starts": on["observe_starts"],
        "observe_start_s": on["observe_start_s"],
        "observe_start_observer_cpu_s": on["observe_start_observer_cpu_s"],
        "observe_samples_per_s": on["observe_samples_per_s"],
        "observe_deep_pct": on["observe_deep_pct"],
        "observe_all_s": {"on": [round(t, 3) for t in series["on"].on_s],
                          "off": [round(t, 3) for t in series["on"].off_s]},
        "observe_all_cpu_s": {"on": [round(t, 2) for t in series["on"].on_cpu_s],
                              "off": [round(t, 2) for t in series["on"].off_cpu_s]},
        "observe_load_avg_1m_at_start": load0,
        "observe_load_avg_1m": os.getloadavg()[0],
    }
    if "strace" in series:
        st = series["strace"].figures("strace")
        out["observe_strace_ratio"] = round(1 + st["strace_overhead_pct"] / 100, 2)
        out["strace_overhead_pct"] = st["strace_overhead_pct"]
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
