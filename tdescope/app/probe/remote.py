"""A capture window in a worker process: the window's process gets a sample, never the storm.

An eBPF probe on a busy target delivers tens of thousands of page pairs a
second. Reading the ring, pairing, and building captures at that rate in the
GUI's process would hold the GIL the event loop needs. :class:`RemoteWindow`
runs the real :class:`~tdescope.app.probe.window.CaptureWindow` in a worker
process (``python -m tdescope.app.probe.remote FD``, talking pickles over a
socket pair: no re-import of the caller's main module, as multiprocessing's
spawn would do) and forwards, in batches, every capture the window keeps: with
the keep rate the GUI gives it (``CaptureLimits.max_kept_per_s``, the same rule
``record`` uses), a storm arrives as a sample, and the window's states carry the
full counts (captures, thinned as ``unsent``, hits, lost). The worker ends its window
when asked, and by itself when the pipe to its parent closes (the workbench
died): the probe comes out the same way as on any other exit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from tdescope.app.engines.api import ProbeRecipe
from tdescope.app.events import CaptureWindowState, PageCapture, WindowState
from tdescope.app.probe.backend import ProbeBackend
from tdescope.app.probe.window import CaptureLimits, CaptureSummary, CaptureWindow
from tdescope.app.system.child_env import PYTHON, child_env

__all__ = ["RemoteWindow"]

#: A batch leaves the worker after this long, or at this many captures.
BATCH_S, BATCH_MAX = 0.05, 64


class _Forwarder:
    """The worker's side: sends the window's captures and states in batches."""

    def __init__(self, conn) -> None:
        self._conn = conn
        self._lock = threading.Lock()
        self._batch: list[PageCapture] = []
        self._sent_at = time.monotonic()

    def capture(self, capture: PageCapture) -> None:
        now = time.monotonic()
        with self._lock:
            self._batch.append(capture)
            if len(self._batch) >= BATCH_MAX or now - self._sent_at >= BATCH_S:
                self._flush()

    def state(self, state: CaptureWindowState) -> None:
        with self._lock:
            self._flush()
            self._conn.send(("state", state))

    def _flush(self) -> None:
        if self._batch:
            self._conn.send(("captures", self._batch))
            self._batch = []
        self._sent_at = time.monotonic()

    def finish(self, summary: CaptureSummary) -> None:
        with self._lock:
            self._flush()
            self._conn.send(("summary", summary))


def _listen(conn, window: CaptureWindow) -> None:
    """The worker's ear: "cancel", or the parent gone (EOF), end the window."""
    reason = "cancelled"
    try:
        while True:
            msg = conn.recv()
            if msg and msg[0] == "cancel":
                reason = msg[1] if len(msg) > 1 else reason
                break
    except (EOFError, OSError):
        pass
    window.cancel(reason)


def _work(conn, pid, recipe, limits, engine, backend, allow_critical) -> None:
    """The worker process's body."""
    out = _Forwarder(conn)
    window = CaptureWindow(pid, recipe, limits, engine, out.capture, out.state, backend=backend,
                           allow_critical=allow_critical)
    threading.Thread(target=_listen, args=(conn, window), name="parent-pipe", daemon=True).start()
    try:
        summary = window.run()
    except Exception as exc:  # noqa: BLE001 - told to the parent as the window's error
        summary = CaptureSummary(0, "error", None, (), 0.0, 0.0, f"capture failed: {type(exc).__name__}: {exc}")
    try:
        out.finish(summary)
    except (BrokenPipeError, OSError):
        pass  # the parent is gone


class RemoteWindow:
    """A :class:`CaptureWindow` run in a worker process; same parameters, same ``run``/``cancel``/``armed``.

    ``on_capture`` and ``on_state`` are called on the thread that calls :meth:`run`.
    :attr:`skipped`: the captures the window's keep rate did not keep (``limits.max_kept_per_s``).
    """

    def __init__(self, pid: int, recipe: ProbeRecipe, limits: CaptureLimits, engine: str,
                 on_capture: Callable[[PageCapture], None],
                 on_state: Callable[[CaptureWindowState], None] | None = None,
                 backend: ProbeBackend | None = None, allow_critical: bool = False) -> None:
        self._args = (int(pid), recipe, limits, engine, backend, allow_critical)
        self._on_capture = on_capture
        self._on_state = on_state or (lambda _s: None)
        self.armed = threading.Event()
        self.skipped = 0
        self._conn = None
        self._cancelled = threading.Event()

    def cancel(self, reason: str = "cancelled") -> None:
        """Ask the worker to disarm now (returns at once); ``reason`` is how the window ends."""
        self._cancel_reason = reason
        self._cancelled.set()
        conn = self._conn
        if conn is not None:
            try:
                conn.send(("cancel", reason))
            except (BrokenPipeError, OSError):
                pass

    def run(self) -> CaptureSummary:
        """Start the worker, relay what it sends until its summary; always reap it."""
        mine_sock, theirs = socket.socketpair()
        t0 = time.monotonic()
        try:
            proc = subprocess.Popen([sys.executable, "-m", "tdescope.app.probe.remote", str(theirs.fileno())],
                                    pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, start_new_session=True,
                                    env=child_env(PYTHON))
        finally:
            theirs.close()
        mine = Connection(mine_sock.detach())
        self._conn = mine
        summary = None
        try:
            mine.send(self._args)
            if self._cancelled.is_set():
                self.cancel(getattr(self, "_cancel_reason", "cancelled"))
            while summary is None:
                if not mine.poll(0.1):
                    if proc.poll() is not None and not mine.poll(0):
                        break
                    continue
                try:
                    msg = mine.recv()
                except (EOFError, OSError):
                    break
                if msg[0] == "captures":
                    for capture in msg[1]:
                        self._on_capture(capture)
                elif msg[0] == "state":
                    state = msg[1]
                    if state.state is WindowState.ARMED:
                        self.armed.set()
                    elif state.state.ended:
                        self.armed.clear()
                    self._on_state(state)
                else:
                    summary = msg[1]
                    self.skipped = summary.thinned
        finally:
            self.armed.clear()
            self._conn = None
            mine.close()  # a worker still running sees EOF and disarms
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        if summary is None:
            return CaptureSummary(0, "error", None, (), 0.0, time.monotonic() - t0,
                                  f"the capture worker process died (exit code {proc.returncode})")
        return summary


def _main(fd: int) -> None:
    """The worker process: its arguments arrive first, on the socket its parent gave it."""
    conn = Connection(fd)
    try:
        args = conn.recv()
    except (EOFError, OSError):
        return
    _work(conn, *args)


if __name__ == "__main__":
    _main(int(sys.argv[1]))
