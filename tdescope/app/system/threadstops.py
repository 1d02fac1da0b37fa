"""How long a process's threads sit stopped, as the kernel shows it (``/proc/PID/task/TID/stat``).

gdb in all-stop mode stops every thread of the target at each breakpoint hit
and while it attaches; its own clock sees only its side. :class:`ThreadStops`
samples the state letter of every thread (``t``: ptrace stop, ``T``: job-control
stop) on a thread of its own and keeps what the target felt: the longest
continuous stop of any one thread, each thread's stopped time, and the stop
under way now (for a watchdog).

A sample is a sweep over the threads; a stop is counted from the first sweep
that saw it to the first sweep that saw the thread run again, so a stop is
over-counted by up to one interval, never under-counted once seen. Stops
shorter than the interval are seen in proportion to their length: the
per-thread totals are unbiased estimates, the longest stop is exact to one
interval.

:meth:`ThreadStops.stop_bound` gives a stop's upper bound instead: from the
last sweep that saw its thread run to the first that saw it run again. It
holds whatever the sampler's delays (a late sweep only widens it), which is
what a figure told to the user as "the target was stopped" needs.
"""

from __future__ import annotations

import collections
import os
import threading
import time
from dataclasses import dataclass

from tdescope.app.slots import SLOTS

__all__ = ["StopFigures", "ThreadStops", "stopped_threads", "thread_ids"]

#: Seconds between two sweeps over the target's threads.
INTERVAL_S = 0.005
_STOPPED = frozenset("tT")


def thread_ids(pid: int) -> list[int]:
    """The thread ids of ``pid`` (empty when it is gone)."""
    try:
        return sorted(int(t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return []


def _state(fd: int) -> str:
    try:
        return os.pread(fd, 512, 0).rsplit(b")", 1)[1].split(None, 1)[0].decode()
    except (OSError, IndexError):
        return ""


def stopped_threads(pid: int) -> list[int]:
    """The threads of ``pid`` in a stop (``t`` or ``T``) right now."""
    out = []
    for tid in thread_ids(pid):
        try:
            fd = os.open(f"/proc/{pid}/task/{tid}/stat", os.O_RDONLY)
        except OSError:
            continue
        try:
            if _state(fd) in _STOPPED:
                out.append(tid)
        finally:
            os.close(fd)
    return out


@dataclass(frozen=True, **SLOTS)
class StopFigures:
    """What the threads of one process felt while watched.

    Attributes
    ----------
    threads : int
        Threads seen.
    longest_s : float
        The longest continuous stop of any one thread (one under way counts to now).
    most_stopped_s : float
        The stopped time of the thread stopped longest in all: what the duty cycle counts.
    all_stopped_s : float
        Time during which every thread seen was stopped at once.
    watched_s : float
        How long the sampler watched.
    sweeps : int
        Sweeps over the threads.
    """

    threads: int
    longest_s: float
    most_stopped_s: float
    all_stopped_s: float
    watched_s: float
    sweeps: int


class ThreadStops:
    """Samples every thread of ``pid`` on a daemon thread until :meth:`stop`.

    Parameters
    ----------
    pid : int
        The process to watch.
    interval : float
        Seconds between sweeps.
    """

    def __init__(self, pid: int, interval: float = INTERVAL_S) -> None:
        self.pid = int(pid)
        self.interval = interval
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}
        self._since: dict[int, float] = {}  # tid -> when its current stop was first seen
        self._ran: dict[int, float] = {}  # tid -> the sweep before that, which saw it run (or began watching)
        self._ended: collections.deque[tuple[float, float]] = collections.deque(maxlen=256)  # (ran, ran again)
        self._total: dict[int, float] = {}
        self._longest = 0.0
        self._all = 0.0
        self._sweeps = 0
        self._threads_seen: set[int] = set()
        self._started = self._last = 0.0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> "ThreadStops":
        """Take a first sweep now, then sweep on a thread of its own."""
        self._started = self._last = time.monotonic()
        self._sweep()
        self._thread = threading.Thread(target=self._run, name=f"thread-stops-{self.pid}", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._done.wait(self.interval):
            self._sweep()

    def _open(self) -> None:
        tids = set(thread_ids(self.pid))
        for tid in list(self._fds):
            if tid not in tids:
                os.close(self._fds.pop(tid))
        for tid in tids - set(self._fds):
            try:
                self._fds[tid] = os.open(f"/proc/{self.pid}/task/{tid}/stat", os.O_RDONLY)
            except OSError:
                pass

    def _sweep(self) -> None:
        if self._sweeps % 50 == 0:
            self._open()  # threads come and go: look again every 50 sweeps
        now = time.monotonic()  # before reading: every state read is at least this fresh
        states = {tid: _state(fd) for tid, fd in list(self._fds.items())}
        read = time.monotonic()  # after reading: a stop seen over was over by this time (a bound's end)
        with self._lock:
            before, dt = self._last, now - self._last
            self._last = now
            self._sweeps += 1
            self._threads_seen.update(states)
            live = {tid: s for tid, s in states.items() if s}
            stopped = [tid for tid, s in live.items() if s in _STOPPED]
            if live and len(stopped) == len(live):
                self._all += dt
            for tid in stopped:
                if tid in self._since:
                    self._total[tid] = self._total.get(tid, 0.0) + dt
                else:
                    self._since[tid], self._ran[tid] = now, before
            for tid in [t for t in self._since if t not in stopped]:
                began = self._since.pop(tid)
                self._ended.append((self._ran.pop(tid), read))
                # seen stopped at `began`, running now: the stop lasted at most until now
                self._total[tid] = self._total.get(tid, 0.0) + min(dt, now - began)
                self._longest = max(self._longest, now - began)

    @property
    def last_sweep(self) -> float:
        """Monotonic time of the last sweep (0 before the first)."""
        with self._lock:
            return self._last

    def current_s(self, after: float = 0.0) -> float:
        """The longest stop under way as of the last sweep (0 when every thread ran then), counted
        from monotonic time ``after`` at the earliest; 0 until a sweep has begun since ``after``.
        Never extrapolated past the last sweep: a sampler held up (a loaded machine) cannot make
        a stop that has ended look long."""
        with self._lock:
            if self._last <= after:
                return 0.0
            return max((self._last - max(t, after) for t in self._since.values()), default=0.0)

    def stop_bound(self, began_before: float) -> float | None:
        """An upper bound of the longest stop that began before monotonic time ``began_before``: from the
        last sweep that saw its thread run to the first that saw it run again (0.0 when no such stop was
        seen). None while one of them may still be under way: no sweep yet since ``began_before``, or a
        thread stopped since before it and not seen running again."""
        with self._lock:
            if self._last <= began_before or any(ran < began_before for ran in self._ran.values()):
                return None
            return max((end - ran for ran, end in self._ended if ran < began_before), default=0.0)

    def figures(self) -> StopFigures:
        """What the threads felt so far."""
        with self._lock:
            ongoing = max((self._last - t for t in self._since.values()), default=0.0)
            return StopFigures(len(self._threads_seen), max(self._longest, ongoing),
                               max(self._total.values(), default=0.0), self._all, self._last - self._started,
                               self._sweeps)

    def stop(self) -> StopFigures:
        """Stop sampling (after one last sweep) and close the files; returns :meth:`figures`."""
        if self._thread is not None:
            self._done.set()
            self._thread.join(5.0)
            self._thread = None
            self._sweep()
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        return self.figures()
