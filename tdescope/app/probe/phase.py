"""Where a capture window is, and the transitions it may make (:class:`~tdescope.app.probe.window.CaptureWindow`).

::

    attaching -> armed <-> paused
        |          |         |
        +----------+---------+--> disarming -> disarmed | failed
"""

from __future__ import annotations

import enum

from tdescope.app.events import WindowState

__all__ = ["TRANSITIONS", "Phase"]


class Phase(enum.Enum):
    """Where a window is. ``published`` is the :class:`CaptureWindowState` state entering it says, if any."""

    ATTACHING = ("attaching", None)
    ARMED = ("armed", WindowState.ARMED)
    PAUSED = ("paused", WindowState.PAUSED)
    DISARMING = ("disarming", None)
    DONE = ("disarmed", WindowState.DISARMED)
    FAILED = ("failed", WindowState.FAILED)

    @property
    def published(self) -> WindowState | None:
        return self.value[1]


#: Every transition a window may make; anything else is a bug and raises.
TRANSITIONS: dict[Phase, frozenset[Phase]] = {
    Phase.ATTACHING: frozenset({Phase.ARMED, Phase.DISARMING}),
    Phase.ARMED: frozenset({Phase.PAUSED, Phase.DISARMING}),
    Phase.PAUSED: frozenset({Phase.ARMED, Phase.DISARMING}),
    Phase.DISARMING: frozenset({Phase.DONE, Phase.FAILED}),
    Phase.DONE: frozenset(),
    Phase.FAILED: frozenset(),
}
