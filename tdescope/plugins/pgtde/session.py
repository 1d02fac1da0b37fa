"""A session on the pg-tde lab: the PostgreSQL session, on the lab's private server, closed with it."""

from __future__ import annotations

import functools
from collections.abc import Callable

from tdescope.app.engines.api import Workload
from tdescope.plugins.pgtde.lab import ENCRYPTED_TABLE, PLAIN_TABLE, PgTdeLab
from tdescope.plugins.pgtde.tuples import PgTupleDecoder
from tdescope.plugins.postgres import workloads as wl
from tdescope.plugins.postgres.connection import ConnectionSpec
from tdescope.plugins.postgres.session import PostgresSession

__all__ = ["PgTdeLabSession", "PgTdeSession"]

#: The lab's first workload: every fetch of an encrypted tuple decrypts it (pages stay encrypted in shared buffers).
SCAN_SQL = f"SELECT id, name FROM {ENCRYPTED_TABLE} ORDER BY id"


class PgTdeSession(PostgresSession):
    """:class:`PostgresSession` on a server with pg_tde: captures are tuples, decoded by :meth:`catalog_decoder`."""

    def catalog_decoder(self) -> PgTupleDecoder:
        """Tuple headers (no statement: on a user's server the capture does not say its table)."""
        return PgTupleDecoder()


class PgTdeLabSession(PgTdeSession):
    """:class:`PostgresSession` on a :class:`PgTdeLab` that it starts and stops.

    Parameters
    ----------
    progress : callable, optional
        ``progress(message)`` while the lab builds and starts.
    source : str, optional
        A pg_tde source tarball or folder (``--pg-tde-source``).
    """

    def __init__(self, progress: Callable[[str], None] | None = None, source: str | None = None) -> None:
        self.lab = PgTdeLab(progress, source)
        try:
            super().__init__(ConnectionSpec(self.lab.dsn()))
        except BaseException:
            self.lab.close()
            raise

    def workloads(self) -> list[Workload]:
        """Scans of the encrypted table and of its plain twin, then the PostgreSQL workloads."""
        run = functools.partial(wl.run_sql, self.conn)
        return [
            Workload("tde_scan", "Scan the pg_tde table (tde_heap_basic)",
                     "Reads every row of the encrypted table, 20 times: pg_tde decrypts each tuple on each "
                     "fetch, cold or warm.", {"sql": SCAN_SQL, "repeat": 20}, run),
            Workload("plain_scan", "Scan the plain twin",
                     "The same rows in a plain heap table: no decrypt.",
                     {"sql": f"SELECT id, name FROM {PLAIN_TABLE} ORDER BY id", "repeat": 20}, run),
            *super().workloads(),
        ]

    def catalog_decoder(self) -> PgTupleDecoder:
        """Tuples with the lab's encrypted table's columns (the lab's probes catch that table's fetches)."""
        return PgTupleDecoder(self.columns(ENCRYPTED_TABLE), ENCRYPTED_TABLE)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.lab.close()
