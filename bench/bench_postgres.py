"""Benchmark: the column-crypto matrix at its default size, and the cost of wait sampling on pgbench -S.

Starts its own cluster (tests/pgcluster.py). Targets (issue 5): the matrix at
its default size in <= 2 minutes on 2 cores; sampling pg_stat_activity at 20 Hz
adds <= 2 % to a pgbench read-only run. Writes bench/results/postgres.json and
prints a markdown table.

    .venv/bin/python bench/bench_postgres.py [--seconds 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from pgcluster import PgCluster  # noqa: E402

from tdescope.app.engines.api import ConnectParams, WorkloadControl  # noqa: E402
from tdescope.plugins.postgres import ENGINE  # noqa: E402
from tdescope.plugins.postgres.waits import PgWaitSource, WaitSampler  # noqa: E402

_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")


def pgbench_ro(cluster: PgCluster, seconds: int, sample: bool) -> tuple[float, int]:
    env = {**os.environ, "PGHOST": str(cluster.root), "PGPORT": str(cluster.port), "PGUSER": cluster.superuser,
           "PGDATABASE": "bench"}
    proc = subprocess.Popen(["pgbench", "-S", "-c", "2", "-j", "2", "-T", str(seconds)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    samples: list = []
    sampler = None
    if sample:
        import psycopg

        conn = psycopg.connect(cluster.dsn("bench"), autocommit=True)
        pid = None
        time.sleep(0.5)  # pgbench's first connection (its set-up check) closes; the clients' stay
        for _ in range(100):
            row = conn.execute("SELECT pid FROM pg_stat_activity WHERE application_name = 'pgbench' "
                               "AND backend_type = 'client backend' AND pid <> pg_backend_pid() "
                               "ORDER BY backend_start DESC LIMIT 1").fetchone()
            if row:
                pid = row[0]
                break
            time.sleep(0.05)
        sampler = WaitSampler(PgWaitSource(conn, pid), samples.append, hz=20).start()
    out, _ = proc.communicate()
    if sampler is not None:
        sampler.stop()
        sampler.source.close()
    return float(_TPS.search(out).group(1)), len(samples)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    cluster = PgCluster(shared_buffers="128MB").start()
    results: dict = {"cores": os.cpu_count()}
    try:
        session = ENGINE.connect(ConnectParams(dsn=cluster.dsn()))
        matrix = next(w for w in session.workloads() if w.name == "matrix")
        t = time.perf_counter()
        res = matrix.run(matrix.params, WorkloadControl())
        results["matrix_default_s"] = round(time.perf_counter() - t, 2)
        results["matrix_params"] = dict(matrix.params)
        results["matrix_table"] = [list(r) for r in res.table]
        session.close()
        cluster.psql("CREATE DATABASE bench")
        subprocess.run(["pgbench", "-i", "-q", "-s", "5", "-h", str(cluster.root), "-p", str(cluster.port),
                        "-U", cluster.superuser, "bench"], check=True, capture_output=True)
        pgbench_ro(cluster, 2, False)  # warm-up
        plain, sampled, n = [], [], []
        for _ in range(args.rounds):  # alternate, so drift hits both sides alike
            plain.append(pgbench_ro(cluster, args.seconds, False)[0])
            tps, count = pgbench_ro(cluster, args.seconds, True)
            sampled.append(tps)
            n.append(count)
        p, s = sorted(plain)[len(plain) // 2], sorted(sampled)[len(sampled) // 2]
        results.update(tps_plain=plain, tps_sampled=sampled, samples=n,
                       sampling_overhead_pct=round((p - s) / p * 100, 2))
    finally:
        cluster.stop()
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    (out / "postgres.json").write_text(json.dumps(results, indent=2))
    print("| measure | value | target |\n|---|---|---|")
    print(f"| matrix, default size ({results['matrix_params']}) | {results['matrix_default_s']} s | <= 120 s |")
    print(f"| pgbench -S TPS, median, no sampling | {sorted(results['tps_plain'])[len(plain) // 2]:.0f} | |")
    print(f"| pgbench -S TPS, median, 20 Hz pg_stat_activity sampling | "
          f"{sorted(results['tps_sampled'])[len(sampled) // 2]:.0f} | |")
    print(f"| wait sampling overhead | {results['sampling_overhead_pct']} % | <= 2 % |")
    print()
    for row in results["matrix_table"]:
        print("| " + " | ".join(row) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
