"""Typed, immutable events that producers emit and the session fans out: the session file's vocabulary.

Every producer (probes, samplers, workload runners) runs off the GUI thread and
emits instances of these dataclasses. Timestamps are ``time.time()`` seconds.
Each idea has its module (:mod:`.capture`, :mod:`.workload`, :mod:`.observed`,
:mod:`.ab`, :mod:`.lessons`); this package names them all, and :data:`EVENT_TYPES`
is the one closed map a session file is read by.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from tdescope.app.events.ab import ABResult, PhaseRatio, RoundTime
from tdescope.app.events.base import Event
from tdescope.app.events.capture import (
    CaptureContext,
    CaptureWindowState,
    ContextKind,
    Direction,
    PageCapture,
    PlaintextSide,
    WindowState,
    default_plaintext_side,
)
from tdescope.app.events.lessons import LessonCard, LessonVerdict
from tdescope.app.events.observed import HotspotLeaves, HotspotWindow, WaitFigure, WaitFigures, WaitSample, WaitSpan, WaitSpans
from tdescope.app.events.workload import (
    AB_SIDES,
    LostConnection,
    Marker,
    PhaseName,
    PhaseTiming,
    Problem,
    Side,
    WorkloadProgress,
    WorkloadResult,
    is_ab,
)

__all__ = [
    "AB_SIDES",
    "LessonVerdict",
    "PhaseName",
    "Side",
    "is_ab",
    "Event",
    "Direction",
    "PlaintextSide",
    "ContextKind",
    "CaptureContext",
    "default_plaintext_side",
    "PageCapture",
    "WorkloadProgress",
    "WorkloadResult",
    "PhaseTiming",
    "CaptureWindowState",
    "WindowState",
    "Marker",
    "HotspotWindow",
    "WaitSample",
    "WaitFigure",
    "WaitFigures",
    "WaitSpan",
    "WaitSpans",
    "Problem",
    "LostConnection",
    "HotspotLeaves",
    "RoundTime",
    "PhaseRatio",
    "ABResult",
    "LessonCard",
    "EVENT_TYPES",
]

#: The session file's vocabulary, closed: stored kind (class name) -> class, for every
#: event and every dataclass nested in one (``PhaseTiming``). The session codec builds
#: objects from this map only; a name not in it is skipped when read.
EVENT_TYPES: Mapping[str, type] = MappingProxyType({
    cls.__name__: cls
    for cls in (PageCapture, WorkloadProgress, WorkloadResult, PhaseTiming, CaptureWindowState, Marker,
                HotspotWindow, WaitSample, WaitFigure, WaitFigures, WaitSpan, WaitSpans, Problem, HotspotLeaves,
                RoundTime, PhaseRatio, ABResult, LessonCard, LostConnection)
})
