"""PostgreSQL 18's I/O worker processes: where page reads (and page-level pg_tde's decrypt) run.

With ``io_method=worker`` (PostgreSQL 18's default) a backend hands its reads to the
postmaster's "io worker" children; ``mdread`` and ``tde_decrypt_smgr_block`` then run
there, and a probe on the backend alone sees nothing. Watch mode probes them beside
the backend (:class:`~tdescope.app.probe.window.CaptureWindow`'s ``followers``). They are
found from the process table alone, with no SQL: the backend's parent is the postmaster,
and its children titled ``postgres: [cluster: ]io worker N`` are the workers.

Tested on recorded process tables (``ps -eo pid,ppid,args`` layout); unverified on a real
PostgreSQL 18 server (none can be built here).
"""

from __future__ import annotations

import re

from tdescope.app.system.process_table import ProcRow, read_proc

__all__ = ["IO_WORKER_TITLE", "PAGE_READ_RECIPES", "ProcRow", "io_workers", "parse_ps", "read_proc"]

#: The process title of an I/O worker (``cluster_name`` set: ``postgres: main: io worker 0``).
IO_WORKER_TITLE = re.compile(r"^postgres: (?:[^:]+: )?io worker \d+\s*$")
#: Recipes whose function runs in the I/O workers when ``io_method`` is not ``sync``.
PAGE_READ_RECIPES = frozenset({"pg_tde.block-decrypt", "postgres.page-read"})


def parse_ps(text: str) -> list[ProcRow]:
    """Rows of ``ps -eo pid,ppid,args`` output (a header line, if any, is skipped)."""
    rows = []
    for line in text.splitlines():
        parts = line.split(None, 2)
        if len(parts) >= 2 and parts[0].isdigit() and parts[1].isdigit():
            rows.append(ProcRow(int(parts[0]), int(parts[1]), parts[2].strip() if len(parts) > 2 else ""))
    return rows


def io_workers(rows: list[ProcRow], backend_pid: int) -> tuple[int, ...]:
    """The I/O workers of the cluster ``backend_pid`` belongs to: its postmaster's children titled
    "io worker"; empty when there are none (``io_method=sync``, or a server before PostgreSQL 18)."""
    by_pid = {r.pid: r for r in rows}
    backend = by_pid.get(backend_pid)
    if backend is None:
        return ()
    postmaster = backend.ppid
    return tuple(sorted(r.pid for r in rows if r.ppid == postmaster and r.pid != backend_pid
                        and IO_WORKER_TITLE.match(r.title)))
