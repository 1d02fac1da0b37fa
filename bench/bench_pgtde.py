"""pg_tde on the pg-tde lab: what eBPF costs per decrypted tuple, beside what the decrypt itself costs.

One lab, one run, rounds interleaved (encrypted, plain, encrypted with the eBPF probe capturing every
tuple, in a rotating order): a ``count(name)`` scan of N rows, timed by the client.

- ``pgtde_decrypt_us_per_tuple``: (encrypted scan − plain twin scan) ÷ N: what ``tde_heap_basic``
  adds per fetched tuple, ``pg_tde_crypt_tuple`` (AES-128 keystream) and the access method's copy.
- ``pgtde_ebpf_us_per_tuple``: (armed encrypted scan − encrypted scan) ÷ N: the probe's cost per
  captured tuple (two traps and two ring copies of ~180 bytes).
- ``pgtde_ebpf_counted_us_per_tuple``: the same as the probe counts it (its program's time plus the
  research's ~1 µs per trap): the wall-clock figure above also holds the workbench's own reader
  competing with the backend for the machine's two cores.
- ``pgtde_ebpf_vs_decrypt``: the ratio of the two, per round; the median and the min–max of the
  rounds are given, as the machine is shared.

Run alone: ``python -m bench.bench_pgtde [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time

from bench._report import goal

goal("pgtde_decrypt_us_per_tuple", "pg_tde tde_heap_basic: extra time per fetched tuple vs the plain twin, µs")
goal("pgtde_ebpf_us_per_tuple", "eBPF probe on pg_tde_crypt_tuple: extra time per captured tuple, µs")
goal("pgtde_ebpf_vs_decrypt", "eBPF cost per tuple ÷ pg_tde's own decrypt cost per tuple (median of rounds)")
goal("pgtde_ebpf_counted_us_per_tuple", "the probe's own time per captured tuple as it counts it, µs")
goal("pgtde_ebpf_vs_decrypt_range", "min–max of that ratio over the rounds")


def _scan(conn, table: str, times: int = 1) -> float:
    """The median time of ``times`` scans (one scan of 50 000 rows is a few ms: too short alone)."""
    took = []
    for _ in range(times):
        t = time.perf_counter()
        conn.execute(f"SELECT count(name) FROM {table}").fetchone()
        took.append(time.perf_counter() - t)
    return statistics.median(took)


def _armed_scan(session, table: str, rows: int) -> tuple[float, int]:
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.pgtde.recipes import TUPLE_DECRYPT

    got = [0]
    summary = []
    limits = CaptureLimits(max_captures=rows * 2, max_seconds=120, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    window = CaptureWindow(session.server_pid(), TUPLE_DECRYPT, limits, "pg-tde",
                           lambda _c: got.__setitem__(0, got[0] + 1), backend=EbpfBackend())
    thread = threading.Thread(target=lambda: summary.append(window.run()))
    thread.start()
    if not window.armed.wait(60):
        raise RuntimeError("the eBPF probe did not arm")
    try:
        took = _scan(session.conn, table)
    finally:
        window.cancel()
        thread.join(120)
    return took, got[0], summary[0].stopped_s


def run(quick: bool = False) -> dict:
    from tdescope.app.engines.api import ConnectParams
    from tdescope.plugins.pgtde import ENGINE

    rows, rounds = (50000, 5) if quick else (50000, 11)
    session = ENGINE.connect(ConnectParams(lab=True))
    try:
        lab = session.lab
        make = "SELECT g AS id, 'row-' || g AS name, repeat(md5(g::text), 4) AS filler FROM generate_series(1, %d) g"
        lab.psql(f"CREATE TABLE bench_enc USING tde_heap_basic AS {make % rows}")
        lab.psql(f"CREATE TABLE bench_plain AS {make % rows}")
        lab.psql("CHECKPOINT")
        conn = session.conn
        for table in ("bench_enc", "bench_plain"):
            _scan(conn, table)  # warm: both tables in shared buffers
        decrypt, ebpf, ratios, captured, counted = [], [], [], [], []
        for r in range(rounds):
            order = ["enc", "plain", "armed"][r % 3:] + ["enc", "plain", "armed"][:r % 3]
            t = {}
            for what in order:
                if what == "armed":
                    t["armed"], n, stopped = _armed_scan(session, "bench_enc", rows)
                    captured.append(n)
                    counted.append(stopped / max(n, 1) * 1e6)
                else:
                    t[what] = _scan(conn, f"bench_{what}", 5)
            d = (t["enc"] - t["plain"]) / rows * 1e6
            e = (t["armed"] - t["enc"]) / rows * 1e6
            decrypt.append(d)
            ebpf.append(e)
            if d > 0:
                ratios.append(e / d)
    finally:
        session.close()
    return {
        "pgtde_rows": rows, "pgtde_rounds": rounds, "pgtde_captured_per_armed_scan": statistics.median(captured),
        "pgtde_decrypt_us_per_tuple": round(statistics.median(decrypt), 3),
        "pgtde_decrypt_us_per_tuple_range": [round(min(decrypt), 3), round(max(decrypt), 3)],
        "pgtde_ebpf_us_per_tuple": round(statistics.median(ebpf), 3),
        "pgtde_ebpf_us_per_tuple_range": [round(min(ebpf), 3), round(max(ebpf), 3)],
        "pgtde_ebpf_counted_us_per_tuple": round(statistics.median(counted), 3),
        "pgtde_ebpf_vs_decrypt": round(statistics.median(ratios), 2) if ratios else None,
        "pgtde_ebpf_vs_decrypt_range": [round(min(ratios), 2), round(max(ratios), 2)] if ratios else None,
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
