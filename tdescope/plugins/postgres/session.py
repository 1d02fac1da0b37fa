"""A live PostgreSQL session: the workload connection (the probe target) and a control connection.

The workload connection's backend is what the probes stop, so everything else
(inventory, pg_attribute look-ups, target checks) runs on a second, control
connection, and wait sampling on a third: the probed backend is never the one
answering tdescope's own questions.
"""

from __future__ import annotations

import dataclasses
import functools
import threading
from collections.abc import Callable

from tdescope.app.engines.api import Constant, Inventory, ProbeRecipe, TargetChoice, Workload
from tdescope.app.errors import UserError
from tdescope.app.system.process_table import LOCAL, ProcessTable
from tdescope.plugins.postgres import statements
from tdescope.plugins.postgres import workloads as wl
from tdescope.plugins.postgres._tuples import PgColumn
from tdescope.plugins.postgres.connection import ConnectionSpec, open_connection
from tdescope.plugins.postgres.inventory import build_inventory, sampling_reads
from tdescope.plugins.postgres.pages import PgPageDecoder
from tdescope.plugins.postgres.relations import RelationMap, read_relations
from tdescope.plugins.postgres.target import Backend, check_backend, list_backends
from tdescope.plugins.postgres.waits import PgWaitSource

__all__ = ["PostgresSession"]


class PostgresSession:
    """One server, one probe target.

    Parameters
    ----------
    spec : ConnectionSpec
        Where to connect.
    prompt : callable, optional
        ``prompt(where) -> password`` when the server asks for one (CLI: getpass).
    target_pid : int, optional
        Probe another backend (from pg_stat_activity) instead of the workload's own.
    allow_critical : bool
        Allow the postmaster and background processes as targets.
    processes : ProcessTable
        The server's machine: this one's /proc, or a ``--ssh`` host's through the agent.
    """

    own_target = False  # someone's server (the pg_tde lab's session says otherwise)

    def __init__(self, spec: ConnectionSpec, prompt: Callable[[str], str | None] | None = None,
                 target_pid: int | None = None, allow_critical: bool = False,
                 processes: ProcessTable = LOCAL) -> None:
        self.processes = processes
        self.conn, self._spec = open_connection(spec, prompt, "tdescope workload")
        self._lock = threading.Lock()
        try:
            self.control, _ = open_connection(self._spec, None, "tdescope control")
        except UserError:
            self.conn.close()
            raise
        try:
            self.own_pid = int(self.conn.info.backend_pid)  # from libpq: no statement
            # BLCKSZ, the server build's page size: what mdread reads (it has no length argument)
            self.block_size = int(self.control.execute(statements.BLOCK_SIZE).fetchone()[0])
            self.target: Backend = check_backend(self.control, target_pid or self.own_pid, allow_critical,
                                                processes)
        except Exception:
            self.close()
            raise
        self._wait_source: PgWaitSource | None = None

    # -- EngineSession ----------------------------------------------------------
    def server_pid(self) -> int:
        """The probed backend: the workload connection's own unless another was chosen."""
        return self.target.pid

    def probe_followers(self, pid: int, recipe: ProbeRecipe) -> tuple[int, ...]:
        """PostgreSQL 18's I/O workers of ``pid``'s cluster for a page-read recipe (``mdread``,
        ``tde_decrypt_smgr_block``): those run there unless ``io_method=sync``. Found from the process
        table, no SQL (watch mode). Unverified on a real PostgreSQL 18 (:mod:`.io_workers`)."""
        from tdescope.plugins.postgres.io_workers import PAGE_READ_RECIPES, io_workers

        return io_workers(self.processes.rows(), pid) if recipe.key in PAGE_READ_RECIPES else ()

    def inventory(self, sample_columns: bool = False) -> Inventory:
        """Catalogs and statistics views only; ``sample_columns`` reads user tables too (:meth:`sample_columns`)."""
        with self._lock:
            label = "this workload connection" if self.target.pid == self.own_pid else \
                f"{self.target.backend_type}, {self.target.user}, {self.target.application or 'no application'}"
            return build_inventory(self.control, self.target.pid, label, sample_columns)

    def sampling_reads(self) -> str:
        """What :meth:`sample_columns` will read, said before it reads it."""
        with self._lock:
            return sampling_reads(self.control)

    def sample_columns(self) -> Inventory:
        """The inventory with bytea columns of user tables sampled for pgcrypto messages (an explicit action)."""
        return self.inventory(sample_columns=True)

    def workloads(self) -> list[Workload]:
        run = functools.partial
        return [
            Workload("ab_dml", "A/B DML (pgcrypto column vs plain)",
                     "Seed 000's insert/delete/update/select groups on a table with a pgp_sym_encrypt'ed "
                     "column, then on the same table plain.", wl.DEFAULTS["ab_dml"], run(wl.ab_dml, self.conn),
                     sides=("encrypted", "plain"), **self._leaves("ab_dml")),
            Workload("matrix", "Column-crypto matrix (pgcrypto)",
                     "Seed 003 on pgcrypto: avg(length(pgp_sym_decrypt(col))) over N rows for plain, AES-128/"
                     "192/256 and 3DES, each with and without the MDC integrity check.",
                     wl.DEFAULTS["matrix"], run(wl.column_crypto_matrix, self.conn, pid=self._local_backend()),
                     **self._leaves("matrix")),
            Workload("io_path", "Page reads in the I/O path (cold then warm scan)",
                     "Seed 003's finding on stock PostgreSQL (no TDE): a first scan of a table rewritten by "
                     "VACUUM FULL reads its pages through mdread; a second finds them in shared buffers.",
                     wl.DEFAULTS["io_path"], run(wl.io_path, self.conn), **self._leaves("io_path")),
            Workload("pgbench", "pgbench read-only / read-write",
                     "Seed 004's shape: pgbench -S then the TPC-B-like run on a scratch database; TPS.",
                     wl.DEFAULTS["pgbench"], lambda p, c: wl.pgbench_ro_rw(self.conn, p, c, self.libpq_env),
                     clients=wl.busy_pgbench_client, **self._leaves("pgbench")),
        ]

    def _local_backend(self) -> int | None:
        """The workload connection's backend when it runs on this machine (its CPU time is read from /proc),
        else None: a ``--ssh`` host's, or a server reached over TCP whose pid here is someone else's."""
        host = self.conn.info.host or ""
        if self.processes is not LOCAL or not (host.startswith("/") or host in ("localhost", "127.0.0.1", "::1")):
            return None
        try:
            with open(f"/proc/{self.own_pid}/comm") as fh:
                return self.own_pid if fh.read().strip() == "postgres" else None
        except OSError:
            return None

    def _leaves(self, name: str) -> dict:
        """``creates`` and ``cleanup`` of workload ``name``: what it leaves in the server, and its removal."""
        def cleanup() -> None:
            with self._lock:
                wl.drop(self.control, name)
        return {"creates": wl.CREATES[name], "cleanup": cleanup}

    def wait_source(self) -> PgWaitSource:
        """pg_stat_activity (or pg_wait_sampling) for the target, on a connection of its own."""
        if self._wait_source is None:
            conn, _ = open_connection(self._spec, None, "tdescope waits")
            self._wait_source = PgWaitSource(conn, self.target.pid)
        return self._wait_source

    def connection_lost(self, exc: BaseException) -> bool:
        """True when ``exc`` (from this session's connections or its wait source's) means a connection is gone:
        an operational error the client raised itself (no SQLSTATE: the server closed it), a connection
        exception (SQLSTATE class 08), a server shutting down (57P01-57P03), or a connection psycopg marked
        ``broken``. A cancelled statement (57014) is not one."""
        import psycopg

        if not isinstance(exc, psycopg.OperationalError):
            return False
        state = exc.sqlstate
        return (state is None or state.startswith("08") or state in ("57P01", "57P02", "57P03")
                or any(c.broken or c.closed for c in (self.conn, self.control)))

    def close(self) -> None:
        for conn in (getattr(self, "conn", None), getattr(self, "control", None)):
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - closing a broken connection has nothing to report
                    pass
        if getattr(self, "_wait_source", None) is not None:
            self._wait_source.close()
            self._wait_source = None

    # -- PostgreSQL specifics ---------------------------------------------------
    def sql_workload(self, sql: str, repeat: int = 1) -> Workload:
        """The user's SQL as a workload on the probed connection."""
        return Workload("sql", "SQL", sql, {"sql": sql, "repeat": repeat}, functools.partial(wl.run_sql, self.conn))

    def backends(self) -> list[Backend]:
        """pg_stat_activity, client backends first, to pick a target from."""
        with self._lock:
            return list_backends(self.control)

    def targets(self) -> list[TargetChoice]:
        """Backends the user may pick as the probe target (the optional EngineSession member)."""
        own = self.own_pid
        return [
            TargetChoice(b.pid, f"{b.backend_type}{' (this workload connection)' if b.pid == own else ''}",
                         b.user, b.application, b.state, b.query)
            for b in self.backends()
        ]

    def choose_target(self, pid: int, allow_critical: bool = False) -> None:
        """Probe ``pid`` from now on; UserError (one line) for the postmaster, background
        processes (unless ``allow_critical``) and pids that are not this server's backends."""
        with self._lock:
            self.target = check_backend(self.control, pid, allow_critical, self.processes)
        if self._wait_source is not None:
            self._wait_source.follow(self.target.pid)  # the engine's waits move with the probe

    def fit_recipe(self, recipe: ProbeRecipe) -> ProbeRecipe:
        """``recipe`` with this server's block size where it copies a block the call gives no length for
        (``postgres.page-read``: ``mdread``); the other recipes take the call's own length."""
        if not isinstance(recipe.length, Constant):
            return recipe
        return dataclasses.replace(recipe, length=Constant(self.block_size), max_length=self.block_size)

    def require_extension(self, name: str) -> None:
        """UserError when ``name`` is not created in the connected database.

        pgcrypto's library is then loaded into the workload's backend (one ``digest`` call), so a probe
        on it attaches when armed instead of waiting for the library to appear mid-workload (a short
        workload can end before an eBPF probe's pending attach).
        """
        with self._lock:
            row = self.control.execute(statements.EXTENSION_SCHEMA, (name,)).fetchone()
        if row is None:
            raise UserError(f"extension {name} is missing in database {self.conn.info.dbname}: "
                            f"CREATE EXTENSION {name} (needs a privileged role)")
        if name == "pgcrypto" and self.target.pid == self.own_pid:
            self.conn.execute(f"SELECT {row[0]}.digest('', 'md5')")

    def relations(self) -> RelationMap:
        """The server's relations and its user tables' columns, from the catalogs: what captures name."""
        with self._lock:
            return read_relations(self.control)

    def catalog_decoder(self) -> PgPageDecoder:
        """Pages decoded as the relation their read names (``mdread``'s relfilenode), with its columns."""
        return PgPageDecoder(relations=self.relations())

    def columns(self, relation: str) -> tuple[PgColumn, ...]:
        """The relation's attributes in attnum order (dropped ones too: they still occupy tuple slots)."""
        with self._lock:
            rows = self.control.execute(statements.COLUMNS, (relation,)).fetchall()
        return tuple(PgColumn(*r) for r in rows)

    def libpq_env(self, dbname: str) -> dict:
        """libpq's variables for a tool (pgbench) reaching the same server, never argv; ``PGPASSWORD`` is the
        password this connection used (typed, keyring, PGPASSWORD or .pgpass), for the tool's passfile."""
        info = self.conn.info
        env = {"PGHOST": info.host, "PGPORT": str(info.port), "PGUSER": info.user, "PGDATABASE": dbname}
        if info.password:
            env["PGPASSWORD"] = info.password
        return env
