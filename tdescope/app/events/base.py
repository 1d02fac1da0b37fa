"""The base of every event."""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.slots import SLOTS

__all__ = ["Event"]


@dataclass(frozen=True, **SLOTS)
class Event:
    """Base of every event: when it happened (epoch seconds)."""

    ts: float
