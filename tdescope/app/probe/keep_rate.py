"""The keep rate: how many captures a second a window keeps, in the GUI and in ``record`` alike.

A storm on an eBPF probe delivers tens of thousands of page pairs a second. Neither a view nor a
session file needs them all, and both must keep the same thing: a window with a keep rate keeps at
most that many captures a second (a token bucket, its first second's worth at once) and counts the
others as *thinned*. A thinned page is never built into a capture; its count is carried by the
window's states (``CaptureWindowState.unsent``, recorded in the session file) and its summary.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from tdescope.app.events import CaptureWindowState

__all__ = ["KEEP_PER_S", "KeepRate", "thinned_in"]

#: The keep rate of the GUI's windows and of ``tdescope record``: captures kept per second.
KEEP_PER_S = 300


class KeepRate:
    """A token bucket of ``per_s`` captures a second (a burst of ``per_s``)."""

    def __init__(self, per_s: float) -> None:
        self._rate = float(per_s)
        self._tokens = float(per_s)
        self._at = time.monotonic()

    def allow(self) -> bool:
        """True when one more capture may be kept now."""
        now = time.monotonic()
        self._tokens = min(self._rate, self._tokens + (now - self._at) * self._rate)
        self._at = now
        if self._tokens < 1:
            return False
        self._tokens -= 1
        return True


def thinned_in(states: Iterable[CaptureWindowState]) -> int:
    """Captures the keep rate did not keep, over every window of ``states`` (a session's, in order):
    each window's closing state carries its total."""
    return sum(s.unsent for s in states if s.state.ended)
