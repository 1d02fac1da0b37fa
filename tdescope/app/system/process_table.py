"""A machine's process table: this one's ``/proc``, or a database host's through the agent.

An engine plugin that checks the process serving its connection (PostgreSQL: the backend is a child
of the postmaster; its I/O workers are the postmaster's children) asks a :class:`ProcessTable`, never
``/proc`` directly: over ``--ssh`` the server runs on another machine, and the table there is the
agent's (:class:`~tdescope.app.remote.over_ssh.HostProcesses`). Reads only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tdescope.app.slots import SLOTS

__all__ = ["LOCAL", "LocalProcesses", "ProcRow", "ProcessTable", "read_proc"]


@dataclass(frozen=True, **SLOTS)
class ProcRow:
    """One process: its id, its parent's and its title (``/proc/PID/cmdline`` as ``ps args`` shows it)."""

    pid: int
    ppid: int
    title: str


@runtime_checkable
class ProcessTable(Protocol):
    """Where a server's processes are looked up."""

    where: str
    """The machine, as a one-line message names it ("this machine", "db1 via ssh")."""

    def rows(self, pids: Iterable[int] | None = None) -> list[ProcRow]:
        """The rows of ``pids`` that exist (all processes when None); a process gone is left out."""
        ...


def _row(proc: str, name: str) -> ProcRow | None:
    try:
        with open(f"{proc}/{name}/stat", "rb") as fh:
            stat = fh.read().decode(errors="replace")
        with open(f"{proc}/{name}/cmdline", "rb") as fh:
            title = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])  # after "pid (comm) state"
    except (OSError, ValueError, IndexError):
        return None
    return ProcRow(int(name), ppid, title)


def read_proc(proc: str = "/proc", pids: Iterable[int] | None = None) -> list[ProcRow]:
    """This machine's process table, read from ``proc`` (processes that end meanwhile are left out)."""
    names = [str(int(p)) for p in pids] if pids is not None else [n for n in os.listdir(proc) if n.isdigit()]
    return [row for name in names if (row := _row(proc, name)) is not None]


class LocalProcesses:
    """This machine's ``/proc``."""

    where = "this machine"

    def rows(self, pids: Iterable[int] | None = None) -> list[ProcRow]:
        return read_proc(pids=pids)


#: The table of the machine tdescope runs on.
LOCAL = LocalProcesses()
