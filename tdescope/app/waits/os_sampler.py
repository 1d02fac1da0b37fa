"""OS wait events: what each thread of the target is doing, seen from /proc.

Every tick the sampler reads, per thread, ``/proc/PID/task/TID/stat`` (the
scheduler state), ``syscall`` (the syscall it is in and its arguments) and
``wchan`` (the kernel function it sleeps in). No ptrace, no stop of the target:
reading ``syscall`` needs the same rights as ptrace (root or the same user)
but does not attach. Each reading becomes a ``WaitSample(source="os")``.

How a reading becomes a class (see :func:`classify`):

* ``syscall`` = ``running`` (the thread is on a CPU right now), or state ``R``
  outside any syscall -> **CPU**;
* inside a syscall, by the syscall, *whatever the state*: the kernel only
  shows the syscall of a thread that is not on a CPU, so state ``R`` with a
  syscall means "in the middle of the call, waiting for a CPU" — and engines
  charge the whole call to its wait event (Oracle's 'PGA memory operation'
  wraps mmap/munmap, CPU-bound as they are). So: file reads, writes and
  opens -> **File I/O**, fsync family -> **Sync**, mmap/munmap/mprotect/brk/
  madvise/mremap -> **Memory operation**, futex/semop/flock -> **Lock**,
  socket calls -> **Network**;
* sleeps, child waits, signal waits **and poll/select/epoll_wait** -> **Idle**.
  A database backend in epoll_wait is waiting for its client to send the next
  request, which engines themselves count as idle (Oracle's 'SQL*Net message
  from client'); time spent moving bytes shows up as Network or CPU instead.
* ``read``/``write`` on a socket are Network, on a pipe Idle: the sampler
  looks at the fd in the syscall's first argument (``/proc/PID/fd/N``).
* blocked outside any syscall (``-1``) in state ``D`` is a page fault waiting
  for the disk -> File I/O, event ``page fault``; stopped (``T``/``t``, e.g.
  by a debugger) -> **Other**, event ``stopped``; unknown syscalls -> Other.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from tdescope.app.events import WaitSample
from tdescope.app.system.sampler_thread import BackgroundSampler
from tdescope.app.waits.syscalls import syscall_name

__all__ = [
    "WAIT_CLASSES",
    "classify",
    "OsWaitSampler",
    "syscall_name",
]

WAIT_CLASSES = ("CPU", "File I/O", "Sync", "Memory operation", "Lock", "Network", "Idle", "Other")

_FILE_IO = frozenset(
    "read write pread64 pwrite64 readv writev preadv pwritev preadv2 pwritev2 io_submit "
    "io_getevents io_pgetevents io_uring_enter open openat openat2 close lseek fallocate "
    "ftruncate fstat newfstatat statx getdents64 copy_file_range splice sendfile fadvise64 "
    "readahead unlink unlinkat rename renameat renameat2".split()
)
_SYNC = frozenset("fsync fdatasync sync_file_range sync syncfs msync".split())
_MEMORY = frozenset("mmap munmap mprotect brk madvise mremap mlock munlock mlockall munlockall".split())
_LOCK = frozenset("futex futex_waitv semop semtimedop flock".split())
_NETWORK = frozenset(
    "recvfrom sendto recvmsg sendmsg recvmmsg sendmmsg accept accept4 connect shutdown socket".split()
)
_IDLE = frozenset(
    "nanosleep clock_nanosleep wait4 waitid pause rt_sigsuspend rt_sigtimedwait poll ppoll "
    "select pselect6 epoll_wait epoll_pwait epoll_pwait2 msgrcv".split()
)
_BY_FD = frozenset("read write readv writev".split())


def classify(
    state: str, syscall: int | str | None, wchan: str = "", fd_kind: str | None = None
) -> tuple[str, str]:
    """Wait class and event of one thread reading.

    Parameters
    ----------
    state : str
        Scheduler state letter from ``stat`` (R, S, D, T, t, I, ...).
    syscall : int, str or None
        Syscall number, syscall name, ``"running"``, ``-1`` (blocked, not in
        a syscall) or None (unreadable).
    wchan : str
        Kernel function the thread sleeps in (``"0"`` or ``""`` when none).
    fd_kind : {"socket", "pipe", "file"} or None
        What the syscall's fd is, for the read/write family.

    Returns
    -------
    (wait_class, event) : tuple of str
    """
    if syscall == "running":
        return "CPU", "on CPU"
    if state in ("T", "t"):
        return "Other", "stopped"
    if state == "I":
        return "Idle", "kernel idle"
    if syscall is None:  # syscall file unreadable: the state is all we know
        if state == "R":
            return "CPU", "on CPU"
        return "Other", "uninterruptible" if state == "D" else "sleeping"
    if syscall == -1 or syscall == "-1":
        if state == "R":
            return "CPU", "on CPU"  # preempted in user space
        if state == "D":
            return "File I/O", "page fault"
        return "Other", wchan if wchan not in ("", "0") else "not in a syscall"
    name = syscall_name(syscall) if isinstance(syscall, int) else str(syscall)
    if name in _BY_FD and fd_kind in ("socket", "pipe"):
        return ("Network" if fd_kind == "socket" else "Idle"), f"{name} ({fd_kind})"
    for cls, names in (
        ("File I/O", _FILE_IO), ("Sync", _SYNC), ("Memory operation", _MEMORY),
        ("Lock", _LOCK), ("Network", _NETWORK), ("Idle", _IDLE),
    ):
        if name in names:
            return cls, name
    if name == "fcntl":
        return ("Lock", "fcntl lock") if state in ("S", "D") else ("Other", name)
    return "Other", name


def _fd_kind(pid: int, fd: int) -> str | None:
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return None
    if target.startswith("socket:"):
        return "socket"
    if target.startswith("pipe:"):
        return "pipe"
    return "file"


class _Thread:
    """Open /proc files of one thread, re-read with pread (no open per tick)."""

    def __init__(self, pid: int, tid: int) -> None:
        base = f"/proc/{pid}/task/{tid}/"
        self.fds: dict[str, int | None] = {}
        for name in ("stat", "syscall", "wchan"):
            try:
                self.fds[name] = os.open(base + name, os.O_RDONLY | os.O_CLOEXEC)
            except PermissionError:
                self.fds[name] = None  # syscall needs ptrace rights; stat never does
        self.denied = self.fds["syscall"] is None

    def read(self, name: str) -> str | None:
        fd = self.fds.get(name)
        if fd is None:
            return None
        try:
            return os.pread(fd, 4096, 0).decode("ascii", "replace")
        except PermissionError:
            return None  # ESRCH (thread gone) propagates

    def close(self) -> None:
        for fd in self.fds.values():
            if fd is not None:
                os.close(fd)
        self.fds.clear()


class OsWaitSampler(BackgroundSampler):
    """Sample every thread of ``pid`` at ``hz`` from /proc, in a background thread.

    Parameters
    ----------
    pid : int
    hz : float
        Ticks per second; each tick emits one WaitSample per thread.
    on_sample : callable, optional
        Called with each :class:`WaitSample`, from the sampler thread.
    on_error : callable, optional
        Called with a one-line message: once when the process is gone (the
        sampler then stops quietly), once when ``syscall`` is unreadable.
    """

    thread_name = "os-wait-sampler"

    def __init__(
        self,
        pid: int,
        hz: float = 20,
        on_sample: Callable[[WaitSample], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        super().__init__(on_error)
        self.pid = pid
        self.hz = hz
        self.on_sample = on_sample
        self.ticks = 0
        self._threads: dict[int, _Thread] = {}
        self._warned_denied = False

    def sample_once(self) -> list[WaitSample] | None:
        """Read every thread once; None when the process is gone."""
        ts = time.time()
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{self.pid}/task")]
        except (FileNotFoundError, ProcessLookupError):
            return None
        for gone in set(self._threads) - set(tids):
            self._threads.pop(gone).close()
        out = []
        for tid in tids:
            s = self._read_thread(tid, ts)
            if s is not None:
                out.append(s)
        return out

    def _read_thread(self, tid: int, ts: float) -> WaitSample | None:
        try:
            th = self._threads.get(tid)
            if th is None:
                th = self._threads[tid] = _Thread(self.pid, tid)
                if th.denied and not self._warned_denied:
                    self._warned_denied = True
                    self._error(f"cannot read /proc/{self.pid}/task/*/syscall (needs ptrace "
                                "rights: run as root or as the process owner); classes from "
                                "thread state only")
            stat = th.read("stat")
            sys_text = th.read("syscall")
            wchan = (th.read("wchan") or "").strip()
        except (FileNotFoundError, ProcessLookupError):
            old = self._threads.pop(tid, None)
            if old is not None:
                old.close()
            return None
        if not stat:
            return None
        fields = stat.rsplit(")", 1)[-1].split()
        state = fields[0] if fields else "?"
        if state in ("Z", "X"):
            return None
        syscall: int | str | None = None
        fd_kind = None
        detail = f"wchan={wchan}" if wchan not in ("", "0") else ""
        if sys_text:
            parts = sys_text.split()
            if parts and parts[0] == "running":
                syscall = "running"
            elif parts:
                syscall = int(parts[0])
                if syscall >= 0 and syscall_name(syscall) in _BY_FD and len(parts) > 1:
                    fd = int(parts[1], 16)
                    fd_kind = _fd_kind(self.pid, fd)
        wait_class, event = classify(state, syscall, wchan, fd_kind)
        return WaitSample(ts=ts, pid=self.pid, tid=tid, source="os",
                          wait_class=wait_class, event=event, detail=detail)

    def _loop(self) -> None:
        period = 1.0 / self.hz
        next_tick = time.monotonic()
        try:
            while not self._stop.is_set():
                batch = self.sample_once()
                if batch is None:
                    self._error(f"process {self.pid} exited; OS wait sampling stopped")
                    return
                self.ticks += 1
                if self.on_sample is not None:
                    for s in batch:
                        self.on_sample(s)
                next_tick += period
                # After a stall, skip missed ticks rather than burst to catch up.
                next_tick = max(next_tick, time.monotonic())
                self._stop.wait(next_tick - time.monotonic())
        except Exception as err:  # errors cross threads as messages
            self._error(f"OS wait sampler failed: {err!r}")
        finally:
            for th in self._threads.values():
                th.close()
            self._threads.clear()
