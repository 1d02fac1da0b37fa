"""Typed, immutable events that producers emit and the session fans out.

Every producer (probes, samplers, workload runners) runs off the GUI thread and
emits instances of these dataclasses. Timestamps are ``time.time()`` seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = [
    "Event",
    "PageCapture",
    "WorkloadProgress",
    "WorkloadResult",
    "PhaseTiming",
    "CaptureWindowState",
    "Marker",
    "HotspotWindow",
    "WaitSample",
    "Problem",
    "HotspotLeaves",
    "EVENT_TYPES",
]


@dataclass(frozen=True, slots=True)
class Event:
    """Base of every event: when it happened (epoch seconds)."""

    ts: float


@dataclass(frozen=True, slots=True)
class PageCapture(Event):
    """One page caught in the act: the bytes before and after the engine's cipher call.

    Attributes
    ----------
    seq : int
        Capture number within its window, from 1.
    symbol : str
        The function the probe sat on (``sqlcipher_page_cipher``).
    direction : str
        ``"decrypt"`` or ``"encrypt"``.
    pgno : int
        Page (or block) number the engine passed, ``-1`` when unknown.
    before : bytes
        The input buffer at entry (ciphertext when decrypting).
    after : bytes
        The output buffer at return (plaintext when decrypting); empty when the
        function did not return inside the window.
    stop_us : float
        Time the target spent stopped for this capture (entry plus return), in µs.
    engine : str
        Engine name, so a decoder can be chosen later.
    """

    seq: int
    symbol: str
    direction: str
    pgno: int
    before: bytes
    after: bytes
    stop_us: float = 0.0
    engine: str = ""


@dataclass(frozen=True, slots=True)
class PhaseTiming:
    """Elapsed seconds of one workload phase on one side (``encrypted`` or ``plain``)."""

    side: str
    phase: str
    elapsed_s: float


@dataclass(frozen=True, slots=True)
class WorkloadProgress(Event):
    """A workload moved on: ``done`` of ``total`` steps on ``side``."""

    workload: str
    side: str
    done: int
    total: int
    message: str = ""


@dataclass(frozen=True, slots=True)
class WorkloadResult(Event):
    """What a workload measured.

    Attributes
    ----------
    workload : str
        Workload name.
    params : dict
        The parameters it ran with (never secrets).
    timings : tuple of PhaseTiming
        Elapsed per side and phase; phase ``"total"`` holds the side's total.
    counts : dict
        Row counts per side, e.g. ``{"encrypted": {"Insert": 2000, ...}}``.
    cancelled : bool
        True when the user cancelled; timings cover what ran.
    table : tuple of tuple
        A ready-to-show table (header row first) for results that are not
        encrypted/plain pairs, such as the cold-vs-warm 2x2.
    """

    workload: str
    params: dict
    timings: tuple[PhaseTiming, ...]
    counts: dict
    cancelled: bool = False
    table: tuple[tuple, ...] = ()

    def total(self, side: str) -> float | None:
        """Total elapsed seconds of ``side``, or None when it did not run."""
        for t in self.timings:
            if t.side == side and t.phase == "total":
                return t.elapsed_s
        return None

    def ratio(self) -> float | None:
        """Encrypted total divided by plain total, or None."""
        enc, plain = self.total("encrypted"), self.total("plain")
        if enc is None or not plain:
            return None
        return enc / plain


@dataclass(frozen=True, slots=True)
class CaptureWindowState(Event):
    """The probe window changed state: ``armed``, ``disarmed`` or ``failed``.

    ``stopped_s`` is the cumulative time the target spent stopped in probes.
    """

    state: str
    captures: int = 0
    stopped_s: float = 0.0
    message: str = ""


@dataclass(frozen=True, slots=True)
class Marker(Event):
    """A labelled instant on the timeline (workload phase boundaries and the like)."""

    label: str
    kind: str = "phase"
    extra: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HotspotWindow(Event):
    """One perf window on the target: folded stacks and their sample counts.

    ``ts`` is the window end; ``start`` its beginning. ``stacks`` maps a folded
    stack (outermost first, ``;``-separated ``symbol`` entries) to its sample
    count; ``dsos`` maps each symbol to the DSO it lives in.
    """

    start: float
    pid: int
    stacks: dict
    dsos: dict
    event: str = "cpu-clock"
    frequency: int = 99


@dataclass(frozen=True, slots=True)
class WaitSample(Event):
    """What one thread was doing at ``ts``.

    ``source`` is ``"os"`` for the /proc sampler or the engine name for engine
    waits; ``wait_class`` one of CPU, File I/O, Sync, Memory operation, Lock,
    Network, Idle (OS) or the engine's own class; ``event`` the syscall or the
    engine's event name.
    """

    pid: int
    tid: int
    source: str
    wait_class: str
    event: str
    detail: str = ""


@dataclass(frozen=True, slots=True)
class Problem(Event):
    """Something failed off the GUI thread: one line for the user, never a traceback.

    ``source`` names the producer (``capture``, ``workload``, ``hotspots``...).
    """

    source: str
    message: str


@dataclass(frozen=True, slots=True)
class HotspotLeaves(Event):
    """Where inside each function the samples of one hotspot window landed.

    ``offsets`` maps a symbol to ``{offset inside the symbol: samples}``;
    ``function start + offset`` is the file address to heat in a disassembly.
    ``HotspotWindow`` carries folded stacks only, hence this companion event.
    """

    pid: int
    offsets: dict


#: The session file's vocabulary, closed: stored kind (class name) -> class, for every
#: event and every dataclass nested in one (``PhaseTiming``). The session codec builds
#: objects from this map only; a name not in it is skipped when read.
EVENT_TYPES: Mapping[str, type] = MappingProxyType({
    cls.__name__: cls
    for cls in (PageCapture, WorkloadProgress, WorkloadResult, PhaseTiming, CaptureWindowState, Marker,
                HotspotWindow, WaitSample, Problem, HotspotLeaves)
})
