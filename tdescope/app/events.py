"""Typed, immutable events that producers emit and the session fans out.

Every producer (probes, samplers, workload runners) runs off the GUI thread and
emits instances of these dataclasses. Timestamps are ``time.time()`` seconds.

Long because it is the session file's whole vocabulary (:data:`EVENT_TYPES`): every
stored kind is defined here, in one place, so a file is read by one closed map.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from enum import Enum

from tdescope.app.slots import SLOTS

__all__ = [
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
    "HotspotLeaves",
    "RoundTime",
    "PhaseRatio",
    "ABResult",
    "LessonCard",
    "EVENT_TYPES",
]


@dataclass(frozen=True, **SLOTS)
class Event:
    """Base of every event: when it happened (epoch seconds)."""

    ts: float


class Direction(str, Enum):
    """What the probed call does with the buffer it is given (a recipe's and a capture's ``direction``).

    ``str``-valued: session files store the plain value and keep reading.
    """

    DECRYPT = "decrypt"
    """Ciphertext in, plaintext out (``sqlcipher_page_cipher`` mode 0, ``pgp_cfb_decrypt``, ``kcbchk_ctx``)."""
    ENCRYPT = "encrypt"
    """Plaintext in, ciphertext out (``sqlcipher_page_cipher`` mode 1)."""
    READ = "read"
    """A page read from disk into a buffer (PostgreSQL ``mdread``): plaintext unless the disk is encrypted."""
    COPY = "copy"
    """A block copied between buffers (Oracle's 8 KB ``_intel_fast_memcpy``): the same bytes on both sides."""
    WAIT = "wait"
    """A wait began or ended (Oracle ``kskthbwt``/``kskthewt``); no bytes, the event# is the page number."""
    MARKER = "marker"
    """A hit on a code path (Oracle ``kcbz_encdec_tbsblk``); no bytes, only its time and number."""


class PlaintextSide(str, Enum):
    """Which buffer of a capture may hold decrypted bytes: the one rule masking and labels follow."""

    BEFORE = "before"
    """The input at entry (encrypting; or an entry-only recipe that sits after the decryption)."""
    AFTER = "after"
    """The output at return (decrypting)."""
    BOTH = "both"
    """Either side may (reads and copies: plaintext whenever the data is not encrypted at rest)."""


class ContextKind(str, Enum):
    """What a capture's :attr:`PageCapture.context` number is (a recipe's ``context_kind``)."""

    RELATION = "relation"
    """A relation's OID (PostgreSQL ``HeapTupleData.t_tableOid``)."""
    RELFILENODE = "relfilenode"
    """A relation's file node (PostgreSQL ``mdread``'s ``SMgrRelation``): ``pg_class.relfilenode``."""
    CIPHER_BLOCK = "cipher-block"
    """A stream cipher's block counter at entry (pgcrypto's ``PGP_CFB.block_no``): 0 on a message's first
    chunk, so the calls up to the next 0 are one message's chunks (:mod:`~tdescope.app.probe.joining`)."""


@dataclass(frozen=True, **SLOTS)
class CaptureContext:
    """What a capture's call belonged to: :attr:`kind` says what the number :attr:`value` is."""

    kind: ContextKind
    value: int


class WindowState(str, Enum):
    """What a :class:`CaptureWindowState` says the probe window is doing (``str``-valued, as stored)."""

    ARMED = "armed"
    """The probe is in the target and captures flow (also the live progress of an armed window)."""
    PAUSED = "paused"
    """Out of the target until its stop budget is paid back; it re-arms by itself."""
    DISARMED = "disarmed"
    """The window ended: a limit, a cancel, or the target's exit; the probe is out."""
    FAILED = "failed"
    """The window could not arm, or ended on an error; the probe is out."""

    @property
    def ended(self) -> bool:
        """True for the two last states: a window that said one of them says nothing more."""
        return self in (WindowState.DISARMED, WindowState.FAILED)

    def __str__(self) -> str:  # in text and f-strings the word itself, as before it was an Enum
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)


def default_plaintext_side(direction: str, entry_only: bool) -> PlaintextSide:
    """The plaintext side a recipe (or an old capture) gets when it does not say.

    Decrypting: the output, or the one buffer of an entry-only recipe. Encrypting:
    the input. Anything else (reads, copies, markers, unknown values): both, so
    nothing that might be plaintext is ever shown as ciphertext.
    """
    if direction == Direction.DECRYPT:
        return PlaintextSide.BEFORE if entry_only else PlaintextSide.AFTER
    if direction == Direction.ENCRYPT:
        return PlaintextSide.BEFORE
    return PlaintextSide.BOTH


@dataclass(frozen=True, **SLOTS)
class PageCapture(Event):
    """One page caught in the act: the bytes before and after the engine's cipher call.

    Which bytes are plaintext is decided by :attr:`side` alone; everything that
    masks or shows plaintext goes through :attr:`plaintext`, :attr:`ciphertext`
    and :meth:`holds_plaintext`.

    Attributes
    ----------
    seq : int
        Capture number within its window, from 1.
    symbol : str
        The function the probe sat on (``sqlcipher_page_cipher``).
    direction : str
        A :class:`Direction` value.
    pgno : int
        Page (or block) number the engine passed, ``-1`` when unknown.
    before : bytes
        The input buffer at entry.
    after : bytes
        The output buffer at return; empty for an entry-only recipe, when the
        function did not return inside the window, or when the plaintext was not
        recorded (see :attr:`SessionMeta.plaintext_withheld`).
    stop_us : float
        Time the target spent stopped for this capture (entry plus return), in µs.
    engine : str
        Engine name, so a decoder can be chosen later.
    plaintext_side : str
        A :class:`PlaintextSide` value from the recipe; empty in files written
        before it existed, which then follow :func:`default_plaintext_side`.
    context : int
        What the call belongs to, read by the probe (a relation's OID or file node,
        a cipher context's address); ``-1`` when the recipe reads none.
    context_kind : str
        A :class:`ContextKind` value saying what :attr:`context` is; empty without one.
    """

    seq: int
    symbol: str
    direction: str
    pgno: int
    before: bytes
    after: bytes
    stop_us: float = 0.0
    engine: str = ""
    plaintext_side: str = ""
    context: int = -1
    context_kind: str = ""

    @property
    def where(self) -> CaptureContext | None:
        """The call's context as a typed value; None when the probe read none (or of a kind unknown here)."""
        if self.context == -1 or not self.context_kind:
            return None
        try:
            return CaptureContext(ContextKind(self.context_kind), self.context)
        except ValueError:
            return None

    @property
    def side(self) -> PlaintextSide:
        """Which side may hold decrypted bytes."""
        if self.plaintext_side:
            return PlaintextSide(self.plaintext_side)
        return default_plaintext_side(self.direction, entry_only=not self.after)

    def holds_plaintext(self, side: str) -> bool:
        """True when buffer ``side`` (``"before"`` or ``"after"``) may hold decrypted bytes."""
        return self.side in (PlaintextSide.BOTH, PlaintextSide(side))

    @property
    def plaintext(self) -> bytes:
        """The decrypted bytes, the ones to decode (for reads and copies: the output, else the input)."""
        side = self.side
        if side == PlaintextSide.BOTH:
            return self.after or self.before
        return self.before if side == PlaintextSide.BEFORE else self.after

    @property
    def ciphertext(self) -> bytes:
        """The encrypted bytes; empty when no side is known to be ciphertext."""
        side = self.side
        if side == PlaintextSide.BOTH:
            return b""
        return self.after if side == PlaintextSide.BEFORE else self.before

    def without_plaintext(self) -> "PageCapture":
        """This capture with every buffer that may hold plaintext emptied (for unencrypted files)."""
        return PageCapture(
            self.ts, self.seq, self.symbol, self.direction, self.pgno,
            b"" if self.holds_plaintext("before") else self.before,
            b"" if self.holds_plaintext("after") else self.after,
            self.stop_us, self.engine, self.side.value, self.context, self.context_kind,
        )


@dataclass(frozen=True, **SLOTS)
class PhaseTiming:
    """Elapsed seconds of one workload phase on one side (``encrypted`` or ``plain``)."""

    side: str
    phase: str
    elapsed_s: float


@dataclass(frozen=True, **SLOTS)
class WorkloadProgress(Event):
    """A workload moved on: ``done`` of ``total`` steps on ``side``.

    ``run_fraction`` is the share of a whole A/B run done (rounds of both sides), when
    the workload runs inside one; None for a single run.
    """

    workload: str
    side: str
    done: int
    total: int
    message: str = ""
    run_fraction: float | None = None


@dataclass(frozen=True, **SLOTS)
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
    label : str
        The workload's label for people ("A/B DML (seed 000)"); "" in older files.
    capture_round : bool
        The run had a probe armed: its timings include the probe's cost, so it is shown as untimed and
        left out of figures. An older file says so as ``params["round"] == "capture"``.
    """

    workload: str
    params: dict
    timings: tuple[PhaseTiming, ...]
    counts: dict
    cancelled: bool = False
    table: tuple[tuple, ...] = ()
    label: str = ""
    capture_round: bool = False

    def __post_init__(self) -> None:
        if self.params.get("round") == "capture":  # an older file's way of saying it
            object.__setattr__(self, "capture_round", True)

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


@dataclass(frozen=True, **SLOTS)
class CaptureWindowState(Event):
    """The probe window changed state (a :class:`WindowState`; a plain string given or read is converted).

    ``stopped_s`` is the cumulative time the target spent stopped in probes (for
    eBPF, which stops nothing: the time its probes added to the target's calls).
    ``backend`` names what holds the probe (``"gdb"``, ``"ebpf"``); ``hits`` counts
    probe hits, captured or not, and ``lost`` the records an eBPF ring had no room for;
    ``unsent`` the captures (counted in ``captures``) the window's keep rate did not keep: the GUI's
    window and ``record`` keep the same few hundred a second (a storm arrives, and is recorded, as a sample).
    """

    state: WindowState
    captures: int = 0
    stopped_s: float = 0.0
    message: str = ""
    backend: str = ""
    hits: int = 0
    lost: int = 0
    unsent: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", WindowState(self.state))  # ValueError for a state nobody knows


@dataclass(frozen=True, **SLOTS)
class Marker(Event):
    """A labelled instant on the timeline (workload phase boundaries and the like)."""

    label: str
    kind: str = "phase"
    extra: dict = field(default_factory=dict)


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


@dataclass(frozen=True, **SLOTS)
class Problem(Event):
    """Something failed off the GUI thread: one line for the user, never a traceback.

    ``source`` names the producer (``capture``, ``workload``, ``hotspots``...).
    """

    source: str
    message: str


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
class RoundTime:
    """One side of one A/B round: elapsed seconds per phase (``"total"`` included) and the
    server's CPU seconds. Round 0 is the warm-up, never counted."""

    round: int
    side: str
    phases: dict
    server_cpu_s: float | None = None


@dataclass(frozen=True, **SLOTS)
class PhaseRatio:
    """Encrypted/plain over the timed rounds of one phase.

    ``ratios`` holds one paired ratio per round (that round's encrypted time over its
    plain time); ``ratio_median`` is their median and ``ratio_ci_low``/``ratio_ci_high``
    its 95 % interval (:data:`~tdescope.app.ab.stats.INTERVAL_METHOD`). The side medians
    are of elapsed seconds.
    """

    phase: str
    encrypted_median_s: float
    plain_median_s: float
    ratio_median: float
    ratio_ci_low: float
    ratio_ci_high: float
    ratios: tuple[float, ...] = ()


@dataclass(frozen=True, **SLOTS)
class ABResult(Event):
    """What an A/B run of interleaved rounds measured (:class:`~tdescope.app.ab.runner.ABRunner`).

    Attributes
    ----------
    workload, label : str
        Workload name and the label people read.
    params : dict
        Parameters every round ran with.
    rounds, warmup : int
        Timed rounds (ABBA... order) and untimed warm-up rounds asked for.
    times : tuple of RoundTime
        Every side of every round, warm-up included (``round == 0``).
    phases : tuple of PhaseRatio
        ``"total"`` first, then the workload's phases.
    interval : str
        How the intervals were computed.
    capture : str
        ``"off"``, or how captures were kept out of the timing (``"separate round"``).
    machine_busy, other_busy : float or None
        Share of all CPUs busy during the timed rounds, and the share used by processes
        other than the server and tdescope (a busy machine makes a ratio noisy).
    load1 : float or None
        The one-minute load average at the end.
    cancelled : bool
        True when the user cancelled; statistics cover the rounds that completed.
    """

    workload: str
    label: str
    params: dict
    rounds: int
    warmup: int
    times: tuple[RoundTime, ...]
    phases: tuple[PhaseRatio, ...]
    interval: str = ""
    capture: str = "off"
    machine_busy: float | None = None
    other_busy: float | None = None
    load1: float | None = None
    cancelled: bool = False

    def total(self) -> PhaseRatio | None:
        """The ``"total"`` phase, or None when no round completed."""
        return next((p for p in self.phases if p.phase == "total"), None)

    def completed_rounds(self) -> int:
        """Timed rounds that ran both sides."""
        done: dict[int, set] = {}
        for t in self.times:
            if t.round > 0:
                done.setdefault(t.round, set()).add(t.side)
        return sum(1 for sides in done.values() if {"encrypted", "plain"} <= sides)

    def warnings(self, noisy_over: float = 0.10, busy_over: float = 0.25) -> list[str]:
        """One line per reason not to trust the figure as it stands."""
        out = []
        total = self.total()
        if total is not None and total.ratio_median:
            half = (total.ratio_ci_high - total.ratio_ci_low) / 2 / total.ratio_median
            if half > noisy_over:
                out.append(f"noisy: ±{half * 100:.0f} %, rerun or raise rounds")
        if self.other_busy is not None and self.other_busy > busy_over:
            out.append(f"busy machine: other processes used {self.other_busy * 100:.0f} % of the CPUs")
        if self.cancelled and self.completed_rounds() == 0:
            out.append("cancelled before any timed round: no figure")
        elif self.completed_rounds() < 3:
            out.append(f"only {self.completed_rounds()} timed round(s): no interval worth the name")
        return out


@dataclass(frozen=True, **SLOTS)
class LessonCard(Event):
    """A lesson's result card: the published figure beside ours, and the verdict.

    Attributes
    ----------
    lesson, title, engine : str
        Lesson id and title, and the engine it ran on.
    question, source : str
        What the lesson asks, and where the published figure comes from (seed file, section).
    published : tuple of str
        The published figures, one line each.
    ours : tuple of str
        Our figures, one line each, in the published ones' shape.
    verdict : str
        ``same direction``, ``different``, ``inconclusive`` (ours within noise), ``no comparison``,
        ``cannot run``, ``cancelled`` or ``failed``.
    verdict_text : str
        The verdict with its numbers.
    evidence : tuple of str
        What backs ours: captures, hotspots, waits, counts, one line each.
    figures : dict
        Our figures as numbers, by name (``ratio_median``, ``first_scan_decrypts``...).
    note : str
        What this engine's run stands in for, when it is not the published experiment.
    params : dict
        The workload parameters it ran with.
    """

    lesson: str
    title: str
    engine: str
    question: str
    source: str
    published: tuple[str, ...]
    ours: tuple[str, ...]
    verdict: str
    verdict_text: str
    evidence: tuple[str, ...] = ()
    figures: dict = field(default_factory=dict)
    note: str = ""
    params: dict = field(default_factory=dict)

    def text(self) -> str:
        """The card as plain text (the CLI's output, a note's body)."""
        lines = [f"Lesson: {self.title} ({self.lesson}) on {self.engine}", f"Question: {self.question}",
                 f"Source: {self.source}", "Published:"]
        lines += [f"  {p}" for p in self.published]
        lines.append("Ours:")
        lines += [f"  {o}" for o in self.ours] or ["  (nothing measured)"]
        lines.append(f"Verdict: {self.verdict}: {self.verdict_text}")
        if self.evidence:
            lines.append("Evidence:")
            lines += [f"  {e}" for e in self.evidence]
        if self.note:
            lines.append(f"Note: {self.note}")
        return "\n".join(lines)


#: The session file's vocabulary, closed: stored kind (class name) -> class, for every
#: event and every dataclass nested in one (``PhaseTiming``). The session codec builds
#: objects from this map only; a name not in it is skipped when read.
EVENT_TYPES: Mapping[str, type] = MappingProxyType({
    cls.__name__: cls
    for cls in (PageCapture, WorkloadProgress, WorkloadResult, PhaseTiming, CaptureWindowState, Marker,
                HotspotWindow, WaitSample, WaitFigure, WaitFigures, WaitSpan, WaitSpans, Problem, HotspotLeaves,
                RoundTime, PhaseRatio, ABResult, LessonCard)
})
