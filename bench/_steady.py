"""What a running observation costs the lab's A/B DML, apart from what starting it costs.

A user starts observing once and then runs workload after workload under it; perf script loads the
symbols and unwind tables of every DSO the target touches when their first samples come, once per
observation. The old bench started an observation for each ~1 s run and so weighed that start in
every run. Here each round runs every mode once (order alternated round by round, so a load that
drifts hits every mode alike), and a mode's turn is:

1. start its observers (``off``: none), timed: the **start** figure;
2. the DML once, the **first run** (the start's cost leaks into it: unwind tables, maps);
3. a short pause, the same for every mode, so perf script has drained what the first run left;
4. the DML again, the **steady run**: what a user pays while an observation runs;
5. stop.

Ratios are paired within a round (mode / ``off``); a figure is the median of the round's ratios with a
distribution-free 95 % interval (:func:`median_interval`). Besides the DML's elapsed time (its own total,
encrypted + plain), the lab worker's CPU seconds (``/proc/PID/stat``: the kernel's stack copies and eBPF
programs run on its account) and the observers' CPU (every process this one started except the lab
worker, plus this process's own threads, which parse perf script's output), per second of the steady
run, in % of one core.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["ModeFigures", "Steady", "median_interval", "run_rounds"]

#: A mode: starts its observers on a pid, with a sink for their events; returns what stops them
#: (None: the ``off`` mode).
Starter = Callable[[int, Callable], object] | None

_TICK = os.sysconf("SC_CLK_TCK")
#: Pause between the first and the steady run (both modes): perf script catches up with the first run.
SETTLE_S = 0.5


def median_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float, float]:
    """The median of ``values`` and an interval of at least ``level`` coverage for it, and that coverage.

    Order statistics: the k-th lowest and k-th highest values bound the median with probability
    1 - 2·P(B < k), B ~ Binomial(n, 1/2), whatever the distribution; k is the largest that keeps this
    at or above ``level`` (n = 10: 2nd lowest to 2nd highest, 97.9 %; n = 12: 3rd, 96.1 %). Below
    n = 6 no interval reaches 95 %: the range is returned with its coverage.
    """
    v = sorted(values)
    n = len(v)
    cdf = 0.0  # P(B <= j - 1)
    k = 1
    for j in range(1, n // 2 + 1):
        cdf += math.comb(n, j - 1) / 2**n
        if 1 - 2 * cdf < level:
            break
        k = j
    below = sum(math.comb(n, i) for i in range(k)) / 2**n
    return statistics.median(v), v[k - 1], v[n - k], 1 - 2 * below


def _proc_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` (all its threads, live and ended), 0 when it has gone."""
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / _TICK


def _descendants(pid: int) -> set[int]:
    out: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{p}/task")
        except OSError:
            continue
        for t in tasks:
            try:
                kids = open(f"/proc/{p}/task/{t}/children").read().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


@dataclass
class Steady:
    """Per-mode series of one run of :func:`run_rounds` (one entry per round)."""

    first_s: list[float] = field(default_factory=list)
    steady_s: list[float] = field(default_factory=list)
    steady_cpu_s: list[float] = field(default_factory=list)
    observer_core: list[float] = field(default_factory=list)  # steady run, share of one core
    start_s: list[float] = field(default_factory=list)
    start_observer_cpu_s: list[float] = field(default_factory=list)  # start + first run, CPU seconds
    samples_per_s: list[float] = field(default_factory=list)
    deep_pct: list[float] = field(default_factory=list)


@dataclass
class ModeFigures:
    """One mode against ``off``: medians of the paired ratios with their 95 % intervals."""

    overhead_pct: tuple[float, float, float]
    cpu_ratio: tuple[float, float, float]
    first_run_overhead_pct: tuple[float, float, float]
    observer_core_pct: tuple[float, float, float]
    start_s: float
    start_observer_cpu_s: float
    samples_per_s: float
    deep_pct: float
    coverage: float

    def figures(self, prefix: str) -> dict:
        """Flat JSON figures, ``PREFIX_overhead_pct`` and ``PREFIX_overhead_pct_ci95`` and so on."""
        out: dict = {}
        for name in ("overhead_pct", "cpu_ratio", "first_run_overhead_pct", "observer_core_pct"):
            mid, lo, hi = getattr(self, name)
            digits = 3 if name == "cpu_ratio" else 2
            out[f"{prefix}_{name}"] = round(mid, digits)
            out[f"{prefix}_{name}_ci95"] = [round(lo, digits), round(hi, digits)]
        out[f"{prefix}_start_s"] = round(self.start_s, 3)
        out[f"{prefix}_start_observer_cpu_s"] = round(self.start_observer_cpu_s, 2)
        out[f"{prefix}_samples_per_s"] = round(self.samples_per_s, 1)
        out[f"{prefix}_deep_pct"] = round(self.deep_pct, 1)
        out[f"{prefix}_interval_coverage"] = round(self.coverage, 3)
        return out


def compare(mode: Steady, off: Steady) -> ModeFigures:
    """``mode`` against ``off``, round by round."""

    def pct(a: list[float], b: list[float]) -> tuple[float, float, float]:
        mid, lo, hi, _ = median_interval([x / y for x, y in zip(a, b) if y])
        return 100 * (mid - 1), 100 * (lo - 1), 100 * (hi - 1)

    cpu = median_interval([x / y for x, y in zip(mode.steady_cpu_s, off.steady_cpu_s) if y])
    core = median_interval([100 * c for c in mode.observer_core])
    return ModeFigures(
        overhead_pct=pct(mode.steady_s, off.steady_s), cpu_ratio=cpu[:3],
        first_run_overhead_pct=pct(mode.first_s, off.first_s), observer_core_pct=core[:3],
        start_s=statistics.median(mode.start_s), start_observer_cpu_s=statistics.median(mode.start_observer_cpu_s),
        samples_per_s=statistics.median(mode.samples_per_s), deep_pct=statistics.median(mode.deep_pct),
        coverage=cpu[3],
    )


def run_rounds(modes: dict[str, Starter], rounds: int, groups: int,
               progress: Callable[[str], None] | None = None) -> dict[str, Steady]:
    """Run ``rounds`` rounds of every mode on one SQLCipher lab worker; each mode's series.

    ``modes`` must hold ``"off"`` (None). Round r runs the modes in the order of ``modes`` rotated by r.
    """
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.events import HotspotWindow
    from tdescope.plugins.sqlcipher.lab import LabSession

    lab = LabSession()
    series = {m: Steady() for m in modes}
    me = os.getpid()
    try:
        pid = lab.server_pid()
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")
        params = {**workload.params, "groups": groups}
        workload.run(params, WorkloadControl())  # warm-up: page cache, the databases' files

        def observers_cpu() -> float:
            return _proc_cpu(me) + sum(_proc_cpu(p) for p in _descendants(me) - {pid} - _descendants(pid))

        def dml() -> float:
            result = workload.run(params, WorkloadControl())
            return result.total("encrypted") + result.total("plain")

        def turn(name: str) -> None:
            s = series[name]
            windows: list[HotspotWindow] = []
            sink = lambda ev: windows.append(ev) if isinstance(ev, HotspotWindow) else None  # noqa: E731
            o0 = observers_cpu()
            t0 = time.perf_counter()
            observers = modes[name](pid, sink) if modes[name] is not None else None
            s.start_s.append(time.perf_counter() - t0)
            try:
                s.first_s.append(dml())
                time.sleep(SETTLE_S)
                s.start_observer_cpu_s.append(observers_cpu() - o0)
                del windows[:]
                c0, o1, w0 = _proc_cpu(pid), observers_cpu(), time.perf_counter()
                run_s = dml()
                wall = time.perf_counter() - w0
                s.steady_cpu_s.append(_proc_cpu(pid) - c0)
                s.observer_core.append((observers_cpu() - o1) / wall)
                s.steady_s.append(run_s)
            finally:
                if observers is not None:
                    observers.stop()
            stacks = [(stack, n) for w in windows for stack, n in w.stacks.items()]
            total = sum(n for _, n in stacks)
            s.samples_per_s.append(total / run_s if run_s else 0.0)
            s.deep_pct.append(100 * sum(n for st, n in stacks if st.count(";") >= 3) / total if total else 0.0)

        names = list(modes)
        for r in range(rounds):
            order = names[r % len(names):] + names[: r % len(names)]
            if r % 2:
                order.reverse()  # ABBA: neither mode always follows the other
            for name in order:
                turn(name)
            if progress is not None:
                progress(f"round {r + 1}/{rounds}: load {os.getloadavg()[0]:.1f}")
    finally:
        lab.close()
    return series
