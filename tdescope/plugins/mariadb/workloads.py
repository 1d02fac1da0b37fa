"""MariaDB experiments: seed 000's A/B DML on an encrypted table and its plain twin, and seed 003's
finding that decryption happens in the I/O path (a cold scan decrypts, a warm one does not).

What each creates is said up front: the lab database ``tdescope_lab`` with
``test_tab_tde`` (``ENCRYPTED=YES``), ``test_tab_non`` (``ENCRYPTED=NO``), and for
the I/O-path scan ``scan_tde`` and ``evict_pad`` (a table bigger than the buffer
pool, read to push the scanned table's pages out).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Mapping
from typing import Any

from tdescope.app.engines.ab_dml import run_ab_dml
from tdescope.app.engines.api import WorkloadControl, wanted_sides
from tdescope.app.engines.sql_workload import repeat_sql
from tdescope.app.errors import UserError
from tdescope.app.events import PhaseName, PhaseTiming, Side, WorkloadResult
from tdescope.app.system.procstat import thread_cpu_seconds
from tdescope.app.system.statement_text import mask_error

__all__ = ["DEFAULTS", "MARKER", "ab_dml", "create_lab_tables", "failed_sql_message", "io_path", "run_sql"]

DEFAULTS: dict[str, dict[str, Any]] = {
    "ab_dml": {"groups": 20, "ids_per_group": 1000},
    "io_path": {"rows": 3000, "evict_rows": 60000},
    "cold_warm": {"rows": 8000, "rounds": 3},  # ~90 pages: fits the old end of the lab's 379-page LRU, so a warm scan is warm
}
#: Text every row of the scanned table holds: it shows in decrypted pages only.
MARKER = "tdescope-innodb-marker"
_SCHEMA = ("(grp INT NOT NULL, id INT NOT NULL, name VARCHAR(100), ts DATETIME, "
           "KEY test_tab_idx1 (grp, id, name, ts), KEY test_tab_idx2 (grp, name)) ENGINE=InnoDB")


def _exec(conn, sql: str, args=None):
    cur = conn.cursor()
    cur.execute(sql, args)
    return cur


def wait_until_encrypted(conn, timeout: float = 30.0) -> bool:
    """Wait for the encryption threads to finish encrypting every tablespace (a fresh lab's system
    tablespace takes a few seconds): until then they decrypt and encrypt pages on their own."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        busy = _exec(conn, "SELECT COUNT(*) FROM information_schema.INNODB_TABLESPACES_ENCRYPTION "
                           "WHERE ROTATING_OR_FLUSHING <> 0 OR (NAME = 'innodb_system' AND ENCRYPTION_SCHEME = 0)"
                     ).fetchone()[0]
        if not busy:
            return True
        time.sleep(0.1)
    return False


def create_lab_tables(conn, db: str) -> None:
    """The lab's database and seed 000's tables, encrypted and plain (empty)."""
    _exec(conn, f"CREATE DATABASE IF NOT EXISTS {db}")
    _exec(conn, f"USE {db}")
    _exec(conn, f"CREATE TABLE IF NOT EXISTS test_tab_tde {_SCHEMA} ENCRYPTED=YES ENCRYPTION_KEY_ID=1")
    _exec(conn, f"CREATE TABLE IF NOT EXISTS test_tab_non {_SCHEMA} ENCRYPTED=NO")


class _MariaDmlTable:
    """One side's table of :func:`ab_dml` (:class:`~tdescope.app.engines.ab_dml.DmlTable`)."""

    def __init__(self, conn, table: str) -> None:
        self.conn, self.table = conn, table

    def prepare(self) -> None:
        _exec(self.conn, f"TRUNCATE TABLE {self.table}")

    @contextlib.contextmanager
    def group(self):
        _exec(self.conn, "BEGIN")
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):  # a lost connection's own error is the one to say
                _exec(self.conn, "ROLLBACK")
            raise
        _exec(self.conn, "COMMIT")

    def insert(self, group: int, ids: int) -> None:
        self.conn.cursor().executemany(f"INSERT INTO {self.table} VALUES (%s, %s, %s, NOW())",
                                       [(group, i, f"abc_{i}".ljust(100, "x")) for i in range(1, ids + 1)])

    def delete(self, group: int) -> int:
        return self.conn.cursor().execute(f"DELETE FROM {self.table} WHERE grp = %s", (group,))

    def update(self, group: int) -> int:
        return self.conn.cursor().execute(f"UPDATE {self.table} SET name = RPAD(CONCAT('abc_', id), 100, 'y') "
                                          "WHERE grp = %s", (group,))

    def select(self, group: int) -> int:
        return len(_exec(self.conn, f"SELECT * FROM {self.table} WHERE grp = %s", (group,)).fetchall())


def ab_dml(conn, db: str, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """Seed 000's procedure (:func:`~tdescope.app.engines.ab_dml.run_ab_dml`) on ``test_tab_tde``, then on
    ``test_tab_non``, with the same parameters."""
    groups, ids = int(params["groups"]), int(params["ids_per_group"])
    if groups < 1 or ids < 1:
        raise UserError("groups and ids_per_group must be positive")
    create_lab_tables(conn, db)
    names = {"encrypted": "test_tab_tde", "plain": "test_tab_non"}
    tables = {side: _MariaDmlTable(conn, f"{db}.{names[side]}") for side in wanted_sides(params)}
    run = run_ab_dml(tables, groups, ids, lambda: control.cancelled,
                     lambda side, g, total: control.progress("ab_dml", side, g, total, f"{side}: group {g}/{total}"))
    return WorkloadResult(time.time(), "ab_dml", dict(params), run.phase_timings(), run.counts, run.cancelled)


def _status(conn, name: str) -> int:
    return int(_exec(conn, "SHOW GLOBAL STATUS LIKE %s", (name,)).fetchone()[1])


def prepare_io_path(conn, db: str, rows: int, evict_rows: int) -> None:
    """``scan_tde`` (``rows`` rows holding :data:`MARKER`) and ``evict_pad`` (bigger than the buffer pool)."""
    create_lab_tables(conn, db)
    _exec(conn, f"DROP TABLE IF EXISTS {db}.scan_tde")
    _exec(conn, f"CREATE TABLE {db}.scan_tde (id INT PRIMARY KEY, note VARCHAR(200)) ENCRYPTED=YES")
    _exec(conn, f"INSERT INTO {db}.scan_tde SELECT seq, CONCAT('{MARKER} ', seq, ' ', REPEAT('r', 120)) "
                f"FROM seq_1_to_{int(rows)}")
    have = _exec(conn, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                       "AND TABLE_NAME = 'evict_pad'", (db,)).fetchone()[0]
    if not have:
        _exec(conn, f"CREATE TABLE {db}.evict_pad (id INT PRIMARY KEY, pad CHAR(200)) ENCRYPTED=NO")
        _exec(conn, f"INSERT INTO {db}.evict_pad SELECT seq, REPEAT('p', 200) FROM seq_1_to_{int(evict_rows)}")


def evict(conn, db: str, settle_s: float = 1.0, timeout: float = 10.0) -> None:
    """Push ``scan_tde``'s pages out of the buffer pool by reading a table bigger than it, then wait
    until the server's page reads stop for ``settle_s`` (read-ahead it started completes meanwhile,
    and would evict pages of the next scans). A second batch of ~145 ``evict_pad`` page reads comes
    0.3-1 s after the scan ends (not read-ahead, not the encryption threads, not stats
    recalculation); with 0.2 s it landed in the next scans' counts on a loaded machine."""
    _exec(conn, f"SELECT SUM(LENGTH(pad)) FROM {db}.evict_pad FORCE INDEX (PRIMARY)").fetchall()
    deadline = time.monotonic() + timeout
    last, quiet_since = _status(conn, "Innodb_pages_read"), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.05)
        now = _status(conn, "Innodb_pages_read")
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= settle_s:
            return


def scan(conn, db: str) -> tuple[float, int]:
    """One full scan of ``scan_tde``: seconds, and pages the server read from disk meanwhile."""
    before = _status(conn, "Innodb_buffer_pool_reads")
    t = time.perf_counter()
    _exec(conn, f"SELECT COUNT(*), SUM(LENGTH(note)) FROM {db}.scan_tde FORCE INDEX (PRIMARY)").fetchall()
    return time.perf_counter() - t, _status(conn, "Innodb_buffer_pool_reads") - before


def io_path(conn, db: str, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """A cold scan (its pages pushed out of the buffer pool first) then a warm scan of the same table.

    The server's own counter (``Innodb_buffer_pool_reads``) says how many pages each scan read
    from disk; a decrypt probe counts the decryptions (the second scan has none)."""
    rows, evict_rows = int(params["rows"]), int(params["evict_rows"])
    if rows < 1 or evict_rows < 1:
        raise UserError("rows and evict_rows must be positive")
    control.progress("io_path", "setup", 0, 3, "creating scan_tde and evict_pad…")
    prepare_io_path(conn, db, rows, evict_rows)
    evict(conn, db)
    timings, counts = [], {}
    for step, side in enumerate(("cold", "warm"), start=1):
        if control.cancelled:
            break
        control.progress("io_path", side, step - 1, 2, f"{side} scan…")  # the scan's start, for per-scan counts
        elapsed, reads = scan(conn, db)
        timings.append(PhaseTiming(side, "scan", elapsed))
        counts[side] = {"Pages read from disk": reads}
        control.progress("io_path", side, step, 2, f"{side} scan: {reads} pages read from disk")
    return WorkloadResult(time.time(), "io_path", dict(params), tuple(timings), counts, control.cancelled)


def _server_cpu_s(pid: int | None) -> float:
    """The server's CPU seconds from this machine's /proc (0 when it runs elsewhere: ``pid`` None, over ssh)."""
    return (thread_cpu_seconds(pid) or 0.0) if pid is not None else 0.0


def cold_warm(conn, db: str, pid: int | None, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """Seed 002's 2×2: encrypted and plain tables of the same rows, each scanned cold (pushed out of the
    buffer pool first) and warm, ``rounds`` times in turn; the server's CPU time per scan is measured
    beside the elapsed time (the seed's claim: encryption costs CPU on cold reads only)."""
    rows, rounds = int(params["rows"]), int(params["rounds"])
    if rows < 1 or rounds < 1:
        raise UserError("rows and rounds must be positive")
    create_lab_tables(conn, db)
    control.progress("cold_warm", "setup", 0, 1, f"creating cw_tde and cw_non ({rows} rows each)…")
    for name, enc in (("cw_tde", "YES"), ("cw_non", "NO")):
        _exec(conn, f"DROP TABLE IF EXISTS {db}.{name}")
        _exec(conn, f"CREATE TABLE {db}.{name} (id INT PRIMARY KEY, note VARCHAR(200)) ENCRYPTED={enc}")
        _exec(conn, f"INSERT INTO {db}.{name} SELECT seq, CONCAT('{MARKER} ', seq, ' ', REPEAT('r', 120)) "
                    f"FROM seq_1_to_{rows}")
    prepare_io_path(conn, db, 10, max(60000, rows))  # evict_pad: bigger than the pool
    elapsed: dict[tuple[str, str], list[float]] = {}
    cpu: dict[tuple[str, str], list[float]] = {}
    reads: dict[tuple[str, str], list[int]] = {}
    step, total = 0, rounds * 4
    for _ in range(rounds):
        for side, table in ((Side.ENCRYPTED, "cw_tde"), (Side.PLAIN, "cw_non")):
            for phase in (PhaseName.COLD, PhaseName.WARM):
                if control.cancelled:
                    break
                if phase == PhaseName.COLD:
                    evict(conn, db)
                c0, r0, t0 = _server_cpu_s(pid), _status(conn, "Innodb_buffer_pool_reads"), time.perf_counter()
                _exec(conn, f"SELECT COUNT(*), SUM(LENGTH(note)) FROM {db}.{table} FORCE INDEX (PRIMARY)").fetchall()
                elapsed.setdefault((side, phase), []).append(time.perf_counter() - t0)
                cpu.setdefault((side, phase), []).append(_server_cpu_s(pid) - c0)
                reads.setdefault((side, phase), []).append(_status(conn, "Innodb_buffer_pool_reads") - r0)
                step += 1
                control.progress("cold_warm", side, step, total, f"{side} {phase} scan {step}/{total}")
    med = lambda xs: sorted(xs)[len(xs) // 2]  # noqa: E731
    timings = [PhaseTiming(side, phase, med(v)) for (side, phase), v in elapsed.items()]
    counts = {f"{side} {phase}": {"pages read from disk (median)": med(reads[(side, phase)]),
                                  # the server's CPU only when it runs here (not over --ssh)
                                  **({"server CPU ms (median)": round(med(cpu[(side, phase)]) * 1000, 1)}
                                     if pid is not None else {})}
              for side, phase in elapsed}
    return WorkloadResult(time.time(), "cold_warm", dict(params), tuple(timings), counts, control.cancelled)


def failed_sql_message(server_message: str) -> str:
    """The one line for the user's SQL failing: the server's message without the statement's literals
    (it quotes the statement from the error on), since it is recorded as a Problem."""
    return f"SQL failed: {mask_error(server_message, 'mysql')}"


def run_sql(conn, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """The user's SQL, ``repeat`` times (``tdescope capture --sql``)."""
    import pymysql

    def execute(sql: str) -> None:
        try:
            _exec(conn, sql).fetchall()
        except pymysql.err.MySQLError as exc:
            raise UserError(failed_sql_message(str(exc.args[-1] if exc.args else exc))) from None

    return repeat_sql(execute, str(params["sql"]), int(params.get("repeat", 1)), control)
