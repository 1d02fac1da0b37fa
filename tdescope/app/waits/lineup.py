"""Engine waits beside OS waits: each engine wait event next to the syscalls that carry it, same window.

An engine names its waits after what it is doing (PostgreSQL's ``IO:DataFileRead``, MariaDB's
``innodb_data_file``); the OS sees the syscalls underneath. :func:`line_up` pairs each sampled engine
wait event (its share of the engine's samples) with the exact OS figures of the syscalls that event
is made of (calls, time, median size), over the same observation window. The pairs are a fixed table
(:data:`RULES`): an event no rule names is shown with no OS side rather than guessed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tdescope.app.events import WaitFigure
from tdescope.app.waits.counter import WaitTopRow
from tdescope.app.waits.exact import bytes_p50

__all__ = ["RULES", "LinedUp", "line_up"]

_READS = ("pread64", "preadv", "read", "readv")
_WRITES = ("pwrite64", "pwritev", "write", "writev")
_SYNCS = ("fsync", "fdatasync", "sync_file_range")
_LOCKS = ("futex", "semop", "semtimedop")

#: (engine source, class pattern, event pattern) -> the syscalls that carry it (regexes are full matches).
RULES: tuple[tuple[str, str, str, tuple[str, ...]], ...] = (
    ("postgres", "IO", "DataFileRead|DataFilePrefetch|BufFileRead|RelationMapRead|SLRURead", _READS),
    ("postgres", "IO", "DataFileWrite|DataFileExtend|BufFileWrite|SLRUWrite", _WRITES + ("fallocate",)),
    ("postgres", "IO", "WALWrite|WALInitWrite|WALCopyWrite", _WRITES),
    ("postgres", "IO", "WALRead|WALCopyRead", _READS),
    ("postgres", "IO", ".*Sync|DataFileFlush|.*Flush", _SYNCS),
    ("postgres", "Client", "ClientRead", ("recvfrom", "read (socket)", "epoll_wait")),
    ("postgres", "Client", "ClientWrite", ("sendto", "write (socket)")),
    ("postgres", "LWLock|Lock", ".*", _LOCKS),
    ("postgres", "Timeout|Activity|IPC", ".*", ("epoll_wait", "epoll_pwait", "clock_nanosleep", "nanosleep")),
    ("mariadb", ".*", ".*(data_file|log_file|file).*", _READS + _WRITES + _SYNCS),
    ("mariadb", ".*", ".*(mutex|rwlock|cond|lock|sx).*", _LOCKS),
    ("mariadb", ".*", ".*socket.*", ("recvfrom", "sendto", "read (socket)", "write (socket)", "poll")),
)


@dataclass(frozen=True, slots=True)
class LinedUp:
    """One engine wait event and the OS figures of the syscalls it is made of."""

    source: str
    wait_class: str
    event: str
    samples: int
    pct: float
    syscalls: tuple[str, ...]
    os_count: int
    os_total_us: float
    os_bytes_p50: int | None


def _syscalls_of(row: WaitTopRow) -> tuple[str, ...]:
    for source, cls, event, syscalls in RULES:
        if row.source == source and re.fullmatch(cls, row.wait_class) and re.fullmatch(event, row.event):
            return syscalls
    return ()


def line_up(engine_rows: Iterable[WaitTopRow], exact: Iterable[WaitFigure]) -> list[LinedUp]:
    """Each engine row (``source`` not ``"os"``) beside the exact OS rows of its syscalls."""
    by_name = {f.syscall: f for f in exact}
    out = []
    for row in engine_rows:
        if row.source == "os":
            continue
        names = tuple(n for n in _syscalls_of(row) if n in by_name)
        figs = [by_name[n] for n in names]
        sized = [f for f in figs if f.sizes]
        out.append(LinedUp(row.source, row.wait_class, row.event, row.samples, row.pct, names,
                           sum(f.count for f in figs), sum(f.total_us for f in figs),
                           bytes_p50(max(sized, key=lambda f: f.count)) if sized else None))
    return out
