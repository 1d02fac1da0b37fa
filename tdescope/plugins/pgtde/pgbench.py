"""Seed 004's experiment with real encryption: pgbench RO and RW on ``tde_heap_basic`` tables against heap ones.

Two scratch databases on the lab: ``tdescope_pgbench_tde``, whose default table
access method is ``tde_heap_basic`` (with pg_tde, a key provider and a
principal key of its own), so ``pgbench -i`` creates encrypted tables, and
``tdescope_pgbench_plain``. Rounds alternate the sides (ABBA); each round runs
pgbench -S, then the TPC-B-like load, on one side. Seed 004 ran scale 50 and
500 with 12 connections on a big machine; the defaults here are scaled down
to two shared cores.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from tdescope.app.engines.api import WorkloadControl
from tdescope.app.events import PhaseTiming, WorkloadResult
from tdescope.plugins.postgres import workloads as wl

__all__ = ["PGBENCH_DEFAULTS", "SIDES", "pgbench_ab"]

PGBENCH_DEFAULTS = {"scale": 2, "clients": 2, "seconds": 5, "rounds": 2}
#: side -> scratch database
SIDES = {"tde": "tdescope_pgbench_tde", "plain": "tdescope_pgbench_plain"}


def _prepare(session, side: str, db: str) -> None:
    lab = session.lab
    if lab.psql(f"SELECT count(*) FROM pg_database WHERE datname = '{db}'", dbname="postgres").strip() != "0":
        return
    lab.psql(f"CREATE DATABASE {db}", dbname="postgres")
    if side == "tde":
        lab.psql("CREATE EXTENSION pg_tde; "
                 f"SELECT pg_tde_add_key_provider_file('file', '{lab.dir / 'keyring-pgbench.per'}'); "
                 "SELECT pg_tde_set_principal_key('tdescope-pgbench-key', 'file'); ", dbname=db)
        lab.psql(f"ALTER DATABASE {db} SET default_table_access_method = 'tde_heap_basic'", dbname="postgres")


def pgbench_ab(session, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """pgbench RO then RW on each side per round, ABBA; TPS as ``PhaseTiming(side, "<mode> tps", tps)``."""
    rounds = max(1, int(params.get("rounds", 2)))
    pgbench = str(session.lab.bindir / "pgbench")
    timings: list[PhaseTiming] = []
    table = [("round", "side", "read-only TPS", "read-write TPS")]
    for side, db in SIDES.items():
        _prepare(session, side, db)
    order = []
    for r in range(rounds):
        order += [("tde", "plain"), ("plain", "tde")][r % 2]
    for i, side in enumerate(order):
        if control.cancelled:
            break
        run = wl.pgbench_ro_rw(session.conn, {**params, "database": SIDES[side]}, control, session.libpq_env,
                               pgbench=pgbench)
        tps = {t.side: t.elapsed_s for t in run.timings if t.phase == "tps"}
        for mode, value in tps.items():
            timings.append(PhaseTiming(side, f"{mode} tps", value))
        table.append((str(i // 2 + 1), side, f"{tps.get('read-only', float('nan')):.0f}",
                      f"{tps.get('read-write', float('nan')):.0f}"))
    return WorkloadResult(time.time(), "pgbench_tde", dict(params), tuple(timings), {}, control.cancelled,
                          tuple(table))
