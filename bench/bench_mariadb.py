"""MariaDB (InnoDB encryption) on the lab: a cold scan unobserved, and with every page captured by each backend.

Each round pushes ``scan_tde`` out of the 6 MB buffer pool (a scan of a bigger plain table), then
scans it cold: unobserved, with eBPF capturing every decrypt, with gdb capturing every decrypt
(the lab's stop budget, as the workbench gives a lab; gdb stops every thread of the server at
each hit). Figures are medians over the rounds, the three runs alternating.

``mariadb_window_consumes_pages_per_s`` is the other side of the pipe: an eBPF probe stays attached
while nobody reads its ring through several cold scans (a 512 MiB ring holds them all), then the
window's own reading path (ring slices, frames, pairing into page captures, a consumer that counts)
empties it; pages (16 KiB pairs) per second of that, beside what a cold scan offers.

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
goal("mariadb_window_consumes_pages_per_s", "16 KiB page pairs per second the eBPF window reads, pairs and hands over "
     "(a ring filled by cold scans, emptied by the window's path)", "≥ 20000", lambda v: v >= 20000)
goal("mariadb_window_vs_scan", "pages/s the window consumes ÷ pages/s a cold scan offers", "≥ 1", lambda v: v >= 1)


def run(quick: bool) -> dict:
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.gdb_backend import GdbBackend
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.mariadb import ENGINE
    from tdescope.plugins.mariadb import workloads as wl
    from tdescope.plugins.mariadb.lab import LAB_DATABASE
    from tdescope.plugins.mariadb.recipes import recipes

    rounds, rows = (3, 60000) if quick else (5, 200000)
    session = ENGINE.connect(ConnectParams(lab=True))
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
                    limits = CaptureLimits(max_captures=100000, max_seconds=300, max_hits_per_s=1_000_000,
                                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10, accept_stop=True))
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
        consumed = [window_consumption(session, conn, db, 3 if quick else 6) for _ in range(rounds)]
    finally:
        session.close()
    base = statistics.median(times["none"])
    offered = statistics.median(rates["none"])
    eats = statistics.median(c[0] for c in consumed)
    return {
        "mariadb_window_consumes_pages_per_s": round(eats),
        "mariadb_window_vs_scan": round(eats / offered, 1) if offered else 0.0,
        "mariadb_window_consumes_all": [round(c[0]) for c in consumed],
        "mariadb_window_consumed_pages": [c[1] for c in consumed],
        "mariadb_cold_scan_pages_per_s": round(statistics.median(rates["none"])),
        "mariadb_ebpf_pairs_per_s": round(statistics.median(captured["ebpf"])),
        "mariadb_gdb_pairs_per_s": round(statistics.median(captured["gdb"])),
        "mariadb_ebpf_scan_slowdown": round(statistics.median(times["ebpf"]) / base, 2),
        "mariadb_gdb_scan_slowdown": round(statistics.median(times["gdb"]) / base, 2),
        "mariadb_scan_s": {k: [round(t, 3) for t in v] for k, v in times.items()},
    }


def window_consumption(session, conn, db, scans: int) -> tuple[float, int]:
    """(page pairs per second the window's reading path empties a full ring at, pairs read)."""
    import time

    from tdescope.app.events import PageCapture
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.spec import ProbeSpec
    from tdescope.app.probe.spool import FramePairs
    from tdescope.app.probe.window import CaptureLimits
    from tdescope.plugins.mariadb import workloads as wl
    from tdescope.plugins.mariadb.recipes import recipes

    handle = EbpfBackend(ring_mb=512).attach(session.server_pid(),
                                             ProbeSpec.of(recipes()[0], CaptureLimits(max_captures=100000)))
    try:
        for _ in range(scans):  # nobody reads meanwhile: the ring fills
            wl.evict(conn, db)
            wl.scan(conn, db)
        handle.disarm()
        seen = [0]

        def make(seq, ts, pgno, before, after, stop_us):
            seen[0] += 1
            return PageCapture(ts=ts, seq=seq, symbol="", direction="decrypt", pgno=pgno, before=before,
                               after=after, stop_us=stop_us, engine="mariadb", plaintext_side="after")

        pairs = FramePairs(make, entry_only=False)
        t0 = time.perf_counter()
        while True:  # the window's turn: a slice of the ring, paired, handed over
            frames = handle.frames()
            for _capture in pairs.drain(frames, 10**9):
                pass
            if not any(f.kind.name != "NOTICE" for f in frames):
                break
        elapsed = time.perf_counter() - t0
    finally:
        handle.close()
        handle.discard()
    return (seen[0] / elapsed if elapsed else 0.0), seen[0]


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
