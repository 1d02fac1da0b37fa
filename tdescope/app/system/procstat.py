"""One process's line of ``/proc/PID/stat``, read the same way everywhere."""

from __future__ import annotations

import os

__all__ = ["cpu_seconds", "process_state", "stat_fields"]


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first, then ppid...);
    None when the process is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def process_state(pid: int) -> str:
    """Single-letter state of ``pid`` (R, S, T stopped, t traced stop, Z...); "" when gone."""
    fields = stat_fields(pid)
    return fields[0] if fields else ""


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time ``pid`` has used, all its threads together; None when it is gone."""
    fields = stat_fields(pid)
    if fields is None:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
