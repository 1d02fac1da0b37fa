"""Seed 003: reading an encrypted column, per algorithm, with and without NOMAC.

Column encryption keeps the value encrypted in the block and in the buffer
cache, so every read of the column decrypts it again. The seed timed
``select avg(length(a))`` on 32 million rows: AES128 1:03, AES192 1:06,
AES256 1:09, 3DES168 4:53; with ``'NOMAC'`` 0:22 / 0:23 / 0:26 / 3:59; the
plain column 0:03. This workload builds one table per variant (the seed's
``(id number, a varchar2(10) encrypt ...)``), fills each with the same number
of random 10-letter strings, and times the same query on each.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tdescope.app.engines.api import Workload, WorkloadControl
from tdescope.app.errors import UserError
from tdescope.app.events import PhaseTiming, WorkloadProgress, WorkloadResult

__all__ = ["ALGORITHMS", "ColumnVariant", "column_variants", "column_timing_workload",
           "run_column_timing", "variant_statements", "timing_table"]

#: Column encryption algorithms Oracle accepts in ``ENCRYPT USING '...'``.
ALGORITHMS = ("3DES168", "AES128", "AES192", "AES256")


@dataclass(frozen=True, slots=True)
class ColumnVariant:
    """One table of the comparison: an algorithm (None = plain) and whether NOMAC is set."""

    algorithm: str | None
    nomac: bool = False

    @property
    def table(self) -> str:
        if self.algorithm is None:
            return "tds_colenc_plain"
        return f"tds_colenc_{self.algorithm.lower()}{'_nomac' if self.nomac else ''}"

    @property
    def label(self) -> str:
        if self.algorithm is None:
            return "no encryption"
        return f"{self.algorithm}{' NOMAC' if self.nomac else ''}"

    @property
    def column_clause(self) -> str:
        """``a varchar2(10) encrypt using 'AES192' 'NOMAC'`` and the like."""
        if self.algorithm is None:
            return "a varchar2(10)"
        return f"a varchar2(10) encrypt using '{self.algorithm}'" + (" 'NOMAC'" if self.nomac else "")


def column_variants(algorithms=ALGORITHMS, with_nomac: bool = True) -> list[ColumnVariant]:
    """The plain table, then each algorithm with MAC and (optionally) with NOMAC."""
    unknown = [a for a in algorithms if a not in ALGORITHMS]
    if unknown:
        raise UserError(f"unknown column encryption algorithm {unknown[0]!r} (use {', '.join(ALGORITHMS)})")
    out = [ColumnVariant(None)]
    for alg in algorithms:
        out.append(ColumnVariant(alg))
        if with_nomac:
            out.append(ColumnVariant(alg, True))
    return out


def variant_statements(v: ColumnVariant) -> list[str]:
    """Drop (may fail: absent), create, and fill ``:rows`` random lowercase strings, as the seed did."""
    return [
        f"drop table {v.table} purge",
        f"create table {v.table} (id number, {v.column_clause})",
        f"insert into {v.table} select level, dbms_random.string('l', 10) from dual connect by level <= :rows",
        "commit",
    ]


def query_sql(v: ColumnVariant) -> str:
    """The timed query of the seed."""
    return f"select avg(length(a)) from {v.table}"


def timing_table(results: list[tuple[ColumnVariant, float]]) -> tuple[tuple, ...]:
    """Header + one row per variant: label, seconds, times the plain column."""
    plain = next((s for v, s in results if v.algorithm is None), None)
    rows: list[tuple] = [("Column", "Elapsed s", "x plain")]
    for v, secs in results:
        ratio = f"{secs / plain:.2f}" if plain else ""
        rows.append((v.label, f"{secs:.3f}", ratio))
    return tuple(rows)


def run_column_timing(conn, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """Create and fill the tables when asked, then time the query on each (``repeat`` times, best kept)."""
    name = "oracle.column_timing"
    rows = int(params.get("rows", 200_000))
    repeat = max(1, int(params.get("repeat", 3)))
    algs = tuple(a.strip().upper() for a in str(params.get("algorithms", ",".join(ALGORITHMS))).split(",") if a.strip())
    variants = column_variants(algs, bool(params.get("nomac", True)))
    cur = conn.cursor()
    results: list[tuple[ColumnVariant, float]] = []
    for i, v in enumerate(variants, 1):
        if control.cancelled:
            break
        if params.get("create", True):
            for sql in variant_statements(v):
                try:
                    cur.execute(sql, rows=rows) if ":rows" in sql else cur.execute(sql)
                except Exception as exc:  # noqa: BLE001 - the first drop may find nothing
                    if not (sql.startswith("drop") and "ORA-00942" in str(exc)):
                        raise UserError(f"{v.label}: {str(exc).splitlines()[0]}") from None
        best = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            cur.execute(query_sql(v))
            cur.fetchall()
            secs = time.perf_counter() - t0
            best = secs if best is None else min(best, secs)
        results.append((v, best))
        control.emit(WorkloadProgress(time.time(), name, v.label, i, len(variants), f"{best:.3f} s"))
    timings = tuple(
        PhaseTiming("plain" if v.algorithm is None else "encrypted", v.label, s) for v, s in results
    )
    return WorkloadResult(time.time(), name, {"rows": rows, "repeat": repeat, "algorithms": ",".join(algs)},
                          timings, {}, cancelled=control.cancelled, table=timing_table(results))


def column_timing_workload(conn) -> Workload:
    """Seed 003's column-encryption timing as a :class:`Workload` bound to ``conn``."""
    return Workload(
        name="oracle.column_timing",
        label="Column encryption: avg(length(col)) per algorithm (seed 003)",
        description="One table per algorithm with and without NOMAC, plus a plain one; "
                    "the best of N runs of select avg(length(a)) on each",
        params={"rows": 200_000, "repeat": 3, "algorithms": ",".join(ALGORITHMS), "nomac": True, "create": True},
        run=lambda params, control: run_column_timing(conn, params, control),
    )
