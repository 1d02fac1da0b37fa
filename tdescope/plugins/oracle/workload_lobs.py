"""Seed 001: loading and unloading LOBs, SecureFiles vs BasicFiles, LOGGING vs NOLOGGING.

The table is the seed's ``lob_test`` (11.2.0.4 on Exadata X2): five BLOB
columns that differ only in storage. Each column is loaded on its own with the
same LOBs, then read back, and the redo the session generated is measured as
the delta of its ``redo size`` statistic (V$MYSTAT join V$STATNAME). The
seed's finding to reproduce: NOLOGGING SecureFiles load ~9x faster than
NOLOGGING BasicFiles, and SecureFile LOGGING writes about as much redo as data.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from tdescope.app.engines.api import Workload, WorkloadControl
from tdescope.app.errors import UserError
from tdescope.app.events import PhaseTiming, WorkloadProgress, WorkloadResult

__all__ = ["CREATE_LOB_TEST", "LOB_COLUMNS", "REDO_SIZE_SQL", "lob_table", "lob_workload", "run_lob_load"]

CREATE_LOB_TEST = """\
CREATE TABLE lob_test (id     raw(16) default sys_guid() primary key,
                       lob1 BLOB,
                       lob2 BLOB,
                       lob3 BLOB,
                       lob4 BLOB,
                       lob5 BLOB)
        LOB(lob1) STORE AS SECUREFILE(
                  NOCOMPRESS NOCACHE LOGGING )
        LOB(lob2) STORE AS SECUREFILE(
                  NOCOMPRESS NOCACHE NOLOGGING)
        LOB(lob3) STORE AS SECUREFILE(
                  NOCOMPRESS NOCACHE FILESYSTEM_LIKE_LOGGING)
        LOB(lob4) STORE AS BASICFILE  (
                        NOCACHE LOGGING )
        LOB(lob5) STORE AS BASICFILE  (
                        NOCACHE NOLOGGING)"""

#: column -> its storage, as the seed declares it
LOB_COLUMNS = {
    "lob1": "SecureFile LOGGING",
    "lob2": "SecureFile NOLOGGING",
    "lob3": "SecureFile FILESYSTEM_LIKE_LOGGING",
    "lob4": "BasicFile LOGGING",
    "lob5": "BasicFile NOLOGGING",
}

REDO_SIZE_SQL = """\
select s.value
  from v$mystat s join v$statname n on n.statistic# = s.statistic#
 where n.name = 'redo size'"""


def insert_sql(column: str) -> str:
    """One LOB into one column; the other columns stay NULL."""
    if column not in LOB_COLUMNS:
        raise UserError(f"no LOB column {column!r} in lob_test")
    return f"insert into lob_test ({column}) values (:data)"


def unload_sql(column: str) -> str:
    """Every LOB of one column, for reading back."""
    return f"select {column} from lob_test where {column} is not null"


def lob_table(per_column: dict[str, dict[str, float]]) -> tuple[tuple, ...]:
    """Header + one row per column: storage, load s, unload s, redo MB, MB/s loaded."""
    rows: list[tuple] = [("Column", "Storage", "Load s", "Unload s", "Redo MB", "Load MB/s")]
    for col, m in per_column.items():
        mbps = m["mb"] / m["load_s"] if m.get("load_s") else 0.0
        rows.append((col, LOB_COLUMNS[col], f"{m['load_s']:.3f}", f"{m.get('unload_s', 0.0):.3f}",
                     f"{m['redo_bytes'] / 1e6:.1f}", f"{mbps:.1f}"))
    return tuple(rows)


def _redo(cur) -> int:
    cur.execute(REDO_SIZE_SQL)
    return int(cur.fetchone()[0])


def run_lob_load(conn, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """Per column: load ``count`` LOBs of ``size_kb`` KB, commit, read them back; time and redo each."""
    import oracledb

    name = "oracle.lob_load"
    count, size = int(params.get("count", 20)), int(params.get("size_kb", 1024)) * 1024
    columns = [c.strip() for c in str(params.get("columns", ",".join(LOB_COLUMNS))).split(",") if c.strip()]
    cur = conn.cursor()
    if params.get("create", True):
        try:
            cur.execute("drop table lob_test purge")
        except Exception as exc:  # noqa: BLE001 - absent on a fresh schema
            if "ORA-00942" not in str(exc):
                raise UserError(f"cannot drop lob_test: {str(exc).splitlines()[0]}") from None
        cur.execute(CREATE_LOB_TEST)
    payload = os.urandom(size)  # incompressible, so NOCOMPRESS and the wire see real bytes
    per_column: dict[str, dict[str, float]] = {}
    timings = []
    for i, col in enumerate(columns, 1):
        if control.cancelled:
            break
        sql = insert_sql(col)
        cur.setinputsizes(data=oracledb.DB_TYPE_BLOB)
        redo0 = _redo(cur)
        t0 = time.perf_counter()
        for _ in range(count):
            cur.execute(sql, data=payload)
        conn.commit()
        load_s = time.perf_counter() - t0
        redo = _redo(cur) - redo0
        t0 = time.perf_counter()
        cur.execute(unload_sql(col))
        for (lob,) in cur:
            lob.read()
        unload_s = time.perf_counter() - t0
        per_column[col] = {"load_s": load_s, "unload_s": unload_s, "redo_bytes": redo, "mb": count * size / 1e6}
        # Sides are storage variants here, not an encrypted/plain pair, so ratio() stays None.
        timings += [PhaseTiming(col, "load", load_s), PhaseTiming(col, "unload", unload_s)]
        control.emit(WorkloadProgress(time.time(), name, col, i, len(columns),
                                      f"load {load_s:.2f} s, redo {redo / 1e6:.1f} MB"))
    counts = {col: {"redo_bytes": int(m["redo_bytes"]), "lobs": count} for col, m in per_column.items()}
    return WorkloadResult(time.time(), name, {"count": count, "size_kb": size // 1024, "columns": ",".join(columns)},
                          tuple(timings), counts, cancelled=control.cancelled, table=lob_table(per_column))


def lob_workload(conn) -> Workload:
    """Seed 001 as a :class:`Workload` bound to ``conn``."""
    return Workload(
        name="oracle.lob_load",
        label="LOB load/unload: SecureFiles vs BasicFiles (seed 001)",
        description="Load and read back the same LOBs in each lob_test column; elapsed and redo size per column",
        params={"count": 20, "size_kb": 1024, "columns": ",".join(LOB_COLUMNS), "create": True},
        run=lambda params, control: run_lob_load(conn, params, control),
    )
