"""Messages the window puts on its event pump besides the app's events (public: the docks subscribe)."""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.engines.api import EngineSession, Inventory
from tdescope.app.events import PageCapture
from tdescope.app.probe.capture_record import CaptureRecord

__all__ = ["Captured", "Connected", "ExperimentFinished"]


@dataclass(frozen=True, slots=True)
class Captured:
    """A page capture with its summary, made on the producer's thread."""

    capture: PageCapture
    record: CaptureRecord


@dataclass(frozen=True, slots=True)
class Connected:
    """The engine session is connected; ``inventory`` is what the Engine dock shows."""

    session: EngineSession
    inventory: Inventory


@dataclass(frozen=True, slots=True)
class ExperimentFinished:
    """The running workload ended; queued behind every event it produced."""
