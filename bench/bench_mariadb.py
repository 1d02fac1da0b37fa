"""MariaDB (InnoDB encryption) on the lab: a cold scan unobserved, and with every page captured by each backend.

Each round pushes ``scan_tde`` out of the 6 MB buffer pool (a scan of a bigger plain table), then
scans it cold: unobserved, with eBPF capturing every decrypt, with gdb capturing every decrypt
(the lab's stop budget, as the workbench gives a lab; gdb stops every thread of the server at
each hit). Figures are medians over the rounds, the three runs alternating.

Run alone: ``python -m bench.bench_mariadb [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading

from bench._report import goal

goal("mariadb_cold_scan_pages_per_s", "unobserved cold scan of an encrypted table, pages read from disk per second")
goal("mariadb_ebpf_pairs_per_s", "page pairs captured per second during the cold scan, eBPF")
goal("mariadb_gdb_pairs_per_s", "same, gdb")
goal("mariadb_ebpf_scan_slowdown", "cold scan time with eBPF capturing ÷ unobserved")
goal("mariadb_gdb_scan_slowdown", "cold scan time with gdb capturing ÷ unobserved")


def run(quick: bool) -> dict:
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.gdb_backend import GdbBackend
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.mariadb import ENGINE
    from tdescope.plugins.mariadb import workloads as wl
    from tdescope.plugins.mariadb.lab import LAB_DATABASE
    from tdescope.plugins.mariadb.recipes import recipes

    rounds, rows = (3, 60000) if quick else (5, 200000)
    session = ENGINE.connect(ConnectParams(options={"lab": True}))
    conn, db = session.conn, LAB_DATABASE
    times: dict[str, list[float]] = {"none": [], "ebpf": [], "gdb": []}
    rates: dict[str, list[float]] = {"none": [], "ebpf": [], "gdb": []}
    captured: dict[str, list[float]] = {"ebpf": [], "gdb": []}
    try:
        wl.prepare_io_path(conn, db, rows, 80000)
        for _ in range(rounds):
            for how in ("none", "ebpf", "gdb"):
                wl.evict(conn, db)
                got = []
                window = None
                if how != "none":
                    limits = CaptureLimits(max_captures=100000, max_seconds=300, max_busy_fraction=1.0,
                                           max_burst_s=10, max_hits_per_s=1_000_000, accept_stop=True)
                    backend = EbpfBackend() if how == "ebpf" else GdbBackend()
                    window = CaptureWindow(session.server_pid(), recipes()[0], limits, "mariadb", got.append,
                                           backend=backend)
                    thread = threading.Thread(target=window.run)
                    thread.start()
                    window.armed.wait(30)
                elapsed, reads = wl.scan(conn, db)
                if window is not None:
                    window.cancel()
                    thread.join(60)
                    captured[how].append(len(got) / elapsed)
                times[how].append(elapsed)
                rates[how].append(reads / elapsed)
    finally:
        session.close()
    base = statistics.median(times["none"])
    return {
        "mariadb_cold_scan_pages_per_s": round(statistics.median(rates["none"])),
        "mariadb_ebpf_pairs_per_s": round(statistics.median(captured["ebpf"])),
        "mariadb_gdb_pairs_per_s": round(statistics.median(captured["gdb"])),
        "mariadb_ebpf_scan_slowdown": round(statistics.median(times["ebpf"]) / base, 2),
        "mariadb_gdb_scan_slowdown": round(statistics.median(times["gdb"]) / base, 2),
        "mariadb_scan_s": {k: [round(t, 3) for t in v] for k, v in times.items()},
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
