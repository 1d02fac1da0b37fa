"""What a running observation costs the lab's A/B DML, apart from what starting it costs.

A user starts observing once and then runs workload after workload under it; perf script loads the
symbols and unwind tables of every DSO the target touches when their first samples come, once per
observation. The old bench started an observation for each ~1 s run and so weighed that start in every
run, and compared runs tens of seconds apart on a machine whose load moves more than the effect.

:func:`run_windows` starts a mode's observers, lets a first DML run go by (its overhead against a run
with no observers is the start's cost), then runs the DML with the observers resumed and paused in
turn: pausing turns perf's events off in the kernel (perf script keeps what it loaded) and stops the
wait samplers, resuming turns them back on, so the two runs of a pair are seconds apart and a drifting
load weighs on both. The order inside a pair alternates. Figures are medians of the paired ratios
(on / off) with distribution-free 95 % intervals (:func:`median_interval`): the DML's elapsed time (its
own total, encrypted + plain), the lab worker's CPU seconds (``/proc/PID/stat``: the kernel's stack
copies and eBPF programs run on its account), and the observers' CPU per wall second (every process
this one started except the lab worker, plus this process's threads, which parse perf script's output).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Paired", "median_interval", "run_windows"]

_TICK = os.sysconf("SC_CLK_TCK")
#: Pause after the first run under new observers: perf script catches up with it before the pairs.
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
class Paired:
    """Per-mode series of :func:`run_windows`: the on and off sides of each pair, and of each start."""

    on_s: list[float] = field(default_factory=list)
    off_s: list[float] = field(default_factory=list)
    on_cpu_s: list[float] = field(default_factory=list)
    off_cpu_s: list[float] = field(default_factory=list)
    on_core: list[float] = field(default_factory=list)  # observers' CPU per wall second, on side
    off_core: list[float] = field(default_factory=list)
    first_on_s: list[float] = field(default_factory=list)  # first run after a start
    first_off_s: list[float] = field(default_factory=list)
    start_s: list[float] = field(default_factory=list)
    start_observer_cpu_s: list[float] = field(default_factory=list)
    samples_per_s: list[float] = field(default_factory=list)
    deep_pct: list[float] = field(default_factory=list)

    def figures(self, prefix: str) -> dict:
        """Medians of the paired ratios with their 95 % intervals, flat, ``PREFIX_*``."""
        out: dict = {}

        def put(name: str, values: list[float], scale: float, offset: float, digits: int) -> None:
            mid, lo, hi, cover = median_interval(values)
            out[f"{prefix}_{name}"] = round(scale * (mid - offset), digits)
            out[f"{prefix}_{name}_ci95"] = [round(scale * (lo - offset), digits), round(scale * (hi - offset), digits)]
            out[f"{prefix}_{name}_coverage"] = round(cover, 3)

        put("overhead_pct", [a / b for a, b in zip(self.on_s, self.off_s)], 100, 1, 2)
        put("cpu_ratio", [a / b for a, b in zip(self.on_cpu_s, self.off_cpu_s) if b], 1, 0, 3)
        put("observer_core_pct", [a - b for a, b in zip(self.on_core, self.off_core)], 100, 0, 1)
        put("first_run_overhead_pct", [a / b for a, b in zip(self.first_on_s, self.first_off_s)], 100, 1, 2)
        out[f"{prefix}_pairs"] = len(self.on_s)
        out[f"{prefix}_starts"] = len(self.start_s)
        out[f"{prefix}_start_s"] = round(statistics.median(self.start_s), 3)
        out[f"{prefix}_start_observer_cpu_s"] = round(statistics.median(self.start_observer_cpu_s), 2)
        out[f"{prefix}_samples_per_s"] = round(statistics.median(self.samples_per_s), 1) if self.samples_per_s else 0
        out[f"{prefix}_deep_pct"] = round(statistics.median(self.deep_pct), 1) if self.deep_pct else 0
        out[f"{prefix}_dml_on_s"] = round(statistics.median(self.on_s), 3)
        out[f"{prefix}_dml_off_s"] = round(statistics.median(self.off_s), 3)
        return out


def run_windows(modes: dict[str, Callable[[int, Callable], object]], blocks: int, pairs: int, groups: int,
                progress: Callable[[str], None] | None = None) -> dict[str, Paired]:
    """On/off windows of a running observation, per mode; each mode's series.

    Per mode, ``blocks`` times: a start pair (a DML run with no observers, and the observers started
    followed by the first DML run under them; which goes first alternates block by block), a pause of
    :data:`SETTLE_S`, then ``pairs`` pairs of DML runs with the observers resumed and paused in turn
    (order alternated pair by pair; pausing turns perf's events off and stops the wait samplers, see
    :meth:`~tdescope.app.observe.sampling.Observation.pause`), then stop. A mode's object needs
    ``pause()``, ``resume()`` and ``stop()``. The two runs of a pair are seconds apart, so a load that
    drifts over minutes weighs on both sides alike.
    """
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.events import HotspotWindow
    from tdescope.plugins.sqlcipher.lab import LabSession

    lab = LabSession()
    out = {m: Paired() for m in modes}
    me = os.getpid()
    try:
        pid = lab.server_pid()
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")
        params = {**workload.params, "groups": groups}
        workload.run(params, WorkloadControl())  # warm-up: page cache, the databases' files

        def observers_cpu() -> float:
            return _proc_cpu(me) + sum(_proc_cpu(p) for p in _descendants(me) - {pid} - _descendants(pid))

        def dml() -> tuple[float, float, float]:
            """Elapsed (the DML's own), the worker's CPU seconds, the observers' CPU per wall second."""
            c0, o0, w0 = _proc_cpu(pid), observers_cpu(), time.perf_counter()
            result = workload.run(params, WorkloadControl())
            wall = time.perf_counter() - w0
            return (result.total("encrypted") + result.total("plain"), _proc_cpu(pid) - c0,
                    (observers_cpu() - o0) / wall)

        for name, starter in modes.items():
            s = out[name]
            windows: list[HotspotWindow] = []
            sink = lambda ev: windows.append(ev) if isinstance(ev, HotspotWindow) else None  # noqa: E731
            for b in range(blocks):
                observers = None

                def start() -> None:
                    nonlocal observers
                    o0, t0 = observers_cpu(), time.perf_counter()
                    observers = starter(pid, sink)
                    s.start_s.append(time.perf_counter() - t0)
                    s.first_on_s.append(dml()[0])
                    s.start_observer_cpu_s.append(observers_cpu() - o0)

                try:
                    if b % 2 == 0:
                        s.first_off_s.append(dml()[0])
                        start()
                    else:
                        start()
                        observers.pause()
                        s.first_off_s.append(dml()[0])
                        observers.resume()
                    time.sleep(SETTLE_S)
                    for p in range(pairs):
                        for on in ((True, False) if (p + b) % 2 == 0 else (False, True)):
                            (observers.resume if on else observers.pause)()
                            if on:
                                del windows[:]
                            run_s, cpu_s, core = dml()
                            if on:
                                s.on_s.append(run_s)
                                s.on_cpu_s.append(cpu_s)
                                s.on_core.append(core)
                                stacks = [(st, n) for w in windows for st, n in w.stacks.items()]
                                total = sum(n for _, n in stacks)
                                if total:
                                    s.samples_per_s.append(total / run_s)
                                    s.deep_pct.append(100 * sum(n for st, n in stacks if st.count(";") >= 3) / total)
                            else:
                                s.off_s.append(run_s)
                                s.off_cpu_s.append(cpu_s)
                                s.off_core.append(core)
                finally:
                    if observers is not None:
                        observers.stop()
                if progress is not None:
                    progress(f"{name}: block {b + 1}/{blocks}, load {os.getloadavg()[0]:.1f}")
            if progress is not None:  # each mode's figures as soon as they are known (a long run may be cut)
                progress(json.dumps(s.figures(name)))
    finally:
        lab.close()
    return out
