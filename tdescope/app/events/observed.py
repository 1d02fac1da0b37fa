"""What the samplers see of the target: hotspot windows and waits."""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.events.base import Event
from tdescope.app.slots import SLOTS

__all__ = ["HotspotWindow", "HotspotLeaves", "WaitSample", "WaitFigure", "WaitFigures", "WaitSpan", "WaitSpans"]


@dataclass(frozen=True, **SLOTS)
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


@dataclass(frozen=True, **SLOTS)
class HotspotLeaves(Event):
    """Where inside each function the samples of one hotspot window landed.

    ``offsets`` maps a symbol to ``{offset inside the symbol: samples}``;
    ``function start + offset`` is the file address to heat in a disassembly.
    ``HotspotWindow`` carries folded stacks only, hence this companion event.
    """

    pid: int
    offsets: dict


@dataclass(frozen=True, **SLOTS)
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


@dataclass(frozen=True, **SLOTS)
class WaitFigure:
    """One (class, syscall) row of exact OS waits over an interval (nested in :class:`WaitFigures`).

    ``source`` is ``"ebpf"`` (every call timed in the kernel) or ``"proc"`` (from /proc samples:
    ``count`` is samples, ``total_us`` samples x period, no percentiles). Times are microseconds;
    ``lat`` counts calls per log2 nanosecond bucket; ``sizes`` is ``((bytes, calls), ...)`` for
    memory operations and I/O (mmap's length is Oracle's 'PGA memory operation' p1); ``flags`` is
    ``((MAP_*/MADV_* value, calls), ...)``.
    """

    source: str
    wait_class: str
    syscall: str
    count: int
    total_us: float
    p50_us: float | None = None
    p99_us: float | None = None
    max_us: float | None = None
    lat: tuple = ()
    sizes: tuple = ()
    flags: tuple = ()


@dataclass(frozen=True, **SLOTS)
class WaitFigures(Event):
    """Exact OS waits of ``pid`` in the ``interval_s`` before ``ts``: one :class:`WaitFigure` per
    (class, syscall). ``lost`` counts calls the kernel could not aggregate (its map full)."""

    pid: int
    interval_s: float
    figures: tuple = ()
    lost: int = 0


@dataclass(frozen=True, **SLOTS)
class WaitSpan:
    """One exactly timed wait of thread ``tid`` (nested in :class:`WaitSpans`): from ``start`` (epoch
    seconds) for ``duration_s``; ``size`` in bytes where one applies, else 0."""

    start: float
    duration_s: float
    tid: int
    wait_class: str
    syscall: str
    size: int = 0


@dataclass(frozen=True, **SLOTS)
class WaitSpans(Event):
    """A bounded sample of ``pid``'s exact waits (the long ones, at most a few hundred a second), for the
    timeline; the eBPF tracer sends one batch a second."""

    pid: int
    spans: tuple = ()
