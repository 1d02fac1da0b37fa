"""What each way of observing costs the lab's A/B DML in steady state: unwinder, stack copy, rate, waits.

Issue #29 asks for hotspots and waits together at ≤ 3 % with unwound stacks kept. Every mode runs
under :func:`bench._steady.run_windows`: its observers started, a first DML run let go by, then DML runs
with the observers resumed and paused in turn, paired seconds apart (two starts per mode). The modes:

- ``all_*``: hotspots + waits as the window runs them (perf, the /proc sampler at 20 Hz, the eBPF wait
  tracer), with perf unwinding by DWARF from a 16, 8 or 4 KiB stack copy, or by frame pointers
  (``perf record -g``; the sqlcipher3 wheel, libpython and Debian's libc have none), at 499 or 199 Hz;
- ``hot_dwarf16k_499``: hotspots alone; ``waits``: the /proc sampler and the eBPF tracer alone;
- ``proc20`` / ``proc5``: the /proc sampler alone at 20 and 5 Hz; ``tracer``: the eBPF wait tracer alone
  (the issue's "tracer on vs off", goal ≤ 3 %).

Figures per mode: elapsed added (%), lab worker CPU on/off, observers' CPU (% of a core, this process's
parsing included), samples per second and the share of stacks deeper than 3 frames (unwinding kept), the
start (s) and the first run's overhead; medians with 95 % intervals.

Run alone: ``python -m bench.bench_observe_choices [--quick] [--modes=a,b] [--blocks=N] [--pairs=N]``
(JSON on stdout).
"""

from __future__ import annotations

import json
import os
import sys

from bench._report import goal
from bench._steady import run_windows

#: mode -> Observation keywords, or "tracer" (the eBPF wait tracer alone); each mode's off side is paused.
MODES: dict[str, dict | str] = {
    "all_dwarf16k_499": {"frequency": 499, "stack_bytes": 16384},
    "all_dwarf8k_499": {"frequency": 499, "stack_bytes": 8192},
    "all_dwarf4k_499": {"frequency": 499, "stack_bytes": 4096},
    "all_fp_499": {"frequency": 499, "callgraph": "fp"},
    "all_dwarf16k_199": {"frequency": 199, "stack_bytes": 16384},
    "hot_dwarf16k_499": {"frequency": 499, "stack_bytes": 16384, "waits": False},
    "waits": {"hotspots": False},
    "proc20": {"hotspots": False, "exact_waits": "proc"},
    "proc5": {"hotspots": False, "exact_waits": "proc", "wait_hz": 5.0},
    "tracer": "tracer",
}
for _m in MODES:
    goal(f"choices_{_m}_overhead_pct", f"{_m}: A/B DML elapsed added in steady state, % (median, 95 % interval)")
    goal(f"choices_{_m}_cpu_ratio", f"{_m}: lab worker CPU on / off (median of paired ratios)")
    goal(f"choices_{_m}_observer_core_pct", f"{_m}: observers' CPU, on minus off, % of a core")
    goal(f"choices_{_m}_first_run_overhead_pct", f"{_m}: the first DML run after a start vs none, %")
    goal(f"choices_{_m}_samples_per_s", f"{_m}: hotspot samples per second of run")
    goal(f"choices_{_m}_deep_pct", f"{_m}: samples with more than 3 frames, %")


class _Tracer:
    """The eBPF wait tracer alone as a mode of :func:`run_windows`: pausing detaches it, resuming loads it again."""

    def __init__(self, pid: int) -> None:
        from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer

        self._new = lambda: EbpfWaitTracer(pid).start()
        self.tracer = self._new()

    def pause(self) -> None:
        if self.tracer is not None:
            self.tracer.stop()
            self.tracer = None

    def resume(self) -> None:
        if self.tracer is None:
            self.tracer = self._new()

    stop = pause


def _starter(spec):
    from tdescope.app.observe.sampling import Observation

    if spec == "tracer":
        return lambda pid, sink: _Tracer(pid)
    kw = {"exact_waits": "auto", **spec}
    return lambda pid, sink: Observation(pid, sink, **kw).start_blocking()


def run(quick: bool, only: list[str] | None = None, blocks: int | None = None, pairs: int | None = None) -> dict:
    blocks = blocks or 2
    pairs = pairs or (4 if quick else 6)
    load0 = os.getloadavg()[0]
    names = [m for m in MODES if MODES[m] is not None and (only is None or m in only)]
    series = run_windows({m: _starter(MODES[m]) for m in names}, blocks, pairs, groups=16,
                         progress=lambda m: print(m, file=sys.stderr, flush=True))
    out: dict = {"choices_blocks": blocks, "choices_pairs_per_block": pairs,
                 "choices_load_avg_1m_at_start": load0, "choices_load_avg_1m": os.getloadavg()[0]}
    for m in names:
        out.update(series[m].figures(f"choices_{m}"))
    out["choices_all_s"] = {m: {"on": [round(t, 3) for t in s.on_s], "off": [round(t, 3) for t in s.off_s]}
                            for m, s in series.items()}
    out["choices_all_cpu_s"] = {m: {"on": [round(t, 2) for t in s.on_cpu_s], "off": [round(t, 2) for t in s.off_cpu_s]}
                                for m, s in series.items()}
    return out


if __name__ == "__main__":
    _only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--modes=")), None)
    _blocks = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--blocks=")), None)
    _pairs = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--pairs=")), None)
    print(json.dumps(run(quick="--quick" in sys.argv, only=_only, blocks=_blocks, pairs=_pairs), indent=2))
