"""What each way of observing costs the lab's A/B DML: rate, stack copy, hotspots and waits apart.

Issue #29 asks for hotspots and waits together at ≤ 3 % with unwound stacks kept. The modes: today's
default (DWARF, 16 KiB of user stack per sample, 499 Hz), smaller stack copies (8 KiB, 4 KiB), lower
rates (199 Hz, 99 Hz), frame pointers (``fp_499``: ``perf record -g``; the sqlcipher3 wheel, libpython and
Debian's libc have none, ``bench_callgraph`` measured 74 % ``[unknown]`` callers, and an eBPF stack map
unwinds with frame pointers too, so this mode is the floor of what perf's own sampling costs) and waits
alone. One lab worker; each round runs every mode once, the order rotated round by round so drift hits
every mode alike; a mode's figure is the median of its ratios to the same round's ``off`` run:

- ``overhead_pct``: the DML's elapsed (its own total, encrypted + plain), on vs off;
- ``cpu_ratio``: the lab worker's CPU seconds, on vs off (less sensitive to other load);
- ``samples_per_s`` and ``deep_pct``: samples the hotspot windows held per second of the run, and
  the share whose stack is more than 3 frames deep (unwinding still works at that stack size);
- ``observer_core_pct``: CPU of the observers (perf record, perf script, the /proc sampler) per second
  of wall time, % of one core.

Run alone: ``python -m bench.bench_observe_choices [--quick] [--modes=a,b]`` (JSON on stdout; ``off`` is
always run).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time

from bench._report import goal

#: mode -> Observation keywords (None: observation off).
MODES: dict[str, dict | None] = {
    "off": None,
    "dwarf16k_499": {"frequency": 499, "stack_bytes": 16384},
    "dwarf8k_199": {"frequency": 199, "stack_bytes": 8192},
    "dwarf8k_99": {"frequency": 99, "stack_bytes": 8192},
    "dwarf4k_499": {"frequency": 499, "stack_bytes": 4096},
    "fp_499": {"frequency": 499, "callgraph": "fp"},
    "dwarf16k_499_w2": {"frequency": 499, "stack_bytes": 16384, "window_s": 2.0},
    "waits_only": {"hotspots": False},
}
for _m in MODES:
    if MODES[_m] is not None:
        goal(f"choices_{_m}_overhead_pct", f"{_m}: A/B DML elapsed added, % (median of paired ratios)")
        goal(f"choices_{_m}_cpu_ratio", f"{_m}: lab worker CPU on / off (median of paired ratios)")
        goal(f"choices_{_m}_samples_per_s", f"{_m}: hotspot samples per second of run")
        goal(f"choices_{_m}_deep_pct", f"{_m}: samples with more than 3 frames, %")
        goal(f"choices_{_m}_observer_core_pct", f"{_m}: CPU of perf record + perf script + sampler, % of a core")


def _interval(values: list[float]) -> list[float]:
    """The range between the 2nd lowest and 2nd highest value (about a 90 % interval of the median at n ≥ 8)."""
    v = sorted(values)
    return [round(v[1], 3), round(v[-2], 3)] if len(v) >= 4 else [round(v[0], 3), round(v[-1], 3)]


def run(quick: bool, only: list[str] | None = None) -> dict:
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.events import HotspotWindow
    from tdescope.app.observe.sampling import Observation
    from tdescope.plugins.sqlcipher.lab import LabSession

    reps = 6 if quick else 10
    load0 = os.getloadavg()[0]
    lab = LabSession()
    try:
        pid = lab.server_pid()
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")
        params = {**workload.params, "groups": 48}
        workload.run(params, WorkloadControl())  # warm-up

        def target_cpu() -> float:
            fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

        def own_cpu() -> float:
            # perf record / perf script are our children; the /proc sampler is a thread of ours
            a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
            return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime

        observer: dict[str, list[float]] = {m: [] for m in MODES}
        elapsed: dict[str, list[float]] = {m: [] for m in MODES}
        cpu: dict[str, list[float]] = {m: [] for m in MODES}
        samples: dict[str, list[float]] = {m: [] for m in MODES}
        deep: dict[str, list[float]] = {m: [] for m in MODES}

        def once(mode: str) -> None:
            windows: list[HotspotWindow] = []
            obs = None
            if MODES[mode] is not None:
                keep = lambda ev: windows.append(ev) if isinstance(ev, HotspotWindow) else None  # noqa: E731
                obs = Observation(pid, keep, **MODES[mode]).start_blocking()
                time.sleep(0.3)  # sampling before the run begins, as in the GUI
            c0, o0, w0 = target_cpu(), own_cpu(), time.perf_counter()
            try:
                result = workload.run(params, WorkloadControl())
            finally:
                if obs is not None:
                    obs.stop()
            cpu[mode].append(target_cpu() - c0)
            observer[mode].append((own_cpu() - o0) / (time.perf_counter() - w0))
            run_s = result.total("encrypted") + result.total("plain")
            elapsed[mode].append(run_s)
            counts = [n for w in windows for n in w.stacks.values()]
            deep_n = sum(n for w in windows for stack, n in w.stacks.items() if stack.count(";") >= 3)
            samples[mode].append(sum(counts) / run_s if run_s else 0.0)
            deep[mode].append(100 * deep_n / sum(counts) if counts else 0.0)

        names = [m for m in MODES if only is None or m == "off" or m in only]
        for r in range(reps):
            for m in names[r % len(names):] + names[: r % len(names)]:
                once(m)
    finally:
        lab.close()
    out: dict = {"choices_rounds": reps, "choices_off_s": round(statistics.median(elapsed["off"]), 3),
                 "choices_load_avg_1m": os.getloadavg()[0],
                 "choices_load_avg_1m_at_start": load0}
    for m in names:
        if MODES[m] is None:
            continue
        ratios = [a / b for a, b in zip(elapsed[m], elapsed["off"])]
        cpu_ratios = [a / b for a, b in zip(cpu[m], cpu["off"]) if b]
        out[f"choices_{m}_overhead_pct"] = round(100 * (statistics.median(ratios) - 1), 2)
        out[f"choices_{m}_overhead_pct_interval"] = [round(100 * (x - 1), 2) for x in _interval(ratios)]
        out[f"choices_{m}_cpu_ratio"] = round(statistics.median(cpu_ratios), 3)
        out[f"choices_{m}_cpu_ratio_interval"] = _interval(cpu_ratios)
        out[f"choices_{m}_samples_per_s"] = round(statistics.median(samples[m]), 1)
        out[f"choices_{m}_deep_pct"] = round(statistics.median(deep[m]), 1)
        out[f"choices_{m}_observer_core_pct"] = round(100 * statistics.median(observer[m]), 1)
    return out


if __name__ == "__main__":
    _only = next((a.split("=", 1)[1].split(",") for a in sys.argv if a.startswith("--modes=")), None)
    print(json.dumps(run(quick="--quick" in sys.argv, only=_only), indent=2))
