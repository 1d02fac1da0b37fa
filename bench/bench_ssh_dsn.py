"""What carrying the engine connection over ssh (``--ssh --dsn``) costs a statement, against the same
connection made directly, one run.

A private sshd (``tests/ssh_fixture.py``: root only) and a PostgreSQL 15 cluster (``tests/pgcluster.py``)
on this machine. The forward is the one ``--ssh --dsn`` makes (``SshHost.forward`` into a unix socket in the
connection's 0700 folder, to the server's socket); rounds alternate direct and forwarded on two open
connections, each round timing ``n`` statements:

- ``ssh_dsn_select1_ms`` / ``ssh_dsn_direct_select1_ms``: one ``SELECT 1`` round trip, medians of the
  rounds; ``ssh_dsn_select1_ratio`` the forwarded ÷ direct ratio of each round, median (with its
  interval, :func:`~tdescope.app.ab.stats.median_interval`).
- ``ssh_dsn_decrypt_ratio``: the same for a statement that works in the server (``pgp_sym_decrypt`` of
  200 rows): how much of an ``ab`` round over ssh is the link rather than the server.

Run alone: ``python -m bench.bench_ssh_dsn [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

from bench._report import goal

goal("ssh_dsn_select1_ms", "SELECT 1 round trip through the --ssh --dsn forward (loopback), ms, median of rounds")
goal("ssh_dsn_direct_select1_ms", "the same on a direct unix-socket connection, same run")
goal("ssh_dsn_select1_ratio", "forwarded ÷ direct SELECT 1 time, median of per-round ratios")
goal("ssh_dsn_decrypt_ratio", "forwarded ÷ direct time of a pgp_sym_decrypt over 200 rows, median of per-round ratios")

DECRYPT = "SELECT sum(length(pgp_sym_decrypt(s, 'k'))) FROM bench_watched"


def _time(conn, sql: str, n: int) -> float:
    """Seconds per statement over ``n`` runs of ``sql``."""
    t0 = time.perf_counter()
    for _ in range(n):
        conn.execute(sql).fetchone()
    return (time.perf_counter() - t0) / n


def run(quick: bool = False) -> dict:
    if os.geteuid() != 0 or not Path("/usr/sbin/sshd").exists():
        return {}  # needs root and sshd (packaging/install-system-tools.sh): the test sshd creates accounts
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    import psycopg
    from pgcluster import PgCluster
    from ssh_fixture import start_sshd

    from tdescope.app.remote.ssh import SshHost

    rounds, n_select, n_decrypt = (5, 300, 10) if quick else (9, 1000, 30)
    sshd = start_sshd()
    cluster = PgCluster()
    host = None
    try:
        cluster.start()
        cluster.root.chmod(0o711)  # the ssh account reaches the socket
        cluster.psql("CREATE TABLE bench_watched (id int, s bytea); INSERT INTO bench_watched SELECT g, "
                     "pgp_sym_encrypt('CARD-' || g || repeat('x', 200), 'k') FROM generate_series(1, 200) g;")
        host = SshHost("ops", sshd.options).open()
        local = host.forward(f"{cluster.root}/.s.PGSQL.{cluster.port}", f"pg0/.s.PGSQL.{cluster.port}")
        direct = psycopg.connect(cluster.dsn(), autocommit=True)
        forwarded = psycopg.connect(cluster.dsn(host=os.path.dirname(local)), autocommit=True)
        times: dict[str, list[float]] = {k: [] for k in ("d1", "f1", "dd", "fd")}
        try:
            for conn in (direct, forwarded):  # warm both: catalogs, pgcrypto loaded
                _time(conn, DECRYPT, 2)
            for r in range(rounds):
                order = ((direct, "d"), (forwarded, "f")) if r % 2 == 0 else ((forwarded, "f"), (direct, "d"))
                for conn, tag in order:
                    times[tag + "1"].append(_time(conn, "SELECT 1", n_select))
                    times[tag + "d"].append(_time(conn, DECRYPT, n_decrypt))
        finally:
            direct.close()
            forwarded.close()
    finally:
        if host is not None:
            host.close()
        cluster.stop()
        sshd.stop()
    from tdescope.app.ab.stats import median_interval

    def ratio(f: str, d: str) -> tuple[float, float, float]:  # median of the per-round ratios, its interval
        return median_interval([a / b for a, b in zip(times[f], times[d])])

    select1, decrypt = ratio("f1", "d1"), ratio("fd", "dd")
    return {"ssh_dsn_select1_ms": round(statistics.median(times["f1"]) * 1000, 3),
            "ssh_dsn_direct_select1_ms": round(statistics.median(times["d1"]) * 1000, 3),
            "ssh_dsn_select1_ratio": round(select1[0], 2),
            "ssh_dsn_select1_ratio_interval": [round(select1[1], 2), round(select1[2], 2)],
            "ssh_dsn_decrypt_ratio": round(decrypt[0], 3),
            "ssh_dsn_decrypt_ratio_interval": [round(decrypt[1], 3), round(decrypt[2], 3)],
            "ssh_dsn_decrypt_ms": round(statistics.median(times["fd"]) * 1000, 2),
            "ssh_dsn_direct_decrypt_ms": round(statistics.median(times["dd"]) * 1000, 2),
            "ssh_dsn_select1_ratios": [round(a / b, 2) for a, b in zip(times["f1"], times["d1"])],
            "ssh_dsn_decrypt_ratios": [round(a / b, 3) for a, b in zip(times["fd"], times["dd"])]}


if __name__ == "__main__":
    print(json.dumps(run("--quick" in sys.argv)))
