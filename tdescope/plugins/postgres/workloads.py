"""Experiments on a PostgreSQL server: seed 000's A/B DML, seed 003's column-crypto matrix and I/O path,
seed 004's pgbench.

Each function takes the workload connection (whose backend is the probe
target), the parameters and a :class:`~tdescope.app.engines.api.WorkloadControl`,
and returns a :class:`~tdescope.app.events.WorkloadResult`. They stop at the
next statement boundary once cancelled. The lab passphrase is passed as a bound
parameter, so it never shows in pg_stat_activity's query text.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from tdescope.app.ab.result_table import Cell, ResultTable, seconds_cell, text_cell
from tdescope.app.engines.ab_dml import run_ab_dml
from tdescope.app.engines.api import WorkloadControl, wanted_sides
from tdescope.app.engines.sql_workload import repeat_sql
from tdescope.app.errors import UserError
from tdescope.app.events import PhaseTiming, Side, WorkloadResult
from tdescope.app.system.child_env import child_env
from tdescope.app.system.procstat import thread_cpu_seconds
from tdescope.app.system.private_files import open_new_private
from tdescope.app.system.statement_text import mask_error

__all__ = ["CREATES", "DEFAULTS", "MATRIX_CELLS", "ab_dml", "busy_pgbench_client", "column_crypto_matrix", "drop", "matrix_table", "io_path",
           "pgbench_ro_rw", "run_sql"]

LAB_KEY = "tdescope-lab-passphrase"  # a lab table's key: the data is generated, nothing to protect
DEFAULTS: dict[str, dict[str, Any]] = {
    "ab_dml": {"groups": 10, "ids_per_group": 500},
    "matrix": {"rows": 2000, "value_bytes": 256, "s2k_mode": 3, "rounds": 3},
    "io_path": {"rows": 500},  # ~5 heap pages: under a quarter of even a 256 kB shared_buffers
    "pgbench": {"scale": 2, "clients": 2, "seconds": 5, "database": "tdescope_pgbench"},
    "sql": {"sql": "SELECT 1", "repeat": 1},
}
#: What each workload creates in the server, by name: said before it runs, dropped by :func:`drop`.
CREATES: dict[str, tuple[str, ...]] = {
    "ab_dml": ("table tdescope_ab_encrypted", "table tdescope_ab_plain"),
    "matrix": ("table tdescope_matrix",),
    "io_path": ("table tdescope_io_path",),
    "pgbench": ("database tdescope_pgbench (or the one named in its parameters)",),
}


def drop(conn, workload: str, params: Mapping[str, Any] | None = None) -> None:
    """Drop what ``workload`` created (tables, or pgbench's scratch database); nothing else."""
    if workload == "ab_dml":
        conn.execute("DROP TABLE IF EXISTS tdescope_ab_encrypted, tdescope_ab_plain")
    elif workload == "matrix":
        conn.execute("DROP TABLE IF EXISTS tdescope_matrix")
    elif workload == "io_path":
        conn.execute("DROP TABLE IF EXISTS tdescope_io_path")
    elif workload == "pgbench":
        db = str((params or DEFAULTS["pgbench"]).get("database", DEFAULTS["pgbench"]["database"]))
        if not re.fullmatch(r"tdescope_[a-z0-9_]*", db):
            raise UserError(f"will not drop database {db!r}: tdescope drops only the tdescope_* databases it made")
        conn.execute(f"DROP DATABASE IF EXISTS {db}")


#: (label, pgp_sym_encrypt options or None for the plain column)
MATRIX_CELLS = (
    ("plain", None),
    *((f"{name}{' no-mdc' if nomdc else ''}", f"cipher-algo={algo}" + (", disable-mdc=1" if nomdc else ""))
      for name, algo in (("AES-128", "aes128"), ("AES-192", "aes192"), ("AES-256", "aes256"), ("3DES", "3des"))
      for nomdc in (False, True)),
)


def _need_pgcrypto(conn) -> None:
    if not conn.execute("SELECT count(*) FROM pg_extension WHERE extname = 'pgcrypto'").fetchone()[0]:
        raise UserError("extension pgcrypto is missing in database "
                        f"{conn.info.dbname}: CREATE EXTENSION pgcrypto (needs a privileged role)")


class _PgDmlTable:
    """One side's table of :func:`ab_dml` (:class:`~tdescope.app.engines.ab_dml.DmlTable`)."""

    def __init__(self, conn, side: str, access_method: str | None) -> None:
        encrypted = side == Side.ENCRYPTED
        self.conn, self.table = conn, f"tdescope_ab_{side}"
        # pgcrypto's column (put, column type, get), or the plain one: table-level encryption (pg_tde's
        # tde_heap_basic) keeps the plain columns in a table of another access method
        pgcrypto = encrypted and not access_method
        self.put, self.coltype, self.get = (("pgp_sym_encrypt(%s, %s)", "bytea", "pgp_sym_decrypt(name, %s)")
                                            if pgcrypto else ("%s", "text", "name"))
        self.key = (LAB_KEY,) if pgcrypto else ()
        self.using = f" USING {access_method}" if access_method and encrypted else ""

    def prepare(self) -> None:
        self.conn.execute(f"DROP TABLE IF EXISTS {self.table}")
        self.conn.execute(f"CREATE TABLE {self.table} (grp int, id int, name {self.coltype}, ts timestamptz){self.using}")
        self.conn.execute(f"CREATE INDEX ON {self.table} (grp, id)")

    def group(self):
        return self.conn.transaction()

    def insert(self, group: int, ids: int) -> None:
        with self.conn.cursor() as cur:
            cur.executemany(f"INSERT INTO {self.table} VALUES (%s, %s, {self.put}, now())",
                            [(group, i, f"abc_{i}".ljust(100, "x"), *self.key) for i in range(1, ids + 1)])

    def delete(self, group: int) -> int:
        return self.conn.execute(f"DELETE FROM {self.table} WHERE grp = %s", (group,)).rowcount

    def update(self, group: int) -> int:
        new = self.put.replace("%s", "('abc_' || id || repeat('y', 90))", 1)
        return self.conn.execute(f"UPDATE {self.table} SET name = {new} WHERE grp = %s", (*self.key, group)).rowcount

    def select(self, group: int) -> int:
        return len(self.conn.execute(f"SELECT grp, id, {self.get} FROM {self.table} WHERE grp = %s",
                                     (*self.key, group)).fetchall())


def ab_dml(conn, params: Mapping[str, Any], control: WorkloadControl,
           access_method: str | None = None) -> WorkloadResult:
    """Seed 000's procedure (:func:`~tdescope.app.engines.ab_dml.run_ab_dml`) on a table whose ``name`` is
    pgp_sym_encrypt'ed, then on the plain twin.

    ``access_method`` (``tde_heap_basic``): the encrypted side is a table of that access method instead,
    its ``name`` column plain text (table-level encryption, no pgcrypto).
    """
    if not access_method:
        _need_pgcrypto(conn)
    groups, ids = int(params["groups"]), int(params["ids_per_group"])
    if groups < 1 or ids < 1:
        raise UserError("groups and ids_per_group must be positive")
    tables = {side: _PgDmlTable(conn, side, access_method) for side in wanted_sides(params)}
    run = run_ab_dml(tables, groups, ids, lambda: control.cancelled,
                     lambda side, g, total: control.progress("ab_dml", side, g, total, f"{side}: group {g}/{total}"))
    return WorkloadResult(time.time(), "ab_dml", dict(params), run.phase_timings(), run.counts, run.cancelled)


def column_crypto_matrix(conn, params: Mapping[str, Any], control: WorkloadControl,
                         pid: int | None = None) -> WorkloadResult:
    """Seed 003 on pgcrypto: ``avg(length(decrypted))`` over N rows per cipher, with and without MDC.

    Each cell decrypts every row of its own bytea column; ``s2k_mode`` 3 is
    pgcrypto's default (iterated+salted S2K: a key derivation of 65 536 hashed
    bytes per row, which dominates), 1 leaves only the cipher and integrity work.
    ``pid``: ``conn``'s backend when it runs on this machine; each cell's CPU time
    there is counted too (``server CPU ms (median)``), which other load does not stretch.
    """
    _need_pgcrypto(conn)
    rows, size, s2k = int(params["rows"]), int(params["value_bytes"]), int(params["s2k_mode"])
    rounds = int(params.get("rounds", 1))
    if rows < 1 or not 1 <= size <= 100_000 or s2k not in (0, 1, 3) or not 1 <= rounds <= 50:
        raise UserError("rows must be positive, value_bytes 1..100000, s2k_mode 0, 1 or 3, rounds 1..50")
    total = len(MATRIX_CELLS)
    conn.execute("DROP TABLE IF EXISTS tdescope_matrix")
    conn.execute("CREATE TABLE tdescope_matrix (id int, plain text)")
    conn.execute("INSERT INTO tdescope_matrix SELECT g, left(repeat(md5(g::text), %s), %s) "
                 "FROM generate_series(1, %s) g", ((size + 31) // 32, size, rows))
    for i, (label, options) in enumerate(MATRIX_CELLS[1:], start=1):
        if control.cancelled:
            break
        col = f"c{i}"
        conn.execute(f"ALTER TABLE tdescope_matrix ADD COLUMN {col} bytea")
        conn.execute(f"UPDATE tdescope_matrix SET {col} = pgp_sym_encrypt(plain, %s, %s)",
                     (LAB_KEY, f"{options}, s2k-mode={s2k}"))
        control.progress("matrix", "setup", i, total - 1, f"encrypted column {label}")
    conn.execute("VACUUM ANALYZE tdescope_matrix")
    # the cells interleaved round by round, each the median of its rounds: a busy moment hits every cell alike
    took: dict[str, list[float]] = {label: [] for label, _ in MATRIX_CELLS}
    cpu: dict[str, list[float]] = {label: [] for label, _ in MATRIX_CELLS}
    cpu_of = (lambda: thread_cpu_seconds(pid)) if pid is not None else (lambda: None)
    for r in range(rounds):
        for i, (label, _) in enumerate(MATRIX_CELLS):
            if control.cancelled:
                break
            expr = "plain" if i == 0 else f"pgp_sym_decrypt(c{i}, %s)"
            args = () if i == 0 else (LAB_KEY,)
            c, t = cpu_of(), time.perf_counter()
            conn.execute(f"SELECT avg(length({expr})) FROM tdescope_matrix", args).fetchone()
            took[label].append(time.perf_counter() - t)
            if c is not None and (c1 := cpu_of()) is not None:
                cpu[label].append(c1 - c)
            control.progress("matrix", label, r * total + i + 1, rounds * total,
                             f"{label}: {took[label][-1]:.3f} s (round {r + 1}/{rounds})")
    timings = [PhaseTiming(label, "total", statistics.median(values)) for label, values in took.items() if values]
    counts = {t.side: {"Rows": rows, **({"server CPU ms (median)": round(statistics.median(cpu[t.side]) * 1000, 3)}
                                         if len(cpu[t.side]) == len(took[t.side]) else {})} for t in timings}
    result = WorkloadResult(time.time(), "matrix", dict(params), tuple(timings), counts, control.cancelled)
    table = matrix_table(result)
    return dataclasses.replace(result, table=(table.header, *table.text_rows()))  # the text a recording keeps


def matrix_table(result: WorkloadResult) -> ResultTable:
    """The matrix's cells as numbers: seconds, µs per row and the ratio to the plain cell (from the timings)."""
    rows = int(result.params["rows"])
    plain = result.timings[0].elapsed_s if result.timings else 0.0
    cells = tuple((text_cell(t.side), seconds_cell(t.elapsed_s), Cell(value=t.elapsed_s / rows * 1e6, digits=1),
                   Cell(value=t.elapsed_s / plain if plain else None, digits=1)) for t in result.timings)
    return ResultTable(title="Column-crypto matrix", header=("cell", "seconds", "µs per row", "ratio to plain"),
                       rows=cells, cancelled=result.cancelled)


_TPS = re.compile(r"tps = ([0-9.]+) \(without initial connection time\)")


def busy_pgbench_client(targets) -> int | None:
    """The pid of a pgbench client backend running the benchmark's transactions, or None.

    ``pgbench -i``'s loader also names pgbench_accounts (COPY, VACUUM, ALTER TABLE) and exits when the
    load is done: only a client running the benchmark's own statements is chosen.
    """
    for t in targets:
        statement = t.activity.lstrip().upper()
        if t.application == "pgbench" and statement.startswith(("SELECT ABALANCE", "UPDATE PGBENCH_")):
            return t.pid
    return None


def pgbench_ro_rw(conn, params: Mapping[str, Any], control: WorkloadControl,
                  env_for: Callable[[str], dict], pgbench: str | None = None) -> WorkloadResult:
    """Seed 004's shape: pgbench read-only then read-write on a scratch database; TPS per mode.

    ``env_for(dbname)`` gives libpq environment variables (PGHOST, PGPORT,
    PGUSER, PGPASSWORD...) so the password never reaches a command line. pgbench
    gets an allowlisted environment with them, the password in a 0600 passfile
    (``PGPASSFILE``) rather than in its environment, removed when pgbench is done.
    ``pgbench``: the program's path (a lab's own), else the one on PATH or PostgreSQL 15's.
    """
    pgbench = pgbench or shutil.which("pgbench") or "/usr/lib/postgresql/15/bin/pgbench"
    if not os.path.exists(pgbench):
        raise UserError("pgbench is not installed (postgresql-contrib / postgresql-client)")
    db = str(params["database"])
    if not re.fullmatch(r"[a-z_][a-z0-9_]*", db):
        raise UserError(f"scratch database name {db!r} must be a plain lower-case identifier")
    if not conn.execute("SELECT count(*) FROM pg_database WHERE datname = %s", (db,)).fetchone()[0]:
        try:
            conn.execute(f"CREATE DATABASE {db}")
        except Exception as exc:  # noqa: BLE001 - one line for the user
            raise UserError(f"cannot create scratch database {db}: {str(exc).strip().splitlines()[0]}") from None
    libpq = env_for(db)
    with _passfile(libpq.pop("PGPASSWORD", None)) as passfile:
        env = child_env(_LIBPQ_SETTINGS, **libpq, **({"PGPASSFILE": passfile} if passfile else {}))
        return _pgbench_runs(pgbench, env, params, control, db)


#: libpq's variables that say how to reach a server and hold no secret: the user's TLS and service settings
#: reach pgbench as they reached tdescope's own connection (PGPASSWORD and PGPASSFILE are not among them).
_LIBPQ_SETTINGS = ("PGSSLMODE", "PGSSLROOTCERT", "PGSSLCERT", "PGSSLKEY", "PGSSLCRL", "PGSSLCRLDIR", "PGSSLSNI",
                   "PGREQUIRESSL", "PGGSSENCMODE", "PGKRBSRVNAME", "PGGSSLIB", "PGSERVICE", "PGSERVICEFILE",
                   "PGSYSCONFDIR", "PGCONNECT_TIMEOUT", "PGTARGETSESSIONATTRS", "PGCLIENTENCODING", "PGOPTIONS")


@contextlib.contextmanager
def _passfile(password: str | None):
    """A libpq passfile holding ``password`` for any server (0600 in a 0700 temporary folder), or None."""
    if not password:
        yield None
        return
    folder = tempfile.mkdtemp(prefix="tdescope-pgpass-")  # 0700
    try:
        path = os.path.join(folder, "pgpass")
        with open_new_private(path) as fh:
            fh.write(("*:*:*:*:" + password.replace("\\", "\\\\").replace(":", "\\:") + "\n").encode())
        yield path
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _pgbench_runs(pgbench: str, env: dict, params: Mapping[str, Any], control: WorkloadControl,
                  db: str) -> WorkloadResult:
    """pgbench -i, then read-only and read-write runs, with ``env`` (libpq's variables, no password)."""
    scale, clients, secs = int(params["scale"]), int(params["clients"]), int(params["seconds"])

    def bench(argv: list[str], what: str) -> str:
        proc = subprocess.run([pgbench, *argv], env=env, capture_output=True, text=True, timeout=secs * 4 + 600)
        if proc.returncode != 0:
            raise UserError(f"pgbench {what} failed: {(proc.stderr or proc.stdout).strip().splitlines()[-1]}")
        return proc.stdout + proc.stderr

    control.progress("pgbench", "init", 0, 3, f"pgbench -i -s {scale}")
    t = time.perf_counter()
    bench(["-i", "-q", "-s", str(scale)], "init")
    timings = [PhaseTiming("init", "total", time.perf_counter() - t)]
    table = [("mode", "scale", "clients", "seconds", "TPS")]
    for step, (mode, flags) in enumerate((("read-only", ["-S"]), ("read-write", [])), start=1):
        if control.cancelled:
            break
        out = bench([*flags, "-c", str(clients), "-j", str(min(clients, 2)), "-T", str(secs)], mode)
        m = _TPS.search(out)
        tps = float(m.group(1)) if m else float("nan")
        timings.append(PhaseTiming(mode, "tps", tps))
        table.append((mode, str(scale), str(clients), str(secs), f"{tps:.0f}"))
        control.progress("pgbench", mode, step + 1, 3, f"{mode}: {tps:.0f} TPS")
    return WorkloadResult(time.time(), "pgbench", dict(params), tuple(timings), {}, control.cancelled, tuple(table))


def _scan_blocks(conn, table: str) -> tuple[int, int]:
    """One full scan of ``table`` under EXPLAIN (ANALYZE, BUFFERS): shared blocks read and hit."""
    plan = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, TIMING OFF, FORMAT JSON) SELECT count(*), sum(length(note)) "
                        f"FROM {table}").fetchone()[0][0]["Plan"]
    return int(plan.get("Shared Read Blocks", 0)), int(plan.get("Shared Hit Blocks", 0))


def io_path(conn, params: Mapping[str, Any], control: WorkloadControl,
            access_method: str | None = None) -> WorkloadResult:
    """Seed 003's I/O-path finding on stock PostgreSQL: a cold then a warm scan of one small table.

    ``VACUUM FULL`` rewrites the table into a new file without passing through
    shared buffers, so none of its pages is cached: the cold scan reads each
    through ``mdread`` (from the OS page cache or disk), the warm one finds them
    all in shared buffers. A sequential scan of more than a quarter of
    shared_buffers goes through a small ring and would read again, so a bigger
    table is refused. The server's own counts (EXPLAIN BUFFERS) come with each scan.
    """
    rows = int(params["rows"])
    if rows < 1:
        raise UserError("rows must be positive")
    table = "tdescope_io_path"
    control.progress("io_path", "setup", 0, 3, f"creating {table} ({rows} rows)…")
    conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.execute(f"CREATE TABLE {table} (id int, note text)" + (f" USING {access_method}" if access_method else ""))
    conn.execute(f"INSERT INTO {table} SELECT g, 'tdescope-pg-marker ' || g || ' ' || md5(g::text) "
                 "FROM generate_series(1, %s) g", (rows,))
    conn.execute(f"VACUUM FULL {table}")  # the new file's pages are in no buffer
    pages, buffers = conn.execute("SELECT pg_relation_size(%s) / 8192, setting::bigint FROM pg_settings "
                                  "WHERE name = 'shared_buffers'", (table,)).fetchone()
    if pages * 4 >= buffers:
        raise UserError(f"{table} has {pages} pages, a quarter or more of shared_buffers ({buffers} pages): a scan "
                        "would go through a small ring and the second one read again; lower rows")
    conn.execute(f"EXPLAIN SELECT count(*), sum(length(note)) FROM {table}")  # catalogs read before the cold scan
    timings, counts = [], {}
    for step, side in enumerate(("cold", "warm"), start=1):
        if control.cancelled:
            break
        control.progress("io_path", side, step - 1, 2, f"{side} scan…")  # the scan's start, for per-scan counts
        t = time.perf_counter()
        read, hit = _scan_blocks(conn, table)
        timings.append(PhaseTiming(side, "scan", time.perf_counter() - t))
        counts[side] = {"blocks read (EXPLAIN BUFFERS)": read, "blocks hit in shared buffers": hit,
                        "table pages": pages}
        control.progress("io_path", side, step, 2, f"{side} scan: {read} blocks read, {hit} hit")
    return WorkloadResult(time.time(), "io_path", dict(params), tuple(timings), counts, control.cancelled)


def run_sql(conn, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """The user's SQL, ``repeat`` times, on the probed backend (``tdescope capture --sql``)."""
    def execute(sql: str) -> None:
        try:
            cur = conn.execute(sql)
            if cur.description is not None:
                cur.fetchall()
        except Exception as exc:  # noqa: BLE001 - the user's SQL failing is a one-line user error
            raise UserError(f"SQL failed: {mask_error(str(exc).strip().splitlines()[0])}") from None

    return repeat_sql(execute, str(params["sql"]), int(params.get("repeat", 1)), control)
