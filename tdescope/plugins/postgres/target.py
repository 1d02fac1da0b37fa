"""Choosing the backend to probe, and refusing the processes nobody should stop.

A probe stops its target for a moment at each hit. Stopping a client backend
slows that one connection; stopping the postmaster or a background process
(checkpointer, walwriter, bgwriter, autovacuum launcher...) stalls the whole
server, and an int3 left behind kills it. Those are refused unless the user
overrides explicitly.
"""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.system.critical import CriticalProcess
from tdescope.app.errors import UserError
from tdescope.app.system.process_table import LOCAL, ProcessTable
from tdescope.plugins.postgres import statements as sql

__all__ = ["Backend", "CRITICAL_PROCESSES", "check_backend", "list_backends", "parent_pid"]

#: The deny-list as the kernel sees it (app/system/critical.py), for a bare ``--pid``: the
#: postmaster keeps its binary's command line; every child rewrites its title to
#: "postgres: [cluster_name: ]what", and background processes name their role there.
CRITICAL_PROCESSES = (
    CriticalProcess("postgres", r"^(?:\S*/)?(?:postgres|postmaster)(?:\s+-|$)", "the PostgreSQL postmaster"),
    CriticalProcess(
        "postgres",
        r"^postgres: (?:\S+: )?(checkpointer|background writer|walwriter|autovacuum launcher|"
        r"logical replication launcher|archiver|stats collector|startup|walreceiver|walsender|logger|"
        r"wal summarizer)\b",
        "the PostgreSQL {0}, a background process",
    ),
)

_PROBE_OK = {"client backend"}


@dataclass(frozen=True, slots=True)
class Backend:
    """One row of pg_stat_activity."""

    pid: int
    backend_type: str
    user: str
    application: str
    state: str
    query: str


def parent_pid(pid: int, processes: ProcessTable = LOCAL) -> int | None:
    """PPid of ``pid`` in ``processes`` (this machine's /proc by default), None when gone."""
    rows = processes.rows([pid])
    return rows[0].ppid if rows else None


def list_backends(conn) -> list[Backend]:
    """Every process pg_stat_activity shows, client backends first."""
    rows = conn.execute(sql.BACKENDS).fetchall()
    return [Backend(*r) for r in rows]


def check_backend(conn, pid: int, allow_critical: bool = False, processes: ProcessTable = LOCAL) -> Backend:
    """The backend ``pid`` of the server behind ``conn``, if it may be probed.

    ``processes``: the server's machine (this one's /proc, or a ``--ssh`` host's through the agent).

    Raises
    ------
    UserError
        The pid is not on that machine, not a process of this server, the
        postmaster, or a background process (unless ``allow_critical``).
    """
    own = conn.info.backend_pid  # from libpq: no statement
    rows = {r.pid: r for r in processes.rows({own, pid})}
    if own not in rows:
        hint = "run tdescope on the database host, or give --ssh HOST" if processes is LOCAL else \
            "is --dsn a server on that host?"
        raise UserError(f"the server's backends are not on {processes.where} (backend pid {own} not found "
                        f"there): {hint}")
    if pid not in rows:
        raise UserError(f"pid {pid} is not running on {processes.where}")
    postmaster = rows[own].ppid
    if pid == postmaster:
        if allow_critical:
            return Backend(pid, "postmaster", "", "", "", "")
        raise UserError(f"pid {pid} is the postmaster: probing it would stall every connection "
                        "(--allow-critical overrides)")
    row = conn.execute(sql.BACKEND, (pid,)).fetchone()
    if row is None or rows[pid].ppid != postmaster:
        what = rows[pid].title or "unknown"
        raise UserError(f"pid {pid} is not a backend of this server ({what[:60]})")
    backend = Backend(*row)
    if backend.backend_type not in _PROBE_OK and not allow_critical:
        raise UserError(f"pid {pid} is the {backend.backend_type}, a background process: probing it stalls "
                        "the server (--allow-critical overrides)")
    return backend
