"""What unwinding user stacks costs: perf's call-graph modes on a busy SQLCipher target.

The target is ``fast_target.py`` (one thread scanning an encrypted table flat out, no Python per
row); its rounds per second are the throughput. Phases of ``PHASE_S`` seconds alternate between no
perf at all and the real :class:`~tdescope.app.hotspots.perf_record.HotspotSampler` (1 s windows,
cut from one long-lived ``perf script`` as the GUI and ``top`` read them) in each mode below, the order rotated
every round so drift hits every mode alike. Per mode, medians over the rounds:

- ``overhead_pct``: throughput lost against the no-perf phase of the same round (elapsed: noisy on
  a shared machine);
- ``cpu_per_round_pct``: the target's own CPU time per round (user + system: the kernel's copy of
  the user stack at each sample is charged to it), more than in the no-perf phase, in % (less
  sensitive to other load than elapsed time);
- ``record_core_pct`` / ``script_core_pct``: CPU of ``perf record`` and of ``perf script`` (which
  unwinds DWARF stacks) as % of one core;
- ``mb_per_s``: what ``perf record`` wrote into the pipe to ``perf script``, per second;
- ``samples_5s``: samples a 5 s run gets;
- ``unknown_pct``: samples with an ``[unknown]`` frame in their stack;
- ``complete_pct``: samples whose stack reaches the process's entry (``_start``/``main``);
- ``cipher_callers_pct``: samples with a crypto leaf (AES, SHA-512) whose stack holds
  ``sqlcipher_page_cipher``, i.e. the cipher's caller is seen; ``aes_callers_pct`` and
  ``sha512_callers_pct`` the same for each leaf (OpenSSL's AVX2 SHA-512 keeps the saved stack
  pointer just below ``rsp``, which perf's copy of the stack does not hold: DWARF cannot unwind it);
- ``vdbe_total_over_self``: ``sqlite3VdbeExec`` total % ÷ self % (1.0 when callers are lost).

A second part runs the SQLCipher lab's A/B DML (I/O, fsync, Python between statements: not a tight
loop) with no perf and with perf in each of ``LAB_MODES``, rotating, and reports the lab worker's own
CPU time per run against no perf (``callgraph_lab_<mode>_cpu_ratio``, median of paired ratios).

Run alone: ``python -m bench.bench_callgraph [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._report import goal
from bench.bench_armed import _Rounds

FAST = Path(__file__).with_name("fast_target.py")
PHASE_S = 5.0
#: name -> (call graph, stack bytes, Hz). fp@99 was the default before issue #15.
MODES = {
    "fp_99": ("fp", 0, 99),
    "fp_499": ("fp", 0, 499),
    "dwarf8k_499": ("dwarf", 8192, 499),
    "dwarf16k_499": ("dwarf", 16384, 499),
    "dwarf16k_999": ("dwarf", 16384, 999),
}
LAB_MODES = ("fp_99", "fp_499", "dwarf16k_499")
_ENTRY = {"_start", "main", "__libc_start_main", "__libc_start_call_main", "Py_BytesMain"}

for _m in MODES:
    goal(f"callgraph_{_m}_overhead_pct", f"{_m}: target throughput lost to perf, %")
    goal(f"callgraph_{_m}_cpu_per_round_pct", f"{_m}: target CPU time per round added by perf, %")
    goal(f"callgraph_{_m}_perf_core_pct", f"{_m}: perf record + perf script CPU, % of one core")
    goal(f"callgraph_{_m}_samples_5s", f"{_m}: samples in a 5 s run of a busy target")
    goal(f"callgraph_{_m}_cipher_callers_pct", f"{_m}: crypto-leaf samples whose stack shows sqlcipher_page_cipher, %")
for _m in LAB_MODES:
    goal(f"callgraph_lab_{_m}_cpu_ratio", f"{_m}: the lab worker's CPU per A/B DML run, over no perf")
goal("callgraph_dwarf16k_499_samples_5s", "default mode: samples in a 5 s run of a busy target", "≥ 1000",
     lambda v: v >= 1000)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _proc_cpu(pid: int) -> float:
    try:
        fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _quality(windows) -> dict:
    from tdescope.app.hotspots.crypto import is_crypto
    from tdescope.app.hotspots.profile import Profile

    n = unknown = complete = crypto = callers = 0
    leaf: dict[str, list[int]] = {"aes": [0, 0], "sha512": [0, 0]}
    for w in windows:
        for stack, count in w.stacks.items():
            names = stack.split(";")
            n += count
            unknown += count * ("[unknown]" in names)
            complete += count * (names[0] in _ENTRY or any(x in _ENTRY for x in names[:3]))
            if is_crypto(names[-1]):
                crypto += count
                callers += count * ("sqlcipher_page_cipher" in names)
                kind = "aes" if names[-1].startswith("aesni") else "sha512" if names[-1].startswith("sha512") else ""
                if kind:
                    leaf[kind][0] += count
                    leaf[kind][1] += count * ("sqlcipher_page_cipher" in names)
    prof = Profile.from_windows(windows)
    vdbe = prof.stat("sqlite3VdbeExec")
    return {"unknown_pct": 100 * unknown / max(n, 1), "complete_pct": 100 * complete / max(n, 1),
            "cipher_callers_pct": 100 * callers / max(crypto, 1),
            "aes_callers_pct": 100 * leaf["aes"][1] / max(leaf["aes"][0], 1),
            "sha512_callers_pct": 100 * leaf["sha512"][1] / max(leaf["sha512"][0], 1),
            "vdbe_total_over_self": vdbe.total_samples / max(vdbe.self_samples, 1),
            "vdbe_self_pct": vdbe.self_pct, "vdbe_total_pct": vdbe.total_pct}


def _phase(target: _Rounds, mode: str | None) -> dict:
    from tdescope.app.hotspots.perf_record import HotspotSampler

    sampler, windows = None, []
    if mode is not None:
        graph, stack, hz = MODES[mode]
        sampler = HotspotSampler(target.pid, frequency=hz, window_s=1.0, callgraph=graph,
                                 stack_bytes=stack or 16384, on_window=windows.append)
        c0 = _children_cpu()
        sampler.start()
        time.sleep(0.3)  # perf is sampling before the measured stretch begins
    cpu0, t0 = _proc_cpu(target.pid), time.time()
    time.sleep(PHASE_S)
    cpu1, t1 = _proc_cpu(target.pid), time.time()
    rounds = target.progress(t1) - target.progress(t0)
    out = {"rate": rounds / (t1 - t0), "cpu_per_round": (cpu1 - cpu0) / rounds}
    if sampler is not None:
        record_pid = sampler.child_pids[0]
        record_cpu = _proc_cpu(record_pid)  # perf's own CPU and bytes, read before it is killed
        written = _written(record_pid)
        span = time.time() - t0 + 0.3
        sampler.stop()
        everything = _children_cpu() - c0  # perf record (reaped at stop) and every perf script
        covered = sum(w.ts - w.start for w in windows) or 1.0
        out.update({
            "record_core_pct": 100 * record_cpu / span,
            "script_core_pct": 100 * max(0.0, everything - record_cpu) / span,
            "mb_per_s": written / 1e6 / span,
            "samples_5s": 5.0 * sum(sum(w.stacks.values()) for w in windows) / covered,
            "window_lag_s": statistics.median(sampler.lag_s) if sampler.lag_s else 0.0,
            **_quality(windows),
        })
    return out


def _written(pid: int) -> int:
    """Bytes process ``pid`` has written (``wchar`` of /proc/PID/io; 0 when unreadable)."""
    try:
        for line in open(f"/proc/{pid}/io"):
            if line.startswith("wchar:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def lab_cost(reps: int) -> dict:
    """The lab worker's CPU per A/B DML run with perf in each of ``LAB_MODES``, over no perf."""
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.hotspots.perf_record import HotspotSampler
    from tdescope.plugins.sqlcipher.lab import LabSession

    lab = LabSession()
    cpu: dict = {m: [] for m in (None, *LAB_MODES)}
    try:
        pid = lab.server_pid()
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")
        params = {**workload.params, "groups": 24}
        workload.run(params, WorkloadControl())  # warm-up
        names = [None, *LAB_MODES]
        for r in range(reps):
            for m in names[r % len(names):] + names[:r % len(names)]:
                sampler = None
                if m is not None:
                    graph, stack, hz = MODES[m]
                    sampler = HotspotSampler(pid, frequency=hz, window_s=1.0, callgraph=graph,
                                             stack_bytes=stack or 16384)
                    sampler.start()
                c0 = _proc_cpu(pid)
                try:
                    workload.run(params, WorkloadControl())
                finally:
                    c1 = _proc_cpu(pid)
                    if sampler is not None:
                        sampler.stop()
                cpu[m].append(c1 - c0)
    finally:
        lab.close()
    out = {"callgraph_lab_off_cpu_s": round(statistics.median(cpu[None]), 3)}
    for m in LAB_MODES:
        out[f"callgraph_lab_{m}_cpu_ratio"] = round(statistics.median(a / b for a, b in zip(cpu[m], cpu[None])), 3)
    return out


def run(quick: bool) -> dict:
    from tdescope.app.hotspots.profile import check_perf

    if (why := check_perf()) is not None:
        raise RuntimeError(why)
    reps = 2 if quick else 6
    names = [None, *MODES]
    seen: dict = {m: [] for m in names}
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-cg-") as folder:
        target = _Rounds(Path(folder), FAST)
        try:
            time.sleep(1.0)  # the table is built, the first rounds are done
            for r in range(reps):
                order = names[r % len(names):] + names[:r % len(names)]
                for m in order:
                    seen[m].append(_phase(target, m))
        finally:
            target.close()
    off = [p["rate"] for p in seen[None]]
    out: dict = {"callgraph_rounds": reps, "callgraph_phase_s": PHASE_S,
                 "callgraph_off_rounds_per_s": round(statistics.median(off), 2)}
    for m in MODES:
        phases = seen[m]
        med = lambda key: statistics.median(p[key] for p in phases)  # noqa: E731
        out[f"callgraph_{m}_overhead_pct"] = round(100 * statistics.median(
            1 - p["rate"] / o for p, o in zip(phases, off)), 2)
        out[f"callgraph_{m}_cpu_per_round_pct"] = round(100 * statistics.median(
            p["cpu_per_round"] / o["cpu_per_round"] - 1 for p, o in zip(phases, seen[None])), 2)
        out[f"callgraph_{m}_perf_core_pct"] = round(med("record_core_pct") + med("script_core_pct"), 1)
        for key in ("record_core_pct", "script_core_pct", "mb_per_s", "samples_5s", "unknown_pct", "complete_pct",
                    "cipher_callers_pct", "aes_callers_pct", "sha512_callers_pct", "vdbe_total_over_self", "vdbe_self_pct", "vdbe_total_pct",
                    "window_lag_s"):
            out[f"callgraph_{m}_{key}"] = round(med(key), 3 if key == "window_lag_s" else 1)
    out.update(lab_cost(3 if quick else 6))
    out["callgraph_load_avg_1m"] = os.getloadavg()[0]
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
