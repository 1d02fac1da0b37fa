"""What the window passes around besides the app's events: messages on its event pump (public: the
docks subscribe) and the connect task's outcome."""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.engines.api import EngineSession, Inventory, PageDecoder
from tdescope.app.events import PageCapture
from tdescope.app.probe.capture_record import CaptureRecord

__all__ = ["Captured", "Connected"]


@dataclass(frozen=True, slots=True)
class Captured:
    """A page capture with its summary, made on the producer's thread."""

    capture: PageCapture
    record: CaptureRecord


@dataclass(frozen=True, slots=True)
class Connected:
    """The engine session is connected (the connect task's result); ``inventory`` is what the Engine
    dock shows and the recording keeps in its metadata."""

    session: EngineSession
    inventory: Inventory
    decoder: PageDecoder | None = None  # the session's own, when it knows the database's tables
