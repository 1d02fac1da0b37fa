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
from collections.abc import Callable

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


class _Loop:
    """The compiled loop, running: ``piece()`` has it do one piece of work and returns its own CPU time, ns."""

    def __init__(self, exe: str, *args: object) -> None:
        self.proc = subprocess.Popen([exe, *map(str, args)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.pid = int(self.proc.stdout.readline())

    def piece(self) -> float:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def __enter__(self) -> "_Loop":
        return self

    def __exit__(self, *exc) -> None:
        if not self.proc.stdin.closed:
            self.proc.stdin.close()
        self.proc.kill()
        self.proc.wait()


def _paired(on: Callable[[], float], off: Callable[[], float], pairs: int) -> list[tuple[float, float]]:
    """``pairs`` pairs of pieces, one observed (``on``) and one not (``off``), each returning the piece's CPU
    time; the order alternated pair by pair. The one measuring loop of every part: ``[(on_ns, off_ns)]``."""
    out = []
    for p in range(pairs):
        got = {}
        for state in ((True, False) if p % 2 == 0 else (False, True)):
            got[state] = on() if state else off()
        out.append((got[True], got[False]))
    return out


def _then(first: Callable[[], object], piece: Callable[[], float]) -> Callable[[], float]:
    """``first()`` (resume or pause the observation), then the piece."""
    def both() -> float:
        first()
        return piece()
    return both


def _ratio_figures(prefix: str, pairs: list[tuple[float, float]]) -> dict:
    """The median of the paired on/off ratios as the CPU added, %, with its 95 % interval."""
    mid, lo, hi, cover = median_interval([on / off for on, off in pairs])
    return {f"{prefix}_cpu_added_pct": round(100 * (mid - 1), 2),
            f"{prefix}_cpu_added_pct_ci95": [round(100 * (lo - 1), 2), round(100 * (hi - 1), 2)],
            f"{prefix}_coverage": round(cover, 3)}


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
        with _Loop(exe, n) as loop:
            n = max(1, int(n * 0.15e9 / loop.piece()))  # ~0.15 s of CPU per piece: ~75 samples at 499 Hz
        with _Loop(exe, n) as loop:
            for name, kw in (MODES if modes is None else modes).items():
                windows: list[HotspotWindow] = []
                sampler = HotspotSampler(loop.pid, window_s=0.5, on_window=windows.append, **kw)
                sampler.start()
                try:
                    loop.piece()  # perf script loads the loop's tables
                    measured = _paired(_then(sampler.resume, loop.piece), _then(sampler.pause, loop.piece), pairs)
                finally:
                    sampler.stop()
                out.update(_ratio_figures(f"sample_{name}", measured))
                stacks = [(s, c) for w in windows for s, c in w.stacks.items()]
                total = sum(c for _, c in stacks)
                out[f"sample_{name}_samples"] = total
                reach = sum(c for s, c in stacks if "main" in s.split(";"))
                out[f"sample_{name}_reach_main_pct"] = round(100 * reach / total, 1) if total else 0.0
                print(name, out[f"sample_{name}_cpu_added_pct"], out[f"sample_{name}_cpu_added_pct_ci95"],
                      file=sys.stderr, flush=True)
        if not together_only:
            out.update(_waits_cost(exe, tmp, pairs))
        out.update(_together(exe, tmp, pairs))
    out["sample_load_avg_1m"] = os.getloadavg()[0]
    return out


def _data_file(tmp: str) -> str:
    data = os.path.join(tmp, "data")
    with open(data, "wb") as f:
        f.write(os.urandom(4096))
    return data


def _waits_cost(exe: str, tmp: str, pairs: int) -> dict:
    """The wait samplers on the syscall loop: the target's own CPU per 4 KiB pread, on vs off."""
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
    from tdescope.app.waits.os_sampler import OsWaitSampler

    n = 300_000  # ~0.1 s of the target's CPU per piece
    out: dict = {}
    with _Loop(exe, n, _data_file(tmp)) as loop:
        loop.piece()
        modes = {"tracer": lambda: EbpfWaitTracer(loop.pid).start(),
                 "proc20": lambda: _started(OsWaitSampler(loop.pid, hz=20, on_sample=lambda s: None))}
        for name, start in modes.items():
            def attached(start=start) -> float:  # the sampler attached for this piece alone
                sampler = start()
                try:
                    return loop.piece()
                finally:
                    sampler.stop()

            measured = _paired(attached, loop.piece, pairs)
            mid, lo, hi, _ = median_interval([(on - off) / n for on, off in measured])
            out[f"sample_{name}_ns_per_syscall"] = round(mid, 1)
            out[f"sample_{name}_ns_per_syscall_ci95"] = [round(lo, 1), round(hi, 1)]
            out[f"sample_{name}_pread_ns_off"] = round(median_interval([off / n for _, off in measured])[0], 1)
            out.update(_ratio_figures(f"sample_{name}", measured))
            print(name, out[f"sample_{name}_ns_per_syscall"], out[f"sample_{name}_ns_per_syscall_ci95"],
                  file=sys.stderr, flush=True)
    return out


def _together(exe: str, tmp: str, pairs: int) -> dict:
    """Hotspots and waits together, as the window runs them, on the arithmetic with ~50k preads per second
    of its CPU (the lab's A/B DML makes 42-51k): the target's own CPU, observation resumed vs paused."""
    from tdescope.app.observe.sampling import Observation

    data = _data_file(tmp)
    out: dict = {}
    n, every = 20_000_000, 10_000  # measured: ~2 ns a step, so ~50k preads per CPU second
    with _Loop(exe, n, data, every) as loop:
        cpu = loop.piece()
        out["sample_together_syscalls_per_cpu_s"] = round((n // every) / (cpu / 1e9))
    n = max(1, int(n * 0.15e9 / cpu))
    with _Loop(exe, n, data, every) as loop:
        for hz in (249, 499):
            obs = Observation(loop.pid, lambda ev: None, frequency=hz, exact_waits="auto").start_blocking()
            try:
                loop.piece()
                measured = _paired(_then(obs.resume, loop.piece), _then(obs.pause, loop.piece), pairs)
                source = obs.exact_source
            finally:
                obs.stop()
            out.update(_ratio_figures(f"sample_together_{hz}", measured))
            out[f"sample_together_{hz}_exact_source"] = source
            print("together", hz, out[f"sample_together_{hz}_cpu_added_pct"],
                  out[f"sample_together_{hz}_cpu_added_pct_ci95"], source, file=sys.stderr, flush=True)
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
