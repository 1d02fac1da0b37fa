"""A gdb/MI session: one gdb process, tokened commands with deadlines, read-only.

pygdbmi's parser turns MI text into records; the transport here is our own
because pygdbmi's IoManager waits for "a pause in output" to decide a command
finished (its issue #104). Here every command carries a token and a deadline,
and a reader thread routes each result record to the command that owns its
token; asynchronous records (``*stopped``, ``=thread-group-exited`` ...) go to
a queue.

Target safety (DESIGN.md): gdb runs in its own session and process group, so a
signal to the workbench never reaches it; ``mi-async`` is on, so when our end of
its stdin closes (the workbench died) gdb removes its breakpoints and detaches.
Every command passes the read-only guard first (:mod:`.allowlist`, a fixed
grammar): nothing that writes target memory or registers, calls target
functions or runs free-form Python reaches gdb.
"""

from __future__ import annotations

import functools
import itertools
import os
import queue
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from pygdbmi import gdbmiparser

from tdescope.app.errors import UserError
from tdescope.app.gdb.allowlist import refusal
from tdescope.app.system.child_env import child_env
from tdescope.app.system.runtime_tools import GDB

__all__ = ["GdbError", "GdbTimeout", "GdbSession", "MiRecord", "MIN_GDB", "find_gdb", "gdb_version", "require_gdb"]

#: gdb.FinishBreakpoint and Breakpoint.stop() as used by the probe helper, and MI3, need gdb >= 9.
MIN_GDB = (9, 0)


class GdbError(UserError):
    """gdb answered ``^error`` (or died); the message is gdb's."""


class GdbTimeout(GdbError):
    """A command's deadline passed with no result record."""


@dataclass(frozen=True)
class MiRecord:
    """One parsed MI record: ``type`` (result, notify, console...), ``message`` and ``payload``."""

    type: str
    message: str | None
    payload: object
    token: int | None = None
    received: float = field(default_factory=time.monotonic)


def find_gdb() -> str:
    """Path of gdb, or raise UserError with the fix."""
    return GDB.require()


def gdb_version(path: str | None = None) -> tuple[int, int]:
    """(major, minor) of the gdb at ``path``."""
    out = subprocess.run([path or find_gdb(), "--version"], capture_output=True, text=True, timeout=10,
                         env=child_env(LC_ALL="C")).stdout
    m = re.search(r"(\d+)\.(\d+)", out.splitlines()[0] if out else "")
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


@functools.lru_cache(maxsize=8)
def _version_of(path: str, mtime_ns: int) -> tuple[int, int]:
    del mtime_ns  # part of the cache key only: a gdb upgraded in place is asked again
    return gdb_version(path)


def require_gdb(path: str | None = None) -> str:
    """Path of a gdb new enough for the probes, or raise UserError with the fix."""
    path = path or find_gdb()
    try:
        version = _version_of(path, os.stat(path).st_mtime_ns)
    except (OSError, subprocess.SubprocessError) as exc:
        raise UserError(f"gdb at {path} does not run: {exc}") from None
    if version < MIN_GDB:
        raise UserError(f"gdb {version[0]}.{version[1]} at {path} is too old: tdescope needs gdb "
                        f"{MIN_GDB[0]}.{MIN_GDB[1]} or newer (Python FinishBreakpoint, MI3)")
    return path


def check_command(command: str) -> None:
    """Raise GdbError unless ``command`` is in the read-only grammar (:mod:`.allowlist`)."""
    reason = refusal(command)
    if reason is not None:
        raise GdbError(f"refused by tdescope's read-only guard: {reason}")


class GdbSession:
    """One gdb process speaking MI3.

    Parameters
    ----------
    gdb_path : str, optional
        gdb to run; found on PATH when omitted.
    timeout : float
        Default deadline, in seconds, for a command's result record.

    Notes
    -----
    Use as a context manager. :meth:`close` always detaches: it is safe to call
    at any point, more than once, and from any thread.
    """

    def __init__(self, gdb_path: str | None = None, timeout: float = 10.0) -> None:
        self._gdb_path = gdb_path or find_gdb()
        self.timeout = timeout
        self._tokens = itertools.count(1)
        self._pending: dict[int, queue.Queue] = {}
        self._pending_lock = threading.Lock()
        self._write_lock = threading.Lock()
        self.events: queue.Queue[MiRecord] = queue.Queue()
        self._proc: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None
        self.pid: int | None = None
        self.running = False
        self._closed = False
        self._eof = False

    # -- process ---------------------------------------------------------------
    def start(self) -> "GdbSession":
        """Start gdb (its own session/process group, no init files, MI3)."""
        require_gdb(self._gdb_path)
        try:
            self._proc = subprocess.Popen(
                # one thread: when gdb dies, its tracees are detached and its pidfd (the
                # guard's watch) is signalled in the same exit, with no worker threads between
                [self._gdb_path, "--interpreter=mi3", "--nx", "--quiet", "-iex", "maint set worker-threads 0"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl+C or kill of our group never reaches gdb
                # Keep SIGPIPE ignored in gdb (Python ignores it; Popen would restore it):
                # if the workbench dies, gdb's next MI notification must fail with EPIPE,
                # not kill gdb with breakpoints still in the target.
                restore_signals=False,
                close_fds=True,
                env=child_env(LC_ALL="C", TERM="dumb"),  # an allowlist: no password reaches gdb
            )
        except OSError as exc:
            raise UserError(f"cannot start gdb ({self._gdb_path}): {exc.strerror}") from None
        self._reader = threading.Thread(target=self._read_loop, name="gdb-mi-reader", daemon=True)
        self._reader.start()
        for setting in (
            "mi-async on",  # lets gdb detach by itself when our stdin closes
            "pagination off",
            "confirm off",
            "breakpoint pending on",  # a probe in a library not loaded yet resolves when it loads
            # not may-write-memory off: gdb then inserts no breakpoint (test_gdb_mi shows
            # it); the allowlist is what keeps the workbench read-only
            "may-call-functions off",
            "auto-load off",
            "print thread-events off",
        ):
            self.command(f"-gdb-set {setting}")
        return self

    @property
    def alive(self) -> bool:
        """True while the gdb process runs."""
        return self._proc is not None and self._proc.poll() is None

    @property
    def gdb_pid(self) -> int | None:
        """The gdb process's pid (None before :meth:`start`), for a watcher of gdb itself."""
        return self._proc.pid if self._proc is not None else None

    def _read_loop(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        for raw in self._proc.stdout:
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if not line or line == "(gdb) ":
                continue
            if not _balanced(line):
                continue  # pygdbmi loops forever on an unterminated list or tuple
            try:
                rec = gdbmiparser.parse_response(line)
            except Exception:  # noqa: BLE001 - a garbled line must not kill the reader
                continue
            record = MiRecord(rec.get("type", ""), rec.get("message"), rec.get("payload"), rec.get("token"))
            if record.type == "result" and record.token is not None:
                with self._pending_lock:
                    box = self._pending.get(record.token)
                if box is not None:
                    box.put(record)
                    continue
            if record.type == "notify" and record.message in ("running", "stopped"):
                self.running = record.message == "running"
            self.events.put(record)
        # gdb's stdout closed: wake every waiter (and, through _eof, every later one)
        with self._pending_lock:
            self._eof = True
            boxes = list(self._pending.values())
        for box in boxes:
            box.put(None)
        self.events.put(MiRecord("gdb-exit", None, None))

    # -- commands --------------------------------------------------------------
    def command(self, command: str, timeout: float | None = None) -> MiRecord:
        """Send one MI command and wait for its result record.

        Raises
        ------
        GdbError
            gdb answered ^error, died, or the guard refused the command.
        GdbTimeout
            No result record within ``timeout`` seconds.
        """
        check_command(command)
        if not self.alive:
            raise GdbError("gdb is not running")
        token = next(self._tokens)
        box: queue.Queue = queue.Queue(maxsize=1)
        with self._pending_lock:
            if self._eof:
                # gdb's output ended already: nobody would ever answer this command
                raise GdbError(f"gdb exited before {command.split()[0]}")
            self._pending[token] = box
        try:
            with self._write_lock:
                assert self._proc is not None and self._proc.stdin is not None
                try:
                    self._proc.stdin.write(f"{token}{command}\n".encode())
                    self._proc.stdin.flush()
                except (BrokenPipeError, OSError):
                    raise GdbError("gdb exited") from None
            try:
                record = box.get(timeout=self.timeout if timeout is None else timeout)
            except queue.Empty:
                raise GdbTimeout(f"gdb did not answer {command.split()[0]} in time") from None
        finally:
            with self._pending_lock:
                self._pending.pop(token, None)
        if record is None:
            raise GdbError(f"gdb exited during {command.split()[0]}")
        if record.message == "error":
            msg = record.payload.get("msg", "error") if isinstance(record.payload, dict) else str(record.payload)
            raise GdbError(msg)
        return record

    def console_command(self, text: str, timeout: float | None = None) -> MiRecord:
        """Run an allowed console command (``source``, our helper's functions) through MI."""
        quoted = text.replace("\\", "\\\\").replace('"', '\\"')
        return self.command(f'-interpreter-exec console "{quoted}"', timeout=timeout)

    def wait_event(self, predicate, timeout: float) -> MiRecord | None:
        """Wait for an async record matching ``predicate``; None at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            try:
                rec = self.events.get(timeout=left)
            except queue.Empty:
                return None
            if predicate(rec):
                return rec
            if rec.type == "gdb-exit":
                self.events.put(rec)  # keep the exit visible to later waiters
                return None

    # -- target ----------------------------------------------------------------
    def attach(self, pid: int, timeout: float = 20.0) -> None:
        """Attach to ``pid``; the target is stopped afterwards (call :meth:`resume`)."""
        try:
            self.command(f"-target-attach {int(pid)}", timeout=timeout)
        except GdbError as exc:
            raise GdbError(_explain_attach_error(pid, str(exc))) from None
        self.pid = int(pid)
        # -target-attach answers ^done before the *stopped record; wait for it
        self.wait_event(lambda r: r.type == "notify" and r.message == "stopped", timeout=timeout)

    def resume(self) -> None:
        """Let the target run (``-exec-continue``)."""
        self.command("-exec-continue")

    def interrupt(self, timeout: float = 5.0) -> bool:
        """Stop the target; True once gdb reports it stopped.

        Sends nothing when the target is already stopped: an interrupt then would
        leave a SIGINT pending for the target.
        """
        if not self.running:
            return True
        self._drain_events()
        self.command("-exec-interrupt", timeout=timeout)
        return self.wait_event(lambda r: r.type == "notify" and r.message == "stopped", timeout) is not None

    def _drain_events(self) -> None:
        while True:
            try:
                rec = self.events.get_nowait()
            except queue.Empty:
                return
            if rec.type == "gdb-exit":
                self.events.put(rec)
                return

    def detach(self) -> None:
        """Detach from the target (it runs on, untraced)."""
        if self.pid is None:
            return
        self.command("-target-detach", timeout=10.0)
        self.pid = None

    def close(self, timeout: float = 5.0) -> None:
        """Detach if attached and end gdb. Never raises; idempotent."""
        if self._closed or self._proc is None:
            return
        self._closed = True
        proc = self._proc
        if proc.poll() is None:
            try:
                if self.pid is not None:
                    try:
                        self.command("-break-delete", timeout=2.0)
                    except GdbError:
                        pass
                    self.detach()
                self.command("-gdb-exit", timeout=2.0)
            except GdbError:
                pass
            # Closing stdin makes an async-mode gdb clean up and exit by itself.
            try:
                proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                # gdb is wedged; SIGTERM lets it detach, SIGKILL is the very last resort.
                for sig in (signal.SIGTERM, signal.SIGKILL):
                    try:
                        os.killpg(proc.pid, sig)
                    except ProcessLookupError:
                        break
                    try:
                        proc.wait(timeout=2.0)
                        break
                    except subprocess.TimeoutExpired:
                        continue
        self.pid = None

    def __enter__(self) -> "GdbSession":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def _balanced(line: str) -> bool:
    """True when every C string in ``line`` is closed and its ``{}``/``[]`` nest properly."""
    stack: list[str] = []
    in_string = escaped = False
    for ch in line:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            stack.append("}" if ch == "{" else "]")
        elif ch in "}]":
            if not stack or stack.pop() != ch:
                return False
    return not in_string and not stack


def _explain_attach_error(pid: int, msg: str) -> str:
    """Turn gdb's attach error into one line the user can act on."""
    if not os.path.exists(f"/proc/{pid}"):
        return f"pid {pid} is gone (no such process)"
    low = msg.lower()
    if "operation not permitted" in low or "ptrace" in low:
        return (
            f"ptrace not permitted on pid {pid}: run as the process owner or root, "
            "or set kernel.yama.ptrace_scope=0"
        )
    return f"cannot attach to pid {pid}: {msg}"
