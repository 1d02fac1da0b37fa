"""What perf's sampling costs the target itself, per unwinding choice, measured in the target's own CPU time.

On a shared 2-core machine the elapsed time of a workload moves with everyone else's load by far more than
the few percent observing costs (``bench_observe``'s intervals span ±10-25 % at load 10-20). The target's
*own* CPU time for a fixed piece of work does not count the time it waited for a core, so it isolates what
sampling adds on the target's account: the timer interrupt, the copy of the user stack (DWARF) or the walk
of frame pointers (``-g``), the write into perf's ring buffer.

A small C program (``_LOOP_C``) does a fixed amount of arithmetic at the bottom of 20 nested frames of
~300 bytes each (a ~7 KiB deep stack, like the lab's Python -> SQLite -> codec -> OpenSSL chains), and
prints its thread CPU time (``CLOCK_THREAD_CPUTIME_ID``) per piece. Per mode, one
:class:`~tdescope.app.hotspots.perf_record.HotspotSampler` runs for the whole mode; pieces alternate with
sampling resumed and paused (perf's events off in the kernel, perf script still running), the order
alternated pair by pair; the figure is the median of the paired on/off ratios with its 95 % interval.
``reach_main_pct`` is the share of samples whose unwound stack reaches ``main``: what a smaller stack copy
or frame pointers lose.

The wait samplers are measured the same way on a loop of 4 KiB preads (the same program, given a file):
the eBPF wait tracer and the /proc sampler at 20 Hz attached for a piece and not for the other; the
figure is the target's own CPU added per syscall. Last, **together**: the whole observation as the window
runs it (``Observation(exact_waits="auto")``: perf, the /proc sampler, the eBPF tracer) at 249 and 499 Hz,
paused and resumed in pairs, on the arithmetic with a pread every 10,000 steps (~50k syscalls per second
of the target's CPU, the lab's A/B DML makes 42-51k): the issue's "hotspots and waits together".

Run alone: ``python -m bench.bench_sample_cost [--quick] [--waits-only | --together-only]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

from bench._report import goal
from bench._steady import median_interval

_LOOP_C = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>
static volatile unsigned long sink;
static int fd = -1;
static long every = 0;  /* > 0: the arithmetic, with a pread every `every` steps (a syscall rate like the lab's) */
static char buf[4096];
__attribute__((noinline)) static unsigned long work(int depth, long n) {
    volatile char pad[288];
    memset((char *)pad, depth, sizeof pad);
    if (depth > 0) return work(depth - 1, n) + pad[depth];
    if (fd >= 0 && every > 0) {
        unsigned long y = 88172645463325252UL;
        for (long i = 0; i < n; i++) {
            y ^= y << 13; y ^= y >> 7; y ^= y << 17;
            if (i % every == 0 && pread(fd, buf, sizeof buf, 0) != sizeof buf) exit(2);
        }
        return y;
    }
    if (fd >= 0) {  /* the syscall loop: n preads of 4 KiB */
        for (long i = 0; i < n; i++)
            if (pread(fd, buf, sizeof buf, 0) != sizeof buf) exit(2);
        return 0;
    }
    unsigned long x = 88172645463325252UL;
    for (long i = 0; i < n; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; }
    return x;
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    if (argc > 2) fd = open(argv[2], O_RDONLY);
    if (argc > 3) every = atol(argv[3]);
    char line[32];
    printf("%d\n", (int)getpid());
    fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        struct timespec a, b;
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &a);
        sink += work(20, n);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &b);
        printf("%.0f\n", (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec));
        fflush(stdout);
    }
    return 0;
}
"""

#: mode -> HotspotSampler keywords.
MODES = {
    "dwarf16k_499": {"frequency": 499, "callgraph": "dwarf", "stack_bytes": 16384},
    "dwarf8k_499": {"frequency": 499, "callgraph": "dwarf", "stack_bytes": 8192},
    "dwarf4k_499": {"frequency": 499, "callgraph": "dwarf", "stack_bytes": 4096},
    "fp_499": {"frequency": 499, "callgraph": "fp"},
    "dwarf16k_249": {"frequency": 249, "callgraph": "dwarf", "stack_bytes": 16384},
    "dwarf16k_199": {"frequency": 199, "callgraph": "dwarf", "stack_bytes": 16384},
}
goal("sample_tracer_ns_per_syscall", "eBPF wait tracer: the target's own CPU added per 4 KiB pread, ns "
     "(median of paired differences, 95 % interval in _ci95)")
goal("sample_together_249_cpu_added_pct", "hotspots (249 Hz, DWARF 16 KiB) + /proc + eBPF tracer, as the window "
     "runs them, on work making ~50k syscalls per CPU second: the target's own CPU added, %", "≤ 3 %",
     lambda v: v <= 3)
goal("sample_together_499_cpu_added_pct", "the same at 499 Hz (the old default), %")
goal("sample_proc20_ns_per_syscall", "/proc wait sampler at 20 Hz: the same, ns per pread")
for _m in MODES:
    goal(f"sample_{_m}_cpu_added_pct", f"{_m}: target's own CPU for fixed work, sampling on vs paused, % "
         "(median of paired ratios, 95 % interval in _ci95)")
    goal(f"sample_{_m}_reach_main_pct", f"{_m}: samples whose unwound stack reaches main, %")


def run(quick: bool, modes: dict | None = None, together_only: bool = False) -> dict:
    from tdescope.app.events import HotspotWindow
    from tdescope.app.hotspots.perf_record import HotspotSampler

    pairs = 12 if quick else 24
    out: dict = {"sample_pairs": pairs, "sample_load_avg_1m_at_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "loop.c"), os.path.join(tmp, "loop")
        with open(src, "w") as f:
            f.write(_LOOP_C)
        subprocess.run(["cc", "-O2", "-g", "-fno-omit-frame-pointer", "-o", exe, src], check=True)
        n = 20_000_000
        proc = subprocess.Popen([exe, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        try:
            pid = int(proc.stdout.readline())

            def piece() -> float:
                proc.stdin.write("go\n")
                proc.stdin.flush()
                return float(proc.stdout.readline())

            # ~0.15 s of CPU per piece: ~75 samples at 499 Hz
            scale = 0.15e9 / piece()
            proc.stdin.close()
            proc.wait()
            n = max(1, int(n * scale))
            proc = subprocess.Popen([exe, str(n)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            pid = int(proc.stdout.readline())
            for name, kw in (MODES if modes is None else modes).items():
                windows: list[HotspotWindow] = []
                sampler = HotspotSampler(pid, window_s=0.5, on_window=windows.append, **kw)
                sampler.start()
                try:
                    piece()  # perf script loads the loop's tables
                    ratios = []
                    for p in range(pairs):
                        got = {}
                        for on in ((True, False) if p % 2 == 0 else (False, True)):
                            (sampler.resume if on else sampler.pause)()
                            got[on] = piece()
                        ratios.append(got[True] / got[False])
                finally:
                    sampler.stop()
                mid, lo, hi, cover = median_interval(ratios)
                stacks = [(s, c) for w in windows for s, c in w.stacks.items()]
                total = sum(c for _, c in stacks)
                out[f"sample_{name}_cpu_added_pct"] = round(100 * (mid - 1), 2)
                out[f"sample_{name}_cpu_added_pct_ci95"] = [round(100 * (lo - 1), 2), round(100 * (hi - 1), 2)]
                out[f"sample_{name}_coverage"] = round(cover, 3)
                out[f"sample_{name}_samples"] = total
                reach = sum(c for s, c in stacks if "main" in s.split(";"))
                out[f"sample_{name}_reach_main_pct"] = round(100 * reach / total, 1) if total else 0.0
                print(name, out[f"sample_{name}_cpu_added_pct"], out[f"sample_{name}_cpu_added_pct_ci95"],
                      file=sys.stderr, flush=True)
        finally:
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()
            proc.kill()
            proc.wait()
        if not together_only:
            out.update(_waits_cost(exe, tmp, pairs))
        out.update(_together(exe, tmp, pairs))
    out["sample_load_avg_1m"] = os.getloadavg()[0]
    return out


def _waits_cost(exe: str, tmp: str, pairs: int) -> dict:
    """The wait samplers on the syscall loop: the target's own CPU per 4 KiB pread, on vs off."""
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
    from tdescope.app.waits.os_sampler import OsWaitSampler

    data = os.path.join(tmp, "data")
    with open(data, "wb") as f:
        f.write(os.urandom(4096))
    n = 300_000  # ~0.1 s of the target's CPU per piece
    out: dict = {}
    proc = subprocess.Popen([exe, str(n), data], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        pid = int(proc.stdout.readline())

        def piece() -> float:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            return float(proc.stdout.readline())

        piece()
        modes = {"tracer": lambda: EbpfWaitTracer(pid).start(),
                 "proc20": lambda: _started(OsWaitSampler(pid, hz=20, on_sample=lambda s: None))}
        for name, start in modes.items():
            diffs, ratios, offs = [], [], []
            for p in range(pairs):
                got = {}
                for on in ((True, False) if p % 2 == 0 else (False, True)):
                    if on:
                        sampler = start()
                        try:
                            got[on] = piece()
                        finally:
                            sampler.stop()
                    else:
                        got[on] = piece()
                diffs.append((got[True] - got[False]) / n)
                ratios.append(got[True] / got[False])
                offs.append(got[False] / n)
            mid, lo, hi, cover = median_interval(diffs)
            out[f"sample_{name}_ns_per_syscall"] = round(mid, 1)
            out[f"sample_{name}_ns_per_syscall_ci95"] = [round(lo, 1), round(hi, 1)]
            out[f"sample_{name}_pread_ns_off"] = round(median_interval(offs)[0], 1)
            r = median_interval(ratios)
            out[f"sample_{name}_cpu_added_pct"] = round(100 * (r[0] - 1), 2)
            out[f"sample_{name}_cpu_added_pct_ci95"] = [round(100 * (r[1] - 1), 2), round(100 * (r[2] - 1), 2)]
            print(name, out[f"sample_{name}_ns_per_syscall"], out[f"sample_{name}_ns_per_syscall_ci95"],
                  file=sys.stderr, flush=True)
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    return out


def _together(exe: str, tmp: str, pairs: int) -> dict:
    """Hotspots and waits together, as the window runs them, on the arithmetic with ~50k preads per second
    of its CPU (the lab's A/B DML makes 42-51k): the target's own CPU, observation resumed vs paused."""
    from tdescope.app.observe.sampling import Observation

    data = os.path.join(tmp, "data")
    with open(data, "wb") as f:
        f.write(os.urandom(4096))
    out: dict = {}
    n, every = 20_000_000, 10_000  # measured: ~2 ns a step, so ~50k preads per CPU second
    proc = subprocess.Popen([exe, str(n), data, str(every)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)

    def piece() -> float:
        proc.stdin.write("go\n")
        proc.stdin.flush()
        return float(proc.stdout.readline())

    try:
        proc.stdout.readline()
        cpu = piece()
        out["sample_together_syscalls_per_cpu_s"] = round((n // every) / (cpu / 1e9))
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    n = max(1, int(n * 0.15e9 / cpu))
    proc = subprocess.Popen([exe, str(n), data, str(every)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        pid = int(proc.stdout.readline())
        for hz in (249, 499):
            obs = Observation(pid, lambda ev: None, frequency=hz, exact_waits="auto").start_blocking()
            try:
                piece()
                ratios = []
                for p in range(pairs):
                    got = {}
                    for on in ((True, False) if p % 2 == 0 else (False, True)):
                        (obs.resume if on else obs.pause)()
                        got[on] = piece()
                    ratios.append(got[True] / got[False])
                source = obs.exact_source
            finally:
                obs.stop()
            mid, lo, hi, _ = median_interval(ratios)
            out[f"sample_together_{hz}_cpu_added_pct"] = round(100 * (mid - 1), 2)
            out[f"sample_together_{hz}_cpu_added_pct_ci95"] = [round(100 * (lo - 1), 2), round(100 * (hi - 1), 2)]
            out[f"sample_together_{hz}_exact_source"] = source
            print("together", hz, out[f"sample_together_{hz}_cpu_added_pct"],
                  out[f"sample_together_{hz}_cpu_added_pct_ci95"], source, file=sys.stderr, flush=True)
    finally:
        proc.stdin.close()
        proc.kill()
        proc.wait()
    return out


def _started(sampler):
    sampler.start()
    return sampler


if __name__ == "__main__":
    # --waits-only: the wait samplers and the together part (no perf-only modes)
    # --together-only: that last part alone
    _alone = "--together-only" in sys.argv
    print(json.dumps(run(quick="--quick" in sys.argv, modes={} if "--waits-only" in sys.argv or _alone else None,
                         together_only=_alone), indent=2))
