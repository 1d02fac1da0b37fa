"""What each way of observing costs the lab's A/B DML in steady state: unwinder, stack copy, rate, waits.

Issue #29 asks for hotspots and waits together at ≤ 3 % with unwound stacks kept. Every mode runs
under the method of :mod:`bench._steady` (observers started, a first DML run let go by, the second
timed; rounds alternate the order, ratios paired with the same round's ``off``). The modes:

- ``all_*``: hotspots + waits as the window runs them (perf, the /proc sampler at 20 Hz, the eBPF wait
  tracer), with perf unwinding by DWARF from a 16, 8 or 4 KiB stack copy, or by frame pointers
  (``perf record -g``; the sqlcipher3 wheel, libpython and Debian's libc have none), at 499 or 199 Hz;
- ``hot_dwarf16k_499``: hotspots alone; ``waits``: the /proc sampler and the eBPF tracer alone;
- ``proc20`` / ``proc5``: the /proc sampler alone at 20 and 5 Hz; ``tracer``: the eBPF wait tracer alone
  (the issue's "tracer on vs off", goal ≤ 3 %).

Figures per mode: elapsed added (%), lab worker CPU on/off, observers' CPU (% of a core, this process's
parsing included), samples per second and the share of stacks deeper than 3 frames (unwinding kept), the
start (s) and the first run's overhead; medians with 95 % intervals.

Run alone: ``python -m bench.bench_observe_choices [--quick] [--modes=a,b] [--rounds=N]`` (JSON on stdout;
``off`` is always run).
"""

from __future__ import annotations

import json
import os
import statistics
import sys

from bench._report import goal
from bench._steady import compare, run_rounds

#: mode -> Observation keywords, or "tracer" (the eBPF wait tracer alone), or None (observation off).
MODES: dict[str, dict | str | None] = {
    "off": None,
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
    if MODES[_m] is not None:
        goal(f"choices_{_m}_overhead_pct", f"{_m}: A/B DML elapsed added in steady state, % (median, 95 % interval)")
        goal(f"choices_{_m}_cpu_ratio", f"{_m}: lab worker CPU on / off (median of paired ratios)")
        goal(f"choices_{_m}_observer_core_pct", f"{_m}: observers' CPU, % of a core (off's own baseline included)")
        goal(f"choices_{_m}_samples_per_s", f"{_m}: hotspot samples per second of run")
        goal(f"choices_{_m}_deep_pct", f"{_m}: samples with more than 3 frames, %")


def _starter(spec):
    from tdescope.app.observe.sampling import Observation
    from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer

    if spec is None:
        return None
    if spec == "tracer":
        return lambda pid, sink: EbpfWaitTracer(pid).start()
    kw = {"exact_waits": "auto", **spec}
    return lambda pid, sink: Observation(pid, sink, **kw).start_blocking()


def run(quick: bool, only: list[str] | None = None, rounds: int | None = None) -> dict:
    rounds = rounds or (6 if quick else 10)
    load0 = os.getloadavg()[0]
    names = [m for m in MODES if only is None or m == "off" or m in only]
    series = run_rounds({m: _starter(MODES[m]) for m in names}, rounds, groups=24,
                        progress=lambda m: print(m, file=sys.stderr, flush=True))
    out: dict = {"choices_rounds": rounds, "choices_off_s": round(statistics.median(series["off"].steady_s), 3),
                 "choices_off_observer_core_pct": round(100 * statistics.median(series["off"].observer_core), 1),
                 "choices_load_avg_1m_at_start": load0, "choices_load_avg_1m": os.getloadavg()[0]}
    for m in names:
        if MODES[m] is not None:
            out.update(compare(series[m], series["off"]).figures(f"choices_{m}"))
    out["choices_all_steady_s"] = {m: [round(t, 3) for t in s.steady_s] for m, s in series.items()}
    out["choices_all_cpu_s"] = {m: [round(t, 2) for t in s.steady_cpu_s] for m, s in series.items()}
    return out


if __name__ == "__main__":
    _only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--modes=")), None)
    _rounds = next((int(a.split("=", 1)[1]) for a in sys.argv if a.startswith("--rounds=")), None)
    print(json.dumps(run(quick="--quick" in sys.argv, only=_only, rounds=_rounds), indent=2))
