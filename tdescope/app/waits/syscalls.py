"""x86-64 syscall numbers -> names, for /proc/PID/task/TID/syscall.

The machine's own ``asm/unistd_64.h`` is parsed at import time when present
(so every syscall gets its name); the built-in table covers the calls the OS
wait classifier cares about, checked against that header on Debian 12
(linux-libc-dev 6.1), for machines without kernel headers.
"""

from __future__ import annotations

import re

__all__ = ["SYSCALLS", "syscall_name"]

_BUILTIN = {
    0: "read", 1: "write", 2: "open", 3: "close", 5: "fstat", 7: "poll", 8: "lseek",
    9: "mmap", 10: "mprotect", 11: "munmap", 12: "brk", 17: "pread64", 18: "pwrite64",
    19: "readv", 20: "writev", 23: "select", 24: "sched_yield", 25: "mremap", 26: "msync",
    28: "madvise", 34: "pause", 35: "nanosleep", 40: "sendfile", 41: "socket", 42: "connect",
    43: "accept", 44: "sendto", 45: "recvfrom", 46: "sendmsg", 47: "recvmsg", 48: "shutdown",
    61: "wait4", 65: "semop", 70: "msgrcv", 72: "fcntl", 73: "flock", 74: "fsync",
    75: "fdatasync", 77: "ftruncate", 128: "rt_sigtimedwait", 130: "rt_sigsuspend",
    149: "mlock", 150: "munlock", 151: "mlockall", 152: "munlockall", 162: "sync",
    187: "readahead", 202: "futex", 208: "io_getevents", 209: "io_submit", 217: "getdents64",
    220: "semtimedop", 221: "fadvise64", 230: "clock_nanosleep", 232: "epoll_wait",
    247: "waitid", 257: "openat", 262: "newfstatat", 270: "pselect6", 271: "ppoll",
    275: "splice", 277: "sync_file_range", 281: "epoll_pwait", 285: "fallocate",
    288: "accept4", 295: "preadv", 296: "pwritev", 299: "recvmmsg", 306: "syncfs",
    307: "sendmmsg", 326: "copy_file_range", 327: "preadv2", 328: "pwritev2", 332: "statx",
    333: "io_pgetevents", 426: "io_uring_enter", 437: "openat2", 441: "epoll_pwait2",
    449: "futex_waitv",
}

_HEADERS = (
    "/usr/include/x86_64-linux-gnu/asm/unistd_64.h",
    "/usr/include/asm/unistd_64.h",
)
_DEFINE = re.compile(r"^#define\s+__NR_(\w+)\s+(\d+)\s*$", re.M)


def _load() -> dict[int, str]:
    table = dict(_BUILTIN)
    for path in _HEADERS:
        try:
            with open(path, encoding="ascii", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        table.update((int(nr), name) for name, nr in _DEFINE.findall(text))
        break
    return table


SYSCALLS: dict[int, str] = _load()


def syscall_name(nr: int) -> str:
    """Name of x86-64 syscall ``nr``, or ``"syscall_<nr>"`` when unknown."""
    return SYSCALLS.get(nr, f"syscall_{nr}")
