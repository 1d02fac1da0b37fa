"""Observation overhead: the lab's A/B DML elapsed with hotspots + waits on vs off, and under strace.

One lab worker; runs alternate off / on / strace (rotating the order each
round so drift hits every mode alike). "on" is perf at 99 Hz in 1 s windows
plus the /proc wait sampler at 20 Hz, started before the run as in the GUI;
"strace" is ``strace -f -p PID`` attached for the run, for comparison.
Elapsed is the workload's own total (encrypted + plain sides).

Run alone: ``python -m bench.bench_observe [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time

from bench._report import goal

goal("observe_runs_per_mode", "A/B DML runs per mode, alternated in one run")
goal("observe_dml_off_s", "A/B DML elapsed, observation off (median)")
goal("observe_dml_on_s", "A/B DML elapsed, hotspots + waits on (median)")
goal("observe_overhead_pct", "observation overhead: on vs off, median of paired ratios", "≤ 3 %",
     lambda v: v <= 3)
goal("observe_target_cpu_ratio", "target CPU seconds on / off (median of paired ratios)", "≤ 1.03",
     lambda v: v <= 1.03)
goal("observe_observer_core_pct", "CPU the observers use (perf record + perf script + /proc sampler), % of one core")
goal("observe_strace_ratio", "A/B DML elapsed under strace -f / off (median of paired ratios)")
goal("strace_overhead_pct", "the same A/B DML under `strace -f -p` syscall tracing vs off, % (for comparison)")


def _tracer(pid: int) -> int:
    for line in open(f"/proc/{pid}/status"):
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    return 0


def run(quick: bool) -> dict:
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.observe.sampling import Observation
    from tdescope.plugins.sqlcipher.lab import LabSession

    reps = 5 if quick else 8
    lab = LabSession()
    try:
        pid = lab.server_pid()
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")
        params = {**workload.params, "groups": 24}
        workload.run(params, WorkloadControl())  # warm-up: caches, page cache, JIT-free but fair

        def target_cpu() -> float:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        def own_cpu() -> float:
            # perf record / perf script are our children; the /proc sampler is a thread of ours
            a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

        def once(mode: str) -> float:
            obs = strace = None
            c0, o0, w0 = target_cpu(), own_cpu(), time.perf_counter()
            if mode == "on":
                obs = Observation(pid, lambda ev: None).start_blocking()
                time.sleep(0.3)  # perf is sampling before the run begins, as in the GUI
            elif mode == "strace":
                strace = subprocess.Popen(["strace", "-f", "-qq", "-p", str(pid), "-o", "/dev/null"])
                end = time.time() + 5
                while _tracer(pid) == 0 and time.time() < end:
                    time.sleep(0.02)
            try:
                result = workload.run(params, WorkloadControl())
            finally:
                if obs is not None:
                    obs.stop()
                if strace is not None:
                    strace.terminate()
                    strace.wait(10)
            cpu[mode].append(target_cpu() - c0)
            observer[mode].append((own_cpu() - o0) / (time.perf_counter() - w0))
            return result.total("encrypted") + result.total("plain")

        modes = ["off", "on"] + (["strace"] if shutil.which("strace") else [])
        times: dict[str, list[float]] = {m: [] for m in modes}
        cpu: dict[str, list[float]] = {m: [] for m in modes}
        observer: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(reps):
            order = modes[r % len(modes):] + modes[: r % len(modes)]
            for m in order:
                times[m].append(once(m))
    finally:
        lab.close()
    on_ratio = [a / b for a, b in zip(times["on"], times["off"])]
    out = {
        "observe_runs_per_mode": reps,
        "observe_dml_off_s": round(statistics.median(times["off"]), 3),
        "observe_dml_on_s": round(statistics.median(times["on"]), 3),
        "observe_overhead_pct": round(100 * (statistics.median(on_ratio) - 1), 2),
        "observe_all_s": {m: [round(t, 3) for t in v] for m, v in times.items()},
        # less sensitive to other load on the box than elapsed time:
        "observe_target_cpu_ratio": round(statistics.median(a / b for a, b in zip(cpu["on"], cpu["off"])), 3),
        "observe_observer_core_pct": round(100 * statistics.median(observer["on"]), 1),
        "observe_load_avg_1m": os.getloadavg()[0],
    }
    if "strace" in times:
        strace_ratio = statistics.median(a / b for a, b in zip(times["strace"], times["off"]))
        out["observe_strace_ratio"] = round(strace_ratio, 2)
        out["strace_overhead_pct"] = round(100 * (strace_ratio - 1), 1)
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
