"""A session on the pg-tde lab: the PostgreSQL session, on the lab's private server, closed with it."""

from __future__ import annotations

import functools
from collections.abc import Callable

from tdescope.app.engines.api import Workload
from tdescope.plugins.pgtde.lab import ENCRYPTED_TABLE, PLAIN_TABLE, PgTdeLab
from tdescope.plugins.pgtde.pgbench import PGBENCH_DEFAULTS, pgbench_ab
from tdescope.plugins.pgtde.tuples import PgTupleDecoder
from tdescope.plugins.postgres import workloads as wl
from tdescope.plugins.postgres.connection import ConnectionSpec
from tdescope.plugins.postgres.session import PostgresSession

__all__ = ["PgTdeLabSession", "PgTdeSession"]

TDE_AM = "tde_heap_basic"
#: The lab's first workload: every fetch of an encrypted tuple decrypts it (pages stay encrypted in shared buffers).
SCAN_SQL = f"SELECT id, name FROM {ENCRYPTED_TABLE} ORDER BY id"


class PgTdeSession(PostgresSession):
    """:class:`PostgresSession` on a server with pg_tde: captures are tuples, decoded by :meth:`catalog_decoder`."""

    def catalog_decoder(self) -> PgTupleDecoder:
        """Tuples decoded as the table their capture names (its ``t_tableOid``), with that table's columns."""
        return PgTupleDecoder(relations=self.relations())


class PgTdeLabSession(PgTdeSession):
    """:class:`PostgresSession` on a :class:`PgTdeLab` that it starts and stops.

    Parameters
    ----------
    progress : callable, optional
        ``progress(message)`` while the lab builds and starts.
    source : str, optional
        A pg_tde source tarball or folder (``--pg-tde-source``).
    """

    own_target = True  # the lab's private server: the lab's stop budget, plaintext kept

    def __init__(self, progress: Callable[[str], None] | None = None, source: str | None = None) -> None:
        self.lab = PgTdeLab(progress, source)
        try:
            super().__init__(ConnectionSpec(self.lab.dsn()))
        except BaseException:
            self.lab.close()
            raise

    def workloads(self) -> list[Workload]:
        """Scans of the encrypted table and of its plain twin, seed 000's A/B and seed 003's I/O path on
        ``tde_heap_basic`` tables, pgbench on ``tde_heap_basic`` and heap, then the other PostgreSQL workloads."""
        run = functools.partial(wl.run_sql, self.conn)
        tde = {"access_method": TDE_AM}
        mine = [
            Workload("tde_scan", "Scan the pg_tde table (tde_heap_basic)",
                     "Reads every row of the encrypted table, 20 times: pg_tde decrypts each tuple on each "
                     "fetch, cold or warm.", {"sql": SCAN_SQL, "repeat": 20}, run),
            Workload("plain_scan", "Scan the plain twin",
                     "The same rows in a plain heap table: no decrypt.",
                     {"sql": f"SELECT id, name FROM {PLAIN_TABLE} ORDER BY id", "repeat": 20}, run),
            Workload("ab_dml", f"A/B DML ({TDE_AM} table vs plain heap)",
                     "Seed 000's insert/delete/update/select groups on a pg_tde table, then on the same table "
                     "plain.", wl.DEFAULTS["ab_dml"], functools.partial(wl.ab_dml, self.conn, **tde),
                     sides=("encrypted", "plain")),
            Workload("io_path", f"Tuple decrypts in a cold then a warm scan ({TDE_AM})",
                     "Seed 003's question on pg_tde: VACUUM FULL leaves the table in no shared buffer, the "
                     "second scan finds every page there; count pg_tde_crypt_tuple calls in each.",
                     wl.DEFAULTS["io_path"], functools.partial(wl.io_path, self.conn, **tde)),
            Workload("pgbench_tde", f"pgbench RO / RW, {TDE_AM} vs heap",
                     "Seed 004: pgbench -S then TPC-B-like on tables USING tde_heap_basic, then on plain heap "
                     "tables; TPS of each and the ratio.", PGBENCH_DEFAULTS,
                     lambda p, c: pgbench_ab(self, p, c), clients=wl.busy_pgbench_client),
        ]
        taken = {w.name for w in mine}
        return [*mine, *(w for w in super().workloads() if w.name not in taken)]

    def catalog_decoder(self) -> PgTupleDecoder:
        """Tuples as the table their capture names; the lab's encrypted table's columns for a capture that names
        none (a recipe without the tuple's OID)."""
        return PgTupleDecoder(self.columns(ENCRYPTED_TABLE), ENCRYPTED_TABLE, self.relations())

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.lab.close()
