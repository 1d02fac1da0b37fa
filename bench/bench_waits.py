"""The eBPF wait tracer's cost on the target: the lab's A/B DML with the tracer on vs off, in one run.

One lab worker (the SQLCipher lab's ab_dml: ~100,000 syscalls/s, ../shared/research/ebpf-waits.md);
runs alternate off / ebpf / proc, rotating the order each round so drift hits every mode alike.
"ebpf" is :class:`~tdescope.app.waits.ebpf.tracer.EbpfWaitTracer` attached for the run (every syscall
and context switch of the worker timed and sized in the kernel, the maps read each second); "proc"
is the /proc wait sampler at 20 Hz, the anchor the tracer is held to. Elapsed is the workload's own
total (encrypted + plain sides); ratios are paired within a round.

A second, less noisy figure: a C loop of 4 KiB preads (``_syscall_loop``) timed per call with the
tracer on vs off, alternated; the median added nanoseconds per syscall, times the DML's syscall rate,
is the overhead the tracer puts on that rate whatever else the machine is doing.

Run alone: ``python -m bench.bench_waits [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench._report import goal

goal("waits_runs_per_mode", "A/B DML runs per mode (off, eBPF tracer, /proc sampler), alternated in one run")
goal("waits_ebpf_overhead_pct", "eBPF wait tracer on vs off: A/B DML elapsed, median of paired ratios", "≤ 3 %",
     lambda v: v <= 3)
goal("waits_ebpf_ratio_spread", "eBPF wait tracer: [min, max] of the paired on/off ratios")
goal("waits_proc_overhead_pct", "/proc wait sampler (20 Hz) on vs off, median of paired ratios (the anchor)")
goal("waits_syscalls_per_s", "syscalls/s of the traced worker during the A/B DML (the tracer's count)")
goal("waits_ebpf_ns_per_syscall", "eBPF wait tracer: ns added per traced syscall (4 KiB pread loop, on - off, "
     "median of alternated pairs)")
goal("waits_ebpf_pct_at_100k", "that cost at 100,000 syscalls/s, % of one second", "≤ 3 %", lambda v: v <= 3)
goal("waits_loop_calls_lost", "pread loop (millions of syscalls/s) traced: calls not aggregated", "0",
     lambda v: v == 0)
goal("waits_lost_aggregates", "calls the kernel could not aggregate (histogram map full), all eBPF runs", "0",
     lambda v: v == 0)


_LOOP_C = r"""
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    static char buf[4096];
    long n = atol(argv[1]);
    int fd = open(argv[2], O_RDONLY);
    char line[8];
    printf("%d\n", (int)getpid());
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < n; i++)
            if (pread(fd, buf, sizeof buf, 0) != sizeof buf) return 2;
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("%.1f\n", ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n);
        fflush(stdout);
    }
    return 0;
}
"""


def _per_syscall(pairs: int) -> tuple[float, list[float], float, int, int]:
    """Median ns added per pread by the tracer, every pair's difference, the median untraced pread, and the
    traced calls the tracer counted against those it lost (no room in its map)."""
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer

    with tempfile.TemporaryDirectory() as tmp:
        src, exe, data = (os.path.join(tmp, n) for n in ("loop.c", "loop", "data"))
        with open(src, "w") as f:
            f.write(_LOOP_C)
        with open(data, "wb") as f:
            f.write(os.urandom(4096))
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True)
        proc = subprocess.Popen([exe, "200000", data], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            pid = int(proc.stdout.readline())

            def once() -> float:
                proc.stdin.write("go\n")
                proc.stdin.flush()
                return float(proc.stdout.readline())

            once()  # warm-up
            diffs, offs = [], []
            counted = lost = 0
            for i in range(pairs):
                off = on = 0.0
                for mode in (("off", "on") if i % 2 == 0 else ("on", "off")):
                    if mode == "on":
                        with EbpfWaitTracer(pid) as tracer:
                            on = once()
                            totals = tracer.read()
                        counted += totals.calls
                        lost += totals.no_room
                    else:
                        off = once()
                diffs.append(on - off)
                offs.append(off)
        finally:
            proc.kill()
            proc.wait()
    return statistics.median(diffs), diffs, statistics.median(offs), counted, lost


def run(quick: bool) -> dict:
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
    from tdescope.app.waits.os_sampler import OsWaitSampler
    from tdescope.plugins.sqlcipher.lab import LabSession

    reps = 5 if quick else 9
    lab = LabSession()
    lost = 0
    rates: list[float] = []
    try:
        pid = lab.server_pid()
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")
        params = {**workload.params, "groups": 24}
        workload.run(params, WorkloadControl())  # warm-up

        def once(mode: str) -> float:
            nonlocal lost
            tracer = sampler = None
            if mode == "ebpf":
                tracer = EbpfWaitTracer(pid).start()
            elif mode == "proc":
                sampler = OsWaitSampler(pid, hz=20, on_sample=lambda s: None)
                sampler.start()
            try:
                result = workload.run(params, WorkloadControl())
            finally:
                if tracer is not None:
                    totals = tracer.read()
                    tracer.stop()
                    lost += totals.no_room
                if sampler is not None:
                    sampler.stop()
            elapsed = result.total("encrypted") + result.total("plain")
            if tracer is not None:
                rates.append(totals.calls / elapsed)
            return elapsed

        modes = ["off", "ebpf", "proc"]
        times: dict[str, list[float]] = {m: [] for m in modes}
        for r in range(reps):
            order = modes[r % len(modes):] + modes[: r % len(modes)]
            for m in order:
                times[m].append(once(m))
    finally:
        lab.close()
    ns, diffs, base, counted, lost_loop = (_per_syscall(15 if quick else 31) if shutil.which("cc")
                                           else (float("nan"), [], float("nan"), 0, 0))
    ebpf = [a / b for a, b in zip(times["ebpf"], times["off"])]
    proc = [a / b for a, b in zip(times["proc"], times["off"])]
    return {
        "waits_runs_per_mode": reps,
        "waits_ebpf_overhead_pct": round(100 * (statistics.median(ebpf) - 1), 2),
        "waits_ebpf_ratio_spread": [round(min(ebpf), 3), round(max(ebpf), 3)],
        "waits_proc_overhead_pct": round(100 * (statistics.median(proc) - 1), 2),
        "waits_syscalls_per_s": round(statistics.median(rates)),
        "waits_lost_aggregates": lost,
        "waits_ebpf_ns_per_syscall": round(ns, 1),
        "waits_ebpf_ns_pairs": [round(d, 1) for d in diffs],
        "waits_pread_ns_untraced": round(base, 1),
        # the loop runs at 1e9 / (base + ns) syscalls/s, far above 100,000: every call must be counted
        "waits_loop_calls_counted": counted,
        "waits_loop_calls_lost": lost_loop,
        "waits_loop_syscalls_per_s": round(1e9 / (base + ns)) if base == base else None,
        "waits_ebpf_pct_at_100k": round(ns * 100_000 / 1e9 * 100, 2),
        "waits_all_s": {m: [round(t, 3) for t in v] for m, v in times.items()},
        "waits_load_avg_1m": os.getloadavg()[0],
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
