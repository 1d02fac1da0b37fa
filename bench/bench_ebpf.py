"""The eBPF backend against gdb on the same target, in one run.

The target is ``fast_target.py``: a SQLCipher scan with no Python per row, offering tens of
thousands of page decrypts a second (``armed_target.py`` offers a few thousand: it would measure
the target, not the probe).

- ``ebpf_capture_pairs_per_s`` / ``ebpf_vs_gdb_capture``: page pairs per second each backend
  delivers from the same continuously-scanning process (windows alternate; gdb with the lab's stop
  budget so it never pauses, as in ``bench_capture``).
- ``ebpf_armed_cost_per_hit_us``: the target's own rounds per second unarmed vs armed, as in
  ``bench_armed`` (every hit captured), turned into time lost per captured page;
  ``ebpf_armed_vs_work_ratio`` divides it by one 4 KiB AES-256-CBC decrypt (``openssl speed``).
- ``ebpf_prog_us_per_hit``: what the BPF program itself spends per hit, entry and return probe
  together (its own clock, ``S_PROG_NS``): steadier than the target's cost on a loaded machine.
- ``ebpf_lost_pct``: records the ring had no room for, over the armed windows at the target's full
  decrypt rate.
- ``ebpf_kill_survival_pct``: ``tdescope capture --backend ebpf`` killed with SIGKILL at a random
  moment (loading, attached, capturing flat out) while the target decrypts; the target must stay
  alive, have nothing attached a moment later, keep its code equal to the file, and finish its own
  work correctly.

Run alone: ``python -m bench.bench_ebpf [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._report import goal
from bench.bench_armed import _Rounds, openssl_page_us
from bench.bench_capture import Target

FAST = Path(__file__).with_name("fast_target.py")

goal("ebpf_capture_pairs_per_s", "before+after page pairs per second, eBPF backend (SQLCipher target)")
goal("ebpf_vs_gdb_capture", "eBPF pairs/s ÷ gdb pairs/s, same target, same run", "≥ 30", lambda v: v >= 30)
goal("ebpf_armed_cost_per_hit_us", "target's extra time per captured page with eBPF armed, µs")
goal("ebpf_armed_vs_work_ratio", "eBPF armed cost per page ÷ the AES decrypt of one page", "≤ 10", lambda v: v <= 10)
goal("ebpf_prog_us_per_hit", "the BPF program's own time per hit, both probes (its clock, traps excluded), µs")
goal("ebpf_lost_pct", "ring records lost at the target's full decrypt rate, %", "0", lambda v: v == 0)
goal("ebpf_kill_survival_pct", "target survives kill -9 of an eBPF capture at a random moment, %", "100",
     lambda v: v == 100)
goal("ebpf_kill_trials", "kills in the survival figure")
goal("ebpf_offered_pages_per_s", "decrypts per second the unarmed fast target offers")


class _Seen:
    """Counts captures and keeps the first and last timestamps (a consumer that keeps every page
    would measure Python's memory manager, not the probe)."""

    def __init__(self) -> None:
        self.count, self.first, self.last = 0, 0.0, 0.0

    def __call__(self, capture) -> None:
        if not self.count:
            self.first = capture.ts
        self.count += 1
        self.last = capture.ts

    def rate(self) -> float:
        return (self.count - 1) / (self.last - self.first) if self.count > 1 and self.last > self.first else 0.0


def _window(pid: int, backend, n: int, seconds: float):
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    seen = _Seen()
    limits = CaptureLimits(max_captures=n, max_seconds=seconds, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    summary = CaptureWindow(pid, DECRYPT, limits, "sqlcipher", seen, backend=backend).run()
    return seen, summary


def capture_rates(quick: bool) -> dict:
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.gdb_backend import GdbBackend

    reps, n_gdb, n_ebpf = (3, 300, 60000) if quick else (5, 1000, 100000)
    gdb_rates, ebpf_rates = [], []
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-ebpf-") as tmp:
        target = _Rounds(Path(tmp), FAST)
        try:
            time.sleep(1.0)
            for _ in range(reps):
                seen, _ = _window(target.pid, GdbBackend(), n_gdb, 60)
                gdb_rates.append(seen.rate())
                seen, _ = _window(target.pid, EbpfBackend(), n_ebpf, 60)
                ebpf_rates.append(seen.rate())
        finally:
            target.close()
    g, e = statistics.median(gdb_rates), statistics.median(ebpf_rates)
    return {"ebpf_capture_pairs_per_s": round(e), "gdb_capture_pairs_per_s": round(g),
            "ebpf_vs_gdb_capture": round(e / g, 1) if g else 0.0,
            "ebpf_capture_rates": [round(r) for r in ebpf_rates], "gdb_capture_rates": [round(r) for r in gdb_rates]}


def armed_cost(quick: bool) -> dict:
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.ebpf.program import TRAP_COST_US

    reps, seconds, quiet_s = (4, 2.0, 2.0) if quick else (8, 4.0, 3.0)
    costs, hits_all, lost_all, offered, prog = [], 0, 0, [], []
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-ebpf-armed-") as tmp:
        target = _Rounds(Path(tmp), FAST)
        try:
            time.sleep(1.0)
            for _ in range(reps):
                t_a = time.time()
                time.sleep(quiet_s)
                t_b = time.time()
                ru = (target.progress(t_b) - target.progress(t_a)) / (t_b - t_a)
                seen, summary = _window(target.pid, EbpfBackend(), 100000, seconds)
                t0, t1 = seen.first, seen.last
                done = target.progress(t1) - target.progress(t0)
                costs.append(((t1 - t0) - done / ru) / (seen.count - 1) * 1e6)
                offered.append(ru * (seen.count - 1) / done)  # pages per round × unarmed rounds per second
                probe = summary.counters.probe if summary.counters else None
                hits_all += probe.hits if probe else 0
                lost_all += probe.lost if probe else 0
                if probe and probe.hits:  # busy = program time + TRAP_COST_US per entry and per return
                    prog.append((summary.stopped_s / probe.hits - 2 * TRAP_COST_US / 1e6) * 1e6)
        finally:
            target.close()
    aes = openssl_page_us(1 if quick else 3)
    cost = statistics.median(costs)
    return {"ebpf_armed_cost_per_hit_us": round(cost, 2), "ebpf_armed_vs_work_ratio": round(cost / aes, 1),
            "ebpf_aes_decrypt_per_page_us": round(aes, 3),
            "ebpf_lost_pct": round(100 * lost_all / hits_all, 3) if hits_all else 0.0,
            "ebpf_armed_hits": hits_all, "ebpf_prog_us_per_hit": round(statistics.median(prog), 3) if prog else 0.0, "ebpf_offered_pages_per_s": round(statistics.median(offered)),
            "ebpf_armed_cost_all_us": [round(c, 2) for c in costs]}


def kill_survival(quick: bool) -> dict:
    from tdescope.app.gdb.guard import text_mismatches

    trials = 30 if quick else 100
    survived = 0
    rng = random.Random(2026)
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-ebpf-kill-") as tmp:
        for i in range(trials):
            folder = Path(tmp) / str(i)
            folder.mkdir()
            target = Target(folder)
            ok = False
            try:
                cli = subprocess.Popen([sys.executable, "-m", "tdescope", "capture", "--backend", "ebpf", "--pid",
                                        str(target.pid), "--count", "100000", "--timeout", "120", "--json"],
                                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                if rng.random() < 0.6:
                    cli.stdout.readline()  # capturing flat out
                time.sleep(rng.uniform(0, 0.25))
                cli.kill()
                cli.wait()
                cli.stdout.close()
                time.sleep(0.2)
                ok = (target.proc.poll() is None and not _attached() and not text_mismatches(target.pid))
            finally:
                target.close()
            out = target.proc.stdout.read() if target.proc.stdout else ""
            ok = ok and target.proc.returncode == 0 and out.strip().startswith("ok ")
            survived += ok
    return {"ebpf_kill_survival_pct": round(100 * survived / trials, 1), "ebpf_kill_trials": trials}


def _attached() -> bool:
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True).stdout
    return any(p.get("name") in ("on_entry", "on_return") for p in json.loads(out or "[]"))


def run(quick: bool) -> dict:
    out = capture_rates(quick)
    out.update(armed_cost(quick))
    out.update(kill_survival(quick))
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
