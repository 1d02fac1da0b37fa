"""The contract between a capture window and the thing that puts probes in a process.

A :class:`ProbeBackend` attaches to a pid and arms a :class:`ProbeSpec`,
returning a :class:`ProbeHandle`; the window drives the handle (frames, pause
and resume, what the target did) and always ends with :meth:`ProbeHandle.disarm`
and :meth:`ProbeHandle.close`. The gdb backend (``gdb_backend.py``) is one; an
eBPF backend (uprobe/uretprobe, ring buffer) is another: it hands over the same
:class:`~tdescope.app.probe.frames.Frame` records, so windows, the spool
consumer and the UI do not change.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tdescope.app.events.base import Word
from tdescope.app.gdb.guard import GuardReport
from tdescope.app.probe.frames import Frame
from tdescope.app.probe.spec import ProbeSpec
from tdescope.app.probe.stats import EbpfStats
from tdescope.app.slots import SLOTS

if TYPE_CHECKING:
    from tdescope.app.system.threadstops import StopFigures

__all__ = ["Armed", "Closed", "DetachesAnywhere", "EndReason", "MetersStops", "ProbeBackend", "ProbeHandle", "TargetNews",
           "Happened"]


@dataclass(frozen=True, **SLOTS)
class Armed:
    """The probe's answer to ``arm``.

    ``symbol`` is the symbol armed (None: none of the spec's symbols was found,
    ``errors`` says why); ``locations`` the code addresses it sits at (hex);
    ``pending`` that it waits for its library to load.
    """

    symbol: str | None
    locations: tuple[str, ...] = ()
    pending: bool = False
    errors: tuple[str, ...] = ()


class Happened(Word):
    """What the target (or the backend) did while armed; a window that ends on it says so (its member as
    :attr:`~tdescope.app.probe.window.CaptureSummary.reason`)."""

    TARGET_EXITED = "target exited"
    BACKEND_EXITED = "gdb exited"  #: the backend's own process died (for gdb: the debugger)
    STALLED = "watchdog"  #: the target stayed stopped too long: the window must end now
    SIGNAL_PASSED = "signal passed"  #: a signal someone sent the target was delivered; the window goes on


class EndReason(Word):
    """Why a capture window ended, in its own words; the others are a :class:`Happened`, a reason its
    canceller gave ("the workload finished"), a watchdog's message or the spool's limit."""

    CANCELLED = "cancelled"
    ERROR = "error"
    TIMEOUT = "timeout"  #: no first hit in time
    MAX_CAPTURES = "limit: max captures"
    MAX_SECONDS = "limit: max seconds"


@dataclass(frozen=True, **SLOTS)
class TargetNews:
    """One thing that happened: what, and a line for the user."""

    happened: Happened
    message: str = ""


@dataclass(frozen=True, **SLOTS)
class Closed:
    """How a handle ended. ``restored``: code bytes a guard had to put back because the
    backend died while armed (0 when it never had to); ``restore_ms``: how fast;
    ``guard``: the guard's own report, for :class:`CaptureSummary`."""

    restored: int = 0
    restore_ms: float = 0.0
    guard: GuardReport | None = None


class ProbeHandle(Protocol):
    """One armed probe in one process."""

    armed: Armed
    #: Seconds the target was held stopped while attaching and arming.
    arming_stop_s: float

    def start(self) -> None:
        """Let the target run with the probe in place."""

    def frames(self) -> Sequence[Frame]:
        """Frames produced since the last call (captures and notices), oldest first."""

    def read_stats(self) -> EbpfStats | None:
        """The probe's counts when this process reads them itself (eBPF: its map, now and then, and once
        more after :meth:`disarm`); None when there is nothing new, or when they come as frames (gdb's helper)."""

    def resume(self) -> None:
        """Put a probe that paused itself (stop budget) back into the target's code."""

    def poll(self, timeout: float) -> TargetNews | None:
        """Wait up to ``timeout`` seconds for news from the target; None when there is none."""

    def disarm(self) -> None:
        """Take the probe out (its last frames, such as the stopped-time total, follow). Never raises."""

    def close(self) -> Closed:
        """Release the target and every resource. Safe to call more than once; frames
        not read yet stay available from :meth:`frames`."""


@runtime_checkable
class DetachesAnywhere(Protocol):
    """A handle whose probes can come out from any thread, and whose unread frames can be counted instead of
    read: a window takes them out at its deadline whatever its consumer is doing (eBPF)."""

    def detach(self) -> None:
        """Take the probes out of the target; safe from any thread, and twice."""

    def discard(self) -> int:
        """Drop the captures still unread, without reading them; returns how many pages that was."""


@runtime_checkable
class MetersStops(Protocol):
    """A handle that stops the target's threads and measures how each felt it (gdb)."""

    #: Set when the handle is disarmed (None before, or when nothing could be measured).
    stops: StopFigures | None


class ProbeBackend(Protocol):
    """A way to put probes in a process."""

    #: Short name for messages and ``doctor`` (``"gdb"``, ``"ebpf"``).
    name: str
    #: True when a hit stops the target (gdb's breakpoints); False when the probe runs beside it (eBPF).
    stops_target: bool

    def attach(self, pid: int, spec: ProbeSpec) -> ProbeHandle:
        """Attach to ``pid`` and arm ``spec``; the target stays stopped (or unprobed) until
        :meth:`ProbeHandle.start`. Raises UserError with one line when it cannot; a handle
        whose ``armed.symbol`` is None found none of the symbols and must still be closed."""
