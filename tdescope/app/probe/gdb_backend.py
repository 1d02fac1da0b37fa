"""The gdb backend: probes as gdb breakpoints, driven through MI, read-only.

gdb attaches, ``source``\\ s the gdb-side helper (``app/gdb/_probe_helper.py``)
and calls its functions with literal arguments only (:func:`arm_command`,
:func:`pause_command`, :func:`resume_command`, :func:`disarm_command`: the exact
console commands the MI guard lets through). The helper answers ``arm`` and ``disarm`` with notice
frames in the spool file it appends captures to, and the handle waits for
that frame: nothing is read back from gdb's console.

What only gdb needs lives here too: the guard that restores code bytes if gdb
dies while armed, passing on a SIGINT that gdb would keep for itself, and what
the target's threads felt, sampled from /proc from before the attach
(:class:`~tdescope.app.system.threadstops.ThreadStops`): the watchdog on any
thread's stop, and a second stop budget charged with the most stopped thread's
time (gdb stops every thread at each hit), which pauses the probe from outside.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import tempfile
import time
import weakref

from tdescope.app.gdb.allowlist import HELPER_PATH, helper_path
from tdescope.app.gdb.guard import start_guard as _start_guard
from tdescope.app.gdb.guard import stop_guard as _stop_guard
from tdescope.app.gdb.guard import update_guard as _update_guard
from tdescope.app.gdb.mi import GdbError, GdbSession
from tdescope.app.probe.backend import Armed, Closed, Happened, TargetNews
from tdescope.app.probe.frames import Frame, FrameKind, Notice, notice_of
from tdescope.app.probe.spec import ProbeSpec
from tdescope.app.probe.spool import SpoolReader
from tdescope.app.probe.stop_cost import StopBucket
from tdescope.app.system.private_files import create_private
from tdescope.app.system.threadstops import StopFigures, ThreadStops, thread_ids

__all__ = ["HELPER", "GdbBackend", "GdbHandle", "arm_command", "disarm_command", "pause_command",
           "reinsert_command", "resume_command", "source_command"]

#: The gdb-side helper, packaged with tdescope: the only file gdb may ``source`` (the agent run from a
#: zipapp sources its own copy: :func:`~tdescope.app.gdb.allowlist.helper_path`).
HELPER = HELPER_PATH
#: How long the helper's reply frame may take once its command returned (it is written
#: before gdb answers ^done, so this only covers a slow disk).
REPLY_S = 2.0
_live_sessions: "weakref.WeakSet[GdbSession]" = weakref.WeakSet()


def source_command() -> str:
    """The console command that loads the helper into gdb."""
    return f"source {helper_path()}"


def arm_command(spec_path: str) -> str:
    """The console command that arms the probe from the spec file at absolute ``spec_path``."""
    if not os.path.isabs(spec_path):
        raise ValueError(f"spec path must be absolute: {spec_path}")
    return f"python _tdescope_probe.arm({json.dumps(str(spec_path))})"


def pause_command(resume_in: float) -> str:
    """The console command that pauses the probe from outside, to re-arm in ``resume_in`` s."""
    return f"python _tdescope_probe.pause({float(resume_in)!r})"


def resume_command() -> str:
    """The console command that puts a paused probe back."""
    return "python _tdescope_probe.resume()"


def reinsert_command() -> str:
    """The console command that writes the probe's ``int3`` again (the kernel took it out)."""
    return "python _tdescope_probe.reinsert()"


def disarm_command() -> str:
    """The console command that takes the probe out."""
    return "python _tdescope_probe.disarm()"


class GdbBackend:
    """Probes through gdb/MI.

    Parameters
    ----------
    gdb_path : str, optional
        gdb to use; found on PATH when omitted.
    watchdog_s : float
        Detach when the target stays in a ptrace stop longer than this while armed.
    """

    name = "gdb"
    stops_target = True

    def __init__(self, gdb_path: str | None = None, watchdog_s: float = 0.25) -> None:
        self.gdb_path = gdb_path
        self.watchdog_s = watchdog_s

    def attach(self, pid: int, spec: ProbeSpec) -> "GdbHandle":
        """Attach gdb to ``pid`` and arm ``spec``; the target stays stopped until ``start()``."""
        handle = GdbHandle(pid, GdbSession(self.gdb_path), self.watchdog_s)
        try:
            handle._arm(spec)
        except BaseException:
            handle.close()
            raise
        return handle


class GdbHandle:
    """One gdb session holding one armed probe (see :class:`~tdescope.app.probe.backend.ProbeHandle`)."""

    def __init__(self, pid: int, gdb: GdbSession, watchdog_s: float) -> None:
        self.pid = int(pid)
        self.gdb = gdb
        self.armed = Armed(None)
        self.arming_stop_s = 0.0
        #: What the target's threads felt, from /proc, once closed (None before).
        self.stops: StopFigures | None = None
        self._meter = ThreadStops(self.pid)
        self._watchdog_s = watchdog_s
        self._workdir = tempfile.mkdtemp(prefix="tdescope-probe-")  # 0700
        self._spool = os.path.join(self._workdir, "spool.bin")
        create_private(self._spool)  # captured pages pass through it: 0600 whatever the umask
        self._reader: SpoolReader | None = SpoolReader(self._spool)
        self._backlog: list[Frame] = []
        self._guard: subprocess.Popen | None = None
        self._guarded: set[int] = set()
        self._attached_at = self._resumed_at = 0.0
        self._bucket = StopBucket(0.01, 0.025)  # the stop budget on what /proc shows (the spec's, once armed)
        self._paused = False
        self._closed: Closed | None = None
        _live_sessions.add(gdb)

    # -- arming ----------------------------------------------------------------
    def _arm(self, spec: ProbeSpec) -> None:
        gdb = self.gdb
        gdb.start()
        if spec.address is not None:
            # the address came from the ELF files: gdb need load no library symbols while the target is stopped
            gdb.command("-gdb-set auto-solib-add off")
        self._meter.start()  # before gdb stops anything: /proc counts every thread's stop from here
        self._attached_at = time.monotonic()
        gdb.attach(self.pid)
        gdb.console_command(source_command())
        self._bucket = StopBucket(spec.duty, spec.burst_s)
        spec_path = os.path.join(self._workdir, "spec.json")
        dataclasses.replace(spec, spool=self._spool).write(spec_path)
        gdb.console_command(arm_command(spec_path))
        said = self._reply(Notice.ARMED)
        self.armed = Armed(said.get("armed"), tuple(said.get("locations") or ()), bool(said.get("pending")),
                           tuple(said.get("errors") or ()))
        if self.armed.symbol is not None:
            self._guarded = {int(a, 16) for a in self.armed.locations}
            self._guard = _start_guard(self.pid, gdb.gdb_pid, self.armed.locations, self._workdir)

    def _reply(self, notice: Notice, timeout: float = REPLY_S) -> dict:
        """The fields of the helper's ``notice`` reply frame; earlier frames stay for :meth:`frames`."""
        deadline = time.monotonic() + timeout
        while True:
            for frame in self._read():
                self._backlog.append(frame)
                if frame.kind is FrameKind.NOTICE:
                    said, fields = notice_of(frame)
                    if said is notice:
                        return fields
            if time.monotonic() > deadline:
                raise GdbError(f"the probe helper did not answer {notice.value!r} within {timeout:g} s")
            time.sleep(0.005)

    # -- armed -----------------------------------------------------------------
    def start(self) -> None:
        """Let the target run; until now it was stopped since the attach."""
        felt = self._meter.current_s()  # the longest stop of any thread, under way until the resume
        self.gdb.resume()
        self._resumed_at = time.monotonic()
        self.arming_stop_s = max(self._resumed_at - self._attached_at, felt)  # until /proc says more
        self._wait_inserted()
        self.arming_stop_s = self._arming_stop()

    def _arming_stop(self, timeout: float = 1.0) -> float:
        """How long the attach and arming stopped the target, as /proc bounds it once a sweep saw every thread
        run again. Not gdb's bracket (attach sent to ``^running`` read): gdb says ``^running`` before it writes
        the probe and lets the threads go, which on a loaded machine left the target stopped 15 ms past it.
        /proc not seeing the end within ``timeout`` s (a hit at every sweep), or no stop at all (/proc
        unreadable): from the attach to now, which holds the stop whenever it ended."""
        deadline = time.monotonic() + timeout
        while (seen := self._meter.stop_bound(self._resumed_at)) is None and time.monotonic() < deadline:
            time.sleep(0.002)
        return seen if seen else max(self.arming_stop_s, time.monotonic() - self._attached_at)

    def _wait_inserted(self, timeout: float = 15.0) -> None:
        """Return once the probe's ``int3`` is in the target's code (read from /proc/PID/mem): gdb writes it
        as the target resumes, up to tens of ms after it answered ``^running`` (seconds on a loaded machine),
        and "armed" must be true when said. Not in after ``timeout`` s: GdbError (the window fails and takes
        the probe out; armed it would have caught nothing). A pending probe has no address yet."""
        addresses = [int(a, 16) for a in self.armed.locations]
        if not addresses:
            return
        try:
            fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
        except OSError:
            return
        try:
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if _int3_at_all(fd, addresses):
                    return
                time.sleep(0.001)
        except OSError:
            return  # the target is gone: the window hears it next
        finally:
            os.close(fd)
        raise GdbError(f"gdb did not put the probe into pid {self.pid}'s code within {timeout:g} s")

    def read_stats(self) -> None:
        """None: gdb's helper says its counts in notice frames (:class:`~tdescope.app.probe.stats.GdbStats`)."""
        return None

    def frames(self) -> list[Frame]:
        """Frames since the last call; return sites planted by the helper go to the guard on the way."""
        new = self._read()
        for frame in new:
            if frame.kind is FrameKind.NOTICE:
                said, fields = notice_of(frame)
                if said is Notice.RETURN_SITE and int(fields["address"]) not in self._guarded:
                    self._guarded.add(int(fields["address"]))
                    _update_guard(self._guard, self._guarded)
                elif said in (Notice.PAUSED, Notice.RESUMED):
                    self._paused = said is Notice.PAUSED
        out, self._backlog = self._backlog + new, []
        return out

    def _read(self) -> list[Frame]:
        return self._reader.frames() if self._reader is not None else []

    def resume(self) -> None:
        """Re-enable the probe that paused itself."""
        self.gdb.console_command(resume_command(), timeout=5.0)
        self._paused = False
        if self._bucket.started:
            self._bucket.start(self._meter.figures().most_stopped_s, time.monotonic())

    def poll(self, timeout: float) -> TargetNews | None:
        """The watchdog on stops of any thread (from /proc), then up to ``timeout`` s for the target's
        exit or a SIGINT."""
        stopped = self._meter.current_s(after=self._resumed_at)  # the arming stop is counted apart
        self._charge_felt()
        self._check_inserted()
        if stopped > self._watchdog_s:
            return TargetNews(Happened.STALLED, f"watchdog: a thread of pid {self.pid} stopped "
                                                f"{stopped * 1000:.0f} ms, over {self._watchdog_s * 1000:.0f} ms")
        rec = self.gdb.wait_event(_is_exit_or_sigint, timeout=timeout)
        if rec is None:
            return None
        if _is_sigint(rec):
            # someone sent the target SIGINT (PostgreSQL's query cancel): gdb stopped it
            # and keeps SIGINT for itself; deliver it, as if nobody were attached
            self.gdb.console_command("signal SIGINT &", timeout=5.0)  # "&": gdb must not wait for a stop
            return TargetNews(Happened.SIGNAL_PASSED, f"passed a SIGINT on to pid {self.pid}")
        if rec.type == "gdb-exit":
            return TargetNews(Happened.BACKEND_EXITED)
        self.gdb.pid = None  # nothing left to detach from
        return TargetNews(Happened.TARGET_EXITED)

    def _check_inserted(self) -> None:
        """Write the probe again when its ``int3`` has left the target's code while armed and not paused.
        When a uprobe at the same file offset ends in any other process (another tdescope's eBPF window on
        another mariadbd or postgres, bpftrace, ``perf probe``), the kernel writes the original byte back
        wherever an ``int3`` sits at that offset in a process none of its uprobes wants: gdb's too, which then
        sees no hit while the target runs on (design notes: "gdb sees no hit"). Missing on a poll, the helper
        looks itself, while gdb has its breakpoints in (a hit's step over the breakpoint takes it out for a
        moment: then it finds it back and does nothing), and puts it back; its ``reinserted`` count says so
        (hits in between were missed). A busy run's 0.2 s workload ended before a second poll could."""
        if self._paused or not self._resumed_at or not self.armed.locations:
            return
        try:
            fd = os.open(f"/proc/{self.pid}/mem", os.O_RDONLY)
            try:
                if _int3_at_all(fd, [int(a, 16) for a in self.armed.locations]):
                    return
            finally:
                os.close(fd)
        except OSError:
            return  # the target is gone: the window hears it next
        try:
            self.gdb.console_command(reinsert_command(), timeout=5.0)
        except GdbError:
            pass  # gdb gone: the window hears it next

    def _charge_felt(self) -> None:
        """The stop budget on what the target felt: the most stopped thread's stopped time since the
        resume (/proc; gdb stops every thread at each hit) goes into a bucket like the helper's, and
        when it overflows the probe is paused from outside (while the target runs)."""
        if not self._resumed_at:
            return
        now = time.monotonic()
        most = self._meter.figures().most_stopped_s
        if not self._bucket.started:
            # from two sweeps after the resume on, the arming stop (reported apart) is closed
            if self._meter.last_sweep > self._resumed_at + 2 * self._meter.interval:
                self._bucket.start(most, now)
            return
        resume_in = self._bucket.feed(most, now)
        if resume_in is not None and not self._paused:
            self._paused = True
            try:
                self.gdb.console_command(pause_command(resume_in), timeout=5.0)
            except GdbError:
                pass  # gdb gone: the window hears it next

    # -- the way out -----------------------------------------------------------
    def disarm(self) -> None:
        """Take the probe out and wait for the helper's ``disarmed`` frame.

        A one-thread target is stopped first. A many-threaded one is not: gdb's interrupt is a
        SIGINT, which mariadbd blocks in every thread (its signal thread takes it with sigwait, so
        no thread ever stops and gdb waits in vain), so the probe comes out while it runs, as a
        paused probe's does (gdb takes the ``int3`` out through /proc/PID/mem).
        """
        gdb = self.gdb
        if not (gdb.alive and gdb.pid is not None):
            return
        try:
            if len(thread_ids(self.pid)) > 1 or gdb.interrupt(timeout=3.0):
                gdb.console_command(disarm_command(), timeout=5.0)
                self._reply(Notice.DISARMED)
        except GdbError:
            pass  # close() still deletes breakpoints and detaches

    def close(self) -> Closed:
        """Detach and end gdb, stop the guard, remove the spool; unread frames stay for :meth:`frames`."""
        if self._closed is not None:
            return self._closed
        self.gdb.close()
        self.stops = self._meter.stop()
        _live_sessions.discard(self.gdb)
        report = _stop_guard(self._guard)
        if self._reader is not None:
            self._backlog.extend(self._reader.frames())  # written between the last read and the disarm
            self._reader.close()
            self._reader = None
        for name in ("spool.bin", "spec.json"):
            try:
                os.unlink(os.path.join(self._workdir, name))
            except OSError:
                pass
        try:
            os.rmdir(self._workdir)
        except OSError:
            pass
        self._closed = Closed() if report is None else Closed(report.restored, report.ms, report)
        return self._closed


def _int3_at_all(mem_fd: int, addresses) -> bool:
    """True when each of ``addresses`` holds an ``int3`` in the target's memory (``mem_fd``: its /proc/PID/mem)."""
    return all(os.pread(mem_fd, 1, a) == b"\xcc" for a in addresses)


def _is_exit(rec) -> bool:
    if rec.type == "gdb-exit":
        return True
    if rec.type == "notify" and rec.message == "thread-group-exited":
        return True
    return rec.type == "notify" and rec.message == "stopped" and isinstance(rec.payload, dict) and str(
        rec.payload.get("reason", "")
    ).startswith("exited")


def _is_sigint(rec) -> bool:
    return (rec.type == "notify" and rec.message == "stopped" and isinstance(rec.payload, dict)
            and rec.payload.get("reason") == "signal-received" and rec.payload.get("signal-name") == "SIGINT")


def _is_exit_or_sigint(rec) -> bool:
    return _is_exit(rec) or _is_sigint(rec)


@atexit.register
def _detach_all_on_exit() -> None:
    """Interpreter exit: every live gdb session detaches (gdb would too, on EOF)."""
    for gdb in list(_live_sessions):
        gdb.close(timeout=2.0)
