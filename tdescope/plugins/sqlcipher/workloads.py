"""The lab's experiments, run inside the lab worker on its two databases.

Modelled on the seeds: seed 000's TDE vs non-TDE DML procedure (A/B DML) and
seed 002's point that encryption costs only when pages move between disk and
memory (cold vs warm read). Each function takes an open encrypted and plain
connection pair, reports progress through ``emit`` and stops at the next
statement boundary when ``cancelled()`` turns true, rolling back the open
transaction so both databases stay consistent.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable
from typing import Any

from tdescope.app.engines.ab_dml import Cancelled, run_ab_dml
from tdescope.app.events import PhaseName

__all__ = ["DEFAULTS", "SCHEMA", "ab_dml", "cold_warm_read", "reset_table"]

#: Table and indexes as in seed 000 (test_tab_tde / test_tab_non).
SCHEMA = (
    "CREATE TABLE IF NOT EXISTS test_tab (grp INTEGER, id INTEGER, name TEXT, ts TEXT)",
    "CREATE INDEX IF NOT EXISTS test_tab_idx1 ON test_tab (grp, id, name, ts)",
    "CREATE INDEX IF NOT EXISTS test_tab_idx2 ON test_tab (grp, name)",
)

DEFAULTS: dict[str, dict[str, Any]] = {
    "ab_dml": {"groups": 40, "ids_per_group": 2000, "cache_pages": 200},
    "cold_warm": {"rows": 20000, "cache_pages": 100000},
}

_PAD = "x" * 100
Emit = Callable[[dict], None]


def reset_table(conn) -> None:
    """Recreate the test table and its indexes, empty."""
    conn.execute("DROP TABLE IF EXISTS test_tab")
    for stmt in SCHEMA:
        conn.execute(stmt)
    conn.commit()


def _name(i: int) -> str:
    # rpad('abc_'||level, 100, 'x') in the seed's procedure
    return (f"abc_{i}" + _PAD)[:100]


class _LiteDmlTable:
    """One side's ``test_tab`` of :func:`ab_dml` (:class:`~tdescope.app.engines.ab_dml.DmlTable`)."""

    def __init__(self, conn, cache_pages: int, ids: int) -> None:
        self.conn, self.cache_pages = conn, cache_pages
        self.ids = ids  # rows per group: the LIMIT of the statements after the insert

    def prepare(self) -> None:
        reset_table(self.conn)
        self.conn.execute(f"PRAGMA cache_size = {self.cache_pages}")

    @contextlib.contextmanager
    def group(self):
        try:
            yield
        except BaseException:
            self.conn.rollback()  # the open group's statements go; committed groups stay
            raise
        self.conn.commit()

    def insert(self, group: int, ids: int) -> None:
        self.conn.executemany("INSERT INTO test_tab VALUES (?, ?, ?, ?)",
                              [(group, i, _name(i), _now()) for i in range(1, ids + 1)])

    def delete(self, group: int) -> int:
        return self.conn.execute("DELETE FROM test_tab WHERE rowid IN (SELECT rowid FROM test_tab WHERE grp = ? "
                                 "LIMIT ?)", (group, self.ids)).rowcount

    def update(self, group: int) -> int:
        return self.conn.execute("UPDATE test_tab SET name = substr('abc_' || id || ?, 1, 100) WHERE rowid IN "
                                 "(SELECT rowid FROM test_tab WHERE grp = ? LIMIT ?)", (_PAD, group, self.ids)).rowcount

    def select(self, group: int) -> int:
        return sum(1 for _ in self.conn.execute("SELECT * FROM test_tab WHERE grp = ? LIMIT ?", (group, self.ids)))


def ab_dml(sides: dict, params: dict, emit: Emit, cancelled: Callable[[], bool]) -> dict:
    """Seed 000's test procedure (:func:`~tdescope.app.engines.ab_dml.run_ab_dml`) on each side with the same
    parameters.

    Parameters
    ----------
    sides : dict
        ``{"encrypted": conn, "plain": conn}``, run in that order.
    params : dict
        ``groups``, ``ids_per_group``, ``cache_pages`` (a page cache smaller
        than the data, so pages really travel through the cipher).

    Returns
    -------
    dict
        ``timings`` {side: {phase: seconds, "total": seconds}}, ``counts``
        {side: {Insert, Delete, Update, Select}}, ``cancelled``.
    """
    groups = int(params["groups"])
    ids = int(params["ids_per_group"])
    cache = int(params["cache_pages"])
    if groups < 1 or ids < 1 or cache < 1:
        raise ValueError("groups, ids_per_group and cache_pages must be positive")
    tables = {side: _LiteDmlTable(conn, cache, ids) for side, conn in sides.items()}
    run = run_ab_dml(tables, groups, ids, cancelled, lambda side, g, total: emit(
        {"ev": "progress", "side": side, "done": g, "total": total, "message": f"{side}: group {g}/{total}"}))
    return {"timings": run.timings, "counts": run.counts, "cancelled": run.cancelled}


def cold_warm_read(sides: dict, paths: dict, params: dict, emit: Emit, cancelled: Callable[[], bool],
                   reopen: Callable[[str], Any]) -> dict:
    """Seed 002's experiment: a full scan with an empty page cache, then a warm one.

    Cold: a fresh connection (empty SQLite page cache) after asking the kernel to
    drop the file's cached pages, so every page is read and, on the encrypted
    side, decrypted. Warm: the same scan again on that connection, all pages in
    the page cache, no decryption.
    """
    rows = int(params["rows"])
    cache = int(params["cache_pages"])
    if rows < 1 or cache < 1:
        raise ValueError("rows and cache_pages must be positive")
    for side, conn in sides.items():
        have = conn.execute("SELECT count(*) FROM sqlite_master WHERE name = 'test_tab'").fetchone()[0]
        count = conn.execute("SELECT count(*) FROM test_tab").fetchone()[0] if have else 0
        if count != rows:
            reset_table(conn)
            conn.executemany(
                "INSERT INTO test_tab VALUES (?, ?, ?, ?)",
                ((1 + i // 1000, i, _name(i), _now()) for i in range(rows)),
            )
            conn.commit()
    elapsed: dict[str, dict[str, float]] = {}
    cpu: dict[tuple[str, str], float] = {}
    scan = "SELECT count(*), sum(length(name)), max(ts) FROM test_tab NOT INDEXED"
    for step, side in enumerate(sides):
        _check(cancelled)
        _drop_os_cache(paths[side])
        conn = reopen(side)  # empty page cache; key derivation happens here, untimed
        conn.execute(f"PRAGMA cache_size = {cache}")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        took = {}
        for scan_name in (PhaseName.COLD, PhaseName.WARM):
            # each scan says when it starts and ends (worker's clock): a probe's hits are counted per scan
            emit({"ev": "progress", "side": scan_name, "done": step, "total": len(sides), "ts": time.time(),
                  "message": f"{side}: {scan_name} scan…"})
            t, c = time.perf_counter(), time.thread_time()
            conn.execute(scan).fetchone()
            took[scan_name] = time.perf_counter() - t
            cpu[side, scan_name] = time.thread_time() - c  # the scanning thread's CPU: the embedded "server"
            emit({"ev": "progress", "side": scan_name, "done": step, "total": len(sides), "ts": time.time(),
                  "message": f"{side}: {scan_name} scan {took[scan_name] * 1000:.1f} ms"})
        cold, warm = took["cold"], took["warm"]
        elapsed[side] = {"cold": cold, "warm": warm}
        emit({"ev": "progress", "side": side, "done": step + 1, "total": len(sides),
              "message": f"{side}: cold {cold * 1000:.1f} ms, warm {warm * 1000:.1f} ms"})
    counts = {s: {"Rows": rows} for s in sides}
    counts.update({f"{side} {phase}": {"server CPU ms": round(sec * 1000, 3)} for (side, phase), sec in cpu.items()})
    return {"timings": elapsed, "counts": counts, "cancelled": False}


def _check(cancelled: Callable[[], bool]) -> None:
    if cancelled():
        raise Cancelled


def _now() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime()) + f".{time.time_ns() % 10**9:09d}"


def _drop_os_cache(path: str) -> None:
    """Ask the kernel to forget the file's cached pages (best effort, no root needed)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
