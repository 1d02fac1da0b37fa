"""A capture window in a worker process: the window's process gets a sample, never the storm.

An eBPF probe on a busy target delivers tens of thousands of page pairs a
second. Reading the ring, pairing, and building captures at that rate in the
GUI's process would hold the GIL the event loop needs. :class:`RemoteWindow`
runs the real :class:`~tdescope.app.probe.window.CaptureWindow` in a worker
process, and that worker is ``tdescope agent`` on a local pipe
(``python -m tdescope.app.remote.agent_main``): the protocol ``--ssh`` uses, typed
frames, never pickle (issue 28: one protocol, not two). With the keep rate the GUI
gives it (``CaptureLimits.max_kept_per_s``, the same rule ``record`` uses), a storm
arrives as a sample, and the window's states carry the full counts (captures,
thinned as ``unsent``, hits, lost). The worker ends its window when asked, and by
itself when its stdin closes (the workbench died): the probe comes out the same
way as on any other exit.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

from tdescope.app.engines.api import ProbeRecipe
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, PageCapture, WindowState
from tdescope.app.probe.backend import ProbeBackend
from tdescope.app.probe.window import CaptureLimits, CaptureSummary
from tdescope.app.system.child_env import PYTHON, child_env

__all__ = ["WORKER_ARGV", "RemoteWindow"]

#: The local worker: the agent run from the installed package (gdb's helper is a file there).
WORKER_ARGV = [sys.executable, "-m", "tdescope.app.remote.agent_main"]


class RemoteWindow:
    """A :class:`CaptureWindow` run in a worker process; same parameters, same ``run``/``cancel``/``armed``.

    ``on_capture`` and ``on_state`` are called on the thread that calls :meth:`run`.
    :attr:`skipped`: the captures the window's keep rate did not keep (``limits.max_kept_per_s``).
    """

    def __init__(self, pid: int, recipe: ProbeRecipe, limits: CaptureLimits, engine: str,
                 on_capture: Callable[[PageCapture], None],
                 on_state: Callable[[CaptureWindowState], None] | None = None,
                 backend: ProbeBackend | None = None, allow_critical: bool = False) -> None:
        self._args = (int(pid), recipe, limits, engine)
        self._backend = backend
        self._allow_critical = allow_critical
        self._on_capture = on_capture
        self._on_state = on_state or (lambda _s: None)
        self.armed = threading.Event()
        self.skipped = 0
        self._window = None
        self._cancel_reason: str | None = None
        self._drain = False

    def cancel(self, reason: str = "cancelled", drain: bool = False) -> None:
        """Ask the worker to disarm now (returns at once); ``reason`` is how the window ends, ``drain`` as
        :meth:`CaptureWindow.cancel <tdescope.app.probe.window.CaptureWindow.cancel>`."""
        self._cancel_reason, self._drain = reason, drain
        window = self._window
        if window is not None:
            window.cancel(reason, drain)

    def run(self) -> CaptureSummary:
        """Start the worker, relay what it sends until its summary; always reap it."""
        from tdescope.app.remote.client import AgentClient, backend_request

        t0 = time.monotonic()
        backend_name = self._backend.name if self._backend is not None else "gdb"
        try:
            client = AgentClient(WORKER_ARGV, env=child_env(PYTHON))
        except OSError as exc:
            return self._failed(t0, backend_name, f"the capture worker did not start: {exc}")
        try:
            client.hello()
            window = client.window(*self._args, self._on_capture, self._on_state, allow_critical=self._allow_critical,
                                   backend=backend_request(self._backend))
            self._window = window
            if self._cancel_reason is not None:
                window.cancel(self._cancel_reason, self._drain)
            window.armed = self.armed  # one event: set and cleared from the agent's states
            summary = window.run()
            self.skipped = window.skipped
            return summary
        except UserError as exc:
            return self._failed(t0, backend_name, str(exc))
        finally:
            self._window = None
            self.armed.clear()
            client.close(timeout=15)  # a worker still running sees EOF and disarms

    def _failed(self, t0: float, backend: str, message: str) -> CaptureSummary:
        self._on_state(CaptureWindowState(time.time(), state=WindowState.FAILED, message=message, backend=backend))
        return CaptureSummary.failed(message, time.monotonic() - t0, backend)
