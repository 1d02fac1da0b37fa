"""OS waits: classification table, and the /proc sampler on real processes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from conftest import compile_client, wait_for
from tdescope.app.waits.syscalls import _BUILTIN, SYSCALLS
from tdescope.app.events import WaitSample
from tdescope.app.waits.os_sampler import OsWaitSampler, classify, syscall_name

UNISTD = "/usr/include/x86_64-linux-gnu/asm/unistd_64.h"



@pytest.mark.parametrize("state, syscall, wchan, fd_kind, expected", [
    ("R", "running", "0", None, ("CPU", "on CPU")),
    ("R", -1, "0", None, ("CPU", "on CPU")),
    ("S", 230, "hrtimer_nanosleep", None, ("Idle", "clock_nanosleep")),
    ("S", 35, "", None, ("Idle", "nanosleep")),
    ("S", 61, "do_wait", None, ("Idle", "wait4")),
    ("S", 232, "ep_poll", None, ("Idle", "epoll_wait")),
    ("S", 7, "", None, ("Idle", "poll")),
    ("D", 17, "folio_wait_bit_common", None, ("File I/O", "pread64")),
    ("R", 17, "0", None, ("File I/O", "pread64")),  # runnable inside the call
    ("S", 426, "", None, ("File I/O", "io_uring_enter")),
    ("D", 74, "", None, ("Sync", "fsync")),
    ("D", 75, "", None, ("Sync", "fdatasync")),
    ("R", 11, "0", None, ("Memory operation", "munmap")),
    ("D", 9, "rwsem_down_write_slowpath", None, ("Memory operation", "mmap")),
    ("S", 12, "", None, ("Memory operation", "brk")),
    ("S", "madvise", "", None, ("Memory operation", "madvise")),
    ("S", 202, "futex_wait_queue", None, ("Lock", "futex")),
    ("S", 45, "", None, ("Network", "recvfrom")),
    ("S", 0, "", "socket", ("Network", "read (socket)")),
    ("S", 0, "", "pipe", ("Idle", "read (pipe)")),
    ("D", 0, "", "file", ("File I/O", "read")),
    ("D", -1, "filemap_fault", None, ("File I/O", "page fault")),
    ("t", 230, "", None, ("Other", "stopped")),
    ("S", 99999, "", None, ("Other", "syscall_99999")),
    ("S", None, "", None, ("Other", "sleeping")),
    ("R", None, "", None, ("CPU", "on CPU")),
])
def test_classify(state, syscall, wchan, fd_kind, expected):
    assert classify(state, syscall, wchan, fd_kind) == expected


def test_syscall_table_matches_this_machine():
    assert syscall_name(0) == "read" and syscall_name(17) == "pread64"
    assert syscall_name(202) == "futex" and syscall_name(12345) == "syscall_12345"
    if not os.path.exists(UNISTD):
        pytest.skip("no kernel headers: built-in table in use")
    header = dict((int(n), name) for name, n in
                  re.findall(r"#define __NR_(\w+) (\d+)", open(UNISTD).read()))
    assert {nr: header[nr] for nr in _BUILTIN} == _BUILTIN
    assert len(SYSCALLS) >= len(header)


def _sample(cmd: list[str], until, ready=None, timeout: float = 30.0, **popen):
    """Sample ``cmd`` at 20 Hz once ``ready(pid)`` holds (by default: it runs its own program)
    until ``until(samples)`` holds: counts and events, never a span of time."""
    target = subprocess.Popen(cmd, **popen)
    out: list[WaitSample] = []
    errors: list[str] = []
    try:
        wait_for(lambda: (ready or _exec_done)(target.pid), what=f"{cmd[0]} ready")
        with OsWaitSampler(target.pid, hz=20, on_sample=out.append, on_error=errors.append):
            wait_for(lambda: until(list(out)), timeout=timeout, what=f"the samples of {cmd[0]}")
    finally:
        target.kill()
        target.wait()
    assert not errors, errors
    assert out and all(s.pid == target.pid and s.source == "os" for s in out)
    return target.pid, out


def _exec_done(pid: int) -> bool:
    """``pid`` runs the program it was started for (no longer our forked Python)."""
    return os.readlink(f"/proc/{pid}/exe") != os.path.realpath(sys.executable) or _threads(pid) > 1


def _threads(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/task"))


def _in_syscall(pid: int, name: str) -> bool:
    """The main thread of ``pid`` sits in syscall ``name`` (``/proc/PID/syscall``)."""
    nr = open(f"/proc/{pid}/syscall").read().split()[0]
    return nr.lstrip("-").isdigit() and syscall_name(int(nr)) == name


def _non_cpu(samples, skip_tid=None):
    return Counter(s.wait_class for s in samples if s.wait_class != "CPU" and s.tid != skip_tid)


def test_sleeper_is_idle():
    _, out = _sample(["sleep", "10"], lambda out: len(out) >= 10, lambda pid: _in_syscall(pid, "clock_nanosleep"))
    assert {(s.wait_class, s.event) for s in out} == {("Idle", "clock_nanosleep")}
    assert len({s.tid for s in out}) == 1  # one thread, one sample a tick


def test_pread_loop_is_file_io(tmp_path):
    exe = compile_client("preader.c", tmp_path / "preader")
    data = tmp_path / "data.bin"
    data.write_bytes(os.urandom(16 << 20))
    _, out = _sample([str(exe), str(data)], lambda out: len(out) >= 24 and "pread64" in {s.event for s in out})
    non_cpu = _non_cpu(out)
    assert non_cpu, Counter((s.wait_class, s.event) for s in out)
    assert non_cpu.most_common(1)[0][0] == "File I/O"
    assert "pread64" in {s.event for s in out}


def test_mmap_loop_is_memory_operation(tmp_path):
    exe = compile_client("mmapper.c", tmp_path / "mmapper", "-pthread")
    pid, out = _sample([str(exe)], lambda out: len(out) >= 96, lambda pid: _threads(pid) == 4)  # 24 ticks × 4
    # the main thread waits in pthread_join (futex); the three workers churn memory
    assert any(s.tid == pid and s.wait_class == "Lock" for s in out)
    workers = _non_cpu(out, skip_tid=pid)
    assert workers.most_common(1)[0][0] == "Memory operation", workers
    assert {s.event for s in out if s.wait_class == "Memory operation"} <= {
        "mmap", "munmap", "mprotect"}
    print("mmapper:", Counter((s.wait_class, s.event) for s in out).most_common())


SOCKET_PIPE = r"""
import os, socket, threading, time
a, b = socket.socketpair()
r, w = os.pipe()
threading.Thread(target=lambda: a.recv(10), daemon=True).start()
threading.Thread(target=lambda: os.read(r, 10), daemon=True).start()
time.sleep(30)
"""


def test_socket_and_pipe_reads():
    wanted = {("Network", "recvfrom"), ("Idle", "read (pipe)"), ("Idle", "clock_nanosleep")}
    _, out = _sample([sys.executable, "-c", SOCKET_PIPE], lambda out: wanted <= {(s.wait_class, s.event) for s in out},
                     lambda pid: _threads(pid) == 3)


def test_vanishing_process_reported_once():
    target = subprocess.Popen(["sleep", "0.3"])
    threading.Thread(target=target.wait, daemon=True).start()  # reaped, so it vanishes
    errors = []
    s = OsWaitSampler(target.pid, hz=50, on_error=errors.append)
    s.start()
    wait_for(lambda: not s.running, what="the sampler's stop")
    assert errors == [f"process {target.pid} exited; OS wait sampling stopped"]
    s.stop()


BUSY4 = r"""
import threading, time
def spin():
    while True:
        sum(range(1000))
for _ in range(3):
    threading.Thread(target=spin, daemon=True).start()
time.sleep(30)
"""


def test_sampler_cost_at_20hz():
    """The sampler's own CPU per tick, four busy threads read each tick: under 5 ms, i.e. under 10 %
    of one CPU at 20 Hz. CPU seconds per tick, not a share of wall time: a loaded machine delays
    ticks but does not make them dearer."""
    target = subprocess.Popen([sys.executable, "-c", BUSY4])
    out = []
    try:
        wait_for(lambda: _threads(target.pid) == 4, what="the four threads")
        sampler = OsWaitSampler(target.pid, hz=20, on_sample=out.append)
        cpu0 = time.process_time()
        with sampler:
            wait_for(lambda: sampler.ticks >= 40 and len(out) >= 4 * 40, what="40 ticks of 4 threads")
        cpu = time.process_time() - cpu0
    finally:
        target.kill()
        target.wait()
    per_tick_ms = 1000.0 * cpu / sampler.ticks
    print(f"OS wait sampler: {sampler.ticks} ticks, {len(out)} samples, 4 threads, {per_tick_ms:.2f} ms CPU a tick")
    assert len({s.tid for s in out}) == 4
    assert per_tick_ms < 5
