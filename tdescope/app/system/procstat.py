"""One process's line of ``/proc/PID/stat``, read the same way everywhere."""

from __future__ import annotations

import os
import time

__all__ = ["cpu_seconds", "gone_within", "machine_cpu_seconds", "process_state", "stat_fields",
           "thread_cpu_seconds"]


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


def gone_within(pid: int, timeout: float) -> bool:
    """True once ``pid`` is gone or a zombie, looked at every 20 ms for up to ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while process_state(pid) not in ("", "Z", "X"):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def cpu_seconds(pid: int) -> float | None:
    """CPU seconds ``pid`` has used so far, threads that ended included; None when it is gone.

    ``utime + stime`` of ``/proc/PID/stat``: clock-tick resolution (10 ms), so meant
    for spans of a second or more. :func:`thread_cpu_seconds` is precise but forgets
    threads that ended.
    """
    fields = stat_fields(pid)
    if not fields:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def thread_cpu_seconds(pid: int) -> float | None:
    """CPU seconds the live threads of ``pid`` have run (nanoseconds from each thread's
    ``schedstat``); None when it is gone. Threads that ended are not counted: fit for a
    server whose threads live long (mariadbd), not for one that starts a thread per job."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total_ns = 0
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as fh:
                total_ns += int(fh.read().split()[0])
        except (OSError, ValueError, IndexError):
            pass  # a thread that ended meanwhile
    return total_ns / 1e9


def machine_cpu_seconds() -> tuple[float, float]:
    """``(busy, total)`` CPU seconds of the whole machine since boot, all CPUs summed (``/proc/stat``)."""
    with open("/proc/stat") as fh:
        values = [int(v) for v in fh.readline().split()[1:]]
    ticks = os.sysconf("SC_CLK_TCK")
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    total = sum(values[:8])  # guest time is already inside user
    return (total - idle) / ticks, total / ticks
