"""eBPF pages through ``tdescope agent``'s pipe against the same capture in-process, in one run.

The target is ``fast_target.py`` (tens of thousands of 4 KiB page decrypts a second). Windows
alternate on the same process: a :class:`CaptureWindow` in this process, then the same window in
the agent (``/usr/bin/python3 -I tdescope-agent.pyz``), its captures crossing the pipe as typed
frames and rebuilt here as :class:`PageCapture` by :class:`AgentClient`.

- ``agent_pairs_per_s`` / ``local_pairs_per_s`` / ``agent_vs_local_capture``: page pairs (before +
  after, 4 KiB each) delivered per second, medians of the alternating windows. Issue 28's goal for
  ``record`` over ssh is ≥ 50 % of local; the pipe alone is the upper bound of that.
- ``agent_cpu_pct_at_1000_per_s``: the agent process's CPU (utime + stime from /proc, % of one core)
  over a window whose eBPF byte cap lets ~1,000 pairs a second through; goal ≤ 10 %.

Run alone: ``python -m bench.bench_agent [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from bench._report import goal
from bench.bench_armed import _Rounds
from bench.bench_ebpf import FAST, _Seen

goal("agent_pairs_per_s", "eBPF page pairs per second delivered through the agent's pipe (4 KiB pages)")
goal("local_pairs_per_s", "the same, captured in-process, same target, same run")
goal("agent_vs_local_capture", "agent pairs/s ÷ local pairs/s, same run", "≥ 0.5", lambda v: v >= 0.5)
goal("agent_cpu_pct_at_1000_per_s", "the agent's CPU capturing ~1,000 pairs/s, % of one core", "≤ 10",
     lambda v: v <= 10)


def _limits(n: int, seconds: float):
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits
    return CaptureLimits(max_captures=n, max_seconds=seconds, max_hits_per_s=1_000_000,
                         stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(quick: bool = False) -> dict:
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.window import CaptureWindow
    from tdescope.app.remote.agent_build import build_agent
    from tdescope.app.remote.client import AgentClient, local_argv
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    reps, n, secs = (3, 30000, 20) if quick else (5, 100000, 30)
    cpu_window_s = 4.0 if quick else 8.0
    local, remote = [], []
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-agent-") as tmp:
        agent = build_agent(Path(tmp) / "tdescope-agent.pyz")
        target = _Rounds(Path(tmp), FAST)
        client = AgentClient(local_argv(agent))
        try:
            client.hello()
            time.sleep(1.0)
            for _ in range(reps):
                seen = _Seen()
                CaptureWindow(target.pid, DECRYPT, _limits(n, secs), "sqlcipher", seen, backend=EbpfBackend()).run()
                local.append(seen.rate())
                seen = _Seen()
                summary = client.window(target.pid, DECRYPT, _limits(n, secs), "sqlcipher", seen, critical=()).run()
                if summary.error:
                    raise RuntimeError(summary.error)
                remote.append(seen.rate())
            # ~1,000 pairs/s: the probe's byte cap lets 1,000 x 8 KiB a second through, the rest is counted
            seen = _Seen()
            window = client.window(target.pid, DECRYPT, _limits(100000, cpu_window_s), "sqlcipher", seen,
                                   critical=(), ebpf={"max_bytes_per_s": 1000 * 8192})
            cpu0, t0 = _cpu_s(client.pid), time.monotonic()
            summary = window.run()
            if summary.error:
                raise RuntimeError(summary.error)
            cpu1, t1 = _cpu_s(client.pid), time.monotonic()
            delivered = seen.count / (t1 - t0)
        finally:
            client.close()
            target.close()
    lo, re_ = statistics.median(local), statistics.median(remote)
    return {"agent_pairs_per_s": round(re_), "local_pairs_per_s": round(lo),
            "agent_vs_local_capture": round(re_ / lo, 2) if lo else 0.0,
            "agent_rates": [round(r) for r in remote], "local_rates": [round(r) for r in local],
            "agent_cpu_pct_at_1000_per_s": round(100 * (cpu1 - cpu0) / (t1 - t0), 1),
            "agent_cpu_window_pairs_per_s": round(delivered)}


if __name__ == "__main__":
    print(json.dumps(run("--quick" in sys.argv)))
