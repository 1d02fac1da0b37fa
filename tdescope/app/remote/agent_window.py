"""A capture window run by the agent, seen from the workbench: the window's face over the agent's frames.

:meth:`AgentClient.window <tdescope.app.remote.client.AgentClient.window>` makes one; it has the same
``run``/``cancel``/``armed``/``skipped`` as :class:`~tdescope.app.probe.window.CaptureWindow`, so
remote captures enter the same ``LiveSession`` as local ones.
"""

from __future__ import annotations

import queue
import threading
import time

from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import CaptureWindowState, WindowState
from tdescope.app.probe.window import CaptureSummary
from tdescope.app.remote import wire
from tdescope.app.remote.protocol import Kind, ProtocolError

__all__ = ["AgentWindow"]


class AgentWindow:
    """A capture window in the agent; same ``run``/``cancel``/``armed``/``skipped`` as ``RemoteWindow``.

    ``on_capture`` and ``on_state`` are called on the thread that calls :meth:`run`."""

    def __init__(self, client, pid, recipe, limits, engine, on_capture, on_state, allow_critical,
                 critical, backend) -> None:
        self._client = client
        self._request = {"pid": int(pid), "recipe": wire.recipe_fields(recipe), "limits": wire.to_fields(limits),
                         "engine": engine, "allow_critical": bool(allow_critical),
                         "critical": [wire.to_fields(r) for r in critical], "backend": backend[0],
                         "options": backend[1]}
        self._backend = backend[0]
        self._on_capture = on_capture
        self._on_state = on_state or (lambda _s: None)
        self.armed = threading.Event()
        self.skipped = 0
        self._started = False
        self._cancel: str | None = None
        self._drain = False

    def cancel(self, reason: str = "cancelled", drain: bool = False) -> None:
        """Ask the agent to disarm now (returns at once); ``drain``: deliver what the probe caught first."""
        self._cancel, self._drain = reason, drain
        if self._started:
            try:
                self._client.send(Kind.DISARM, {"reason": reason, "drain": drain})
            except UserError:
                pass

    def run(self) -> CaptureSummary:
        """Arm in the agent and relay what it sends until the window's summary."""
        t0 = time.monotonic()
        q: queue.Queue = queue.Queue()
        self._client._window_q = q
        try:
            self._client.send(Kind.ARM, self._request)
            self._started = True
            if self._cancel is not None:
                self.cancel(self._cancel, self._drain)
            while True:
                frame = q.get()
                if frame is None:
                    return self._failed(t0, self._client.lost or "connection lost", lost=True)
                kind, header, payload = frame
                if kind is Kind.CAPTURES:
                    for capture in wire.captures_of(header, payload):
                        self._on_capture(capture)
                elif kind is Kind.STATE:
                    state = wire.state_of(header)
                    if state.state is WindowState.ARMED:
                        self.armed.set()
                    elif state.state.ended:
                        self.armed.clear()
                    self._on_state(state)
                elif kind is Kind.SUMMARY:
                    summary = wire.summary_of(header)
                    self.skipped = summary.thinned
                    return summary
                elif kind is Kind.REFUSED and header.get("request") == "ARM":
                    return self._failed(t0, str(header.get("message")))
        except (UserError, ProtocolError) as exc:
            return self._failed(t0, str(exc), lost=isinstance(exc, ConnectionLost))
        finally:
            self.armed.clear()
            self._client._window_q = None

    def _failed(self, t0: float, message: str, lost: bool = False) -> CaptureSummary:
        self._on_state(CaptureWindowState(time.time(), state=WindowState.FAILED, message=message, backend=self._backend))
        return CaptureSummary.failed(message, time.monotonic() - t0, self._backend, lost)
