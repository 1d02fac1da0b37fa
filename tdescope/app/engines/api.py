"""The engine contract: what every engine plugin provides.

An engine plugin exposes one object satisfying :class:`Engine`, registered under
the entry-point group ``tdescope.engines``. :func:`tdescope.app.engines.registry.
discover_engines` checks each against this contract when it loads and reports a
broken one instead of failing.

Probe recipes, inventories and decoded pages are plain data so that the same
capture machinery, views and reports serve every engine.

Long because it is the whole contract a plugin implements, read in one place.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from tdescope.app.engines.argref import ArgRef, Constant, DebugArg, Deref, Read, Register, StackSlot
from tdescope.app.events import CaptureContext, Direction, Event, PlaintextSide, WorkloadProgress, default_plaintext_side
from tdescope.app.slots import SLOTS, SLOTS_KW_ONLY

__all__ = [
    "ArgRef",
    "ConnectParams",
    "Constant",
    "DebugArg",
    "Deref",
    "DecodedField",
    "DecodedPage",
    "Engine",
    "EngineSession",
    "Inventory",
    "PageDecoder",
    "ProbeRecipe",
    "Read",
    "Register",
    "StackSlot",
    "TargetChoice",
    "WaitSource",
    "Workload",
    "WorkloadControl",
    "wanted_sides",
]

#: x86-64 SysV argument registers, in order.
SYSV_ARG_REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9")


@dataclass(frozen=True, **SLOTS)
class ProbeRecipe:
    """How to catch a buffer before and after an engine's cipher call. Data, not code.

    Attributes
    ----------
    key : str
        Stable identifier, e.g. ``"sqlcipher.page_decrypt"``.
    label : str
        What the user sees in menus.
    symbols : tuple of str
        The function to break on, with fallbacks tried in order.
    before : ArgRef
        Address of the input buffer at entry.
    after : ArgRef or None
        Address of the output buffer, read when the function returns. None when
        the recipe only captures at entry.
    length : ArgRef
        Number of bytes to copy on each side.
    pgno : ArgRef or None
        Page or block number, when the function receives one.
    context, context_kind : ArgRef or None, str
        What the call belongs to, as a number each capture carries, and what it is (a
        :class:`~tdescope.app.events.ContextKind` value): a relation's OID or file node,
        a cipher context's address (the chunks of one message share it).
    condition : tuple of (ArgRef, int) or None
        Fire only when this argument equals the value (e.g. mode == decrypt).
    direction : Direction
        What the probed call does (a word given is converted; an unknown one is a ValueError).
    library : str or None
        Shared library that holds the symbol, for pending breakpoints.
    plaintext_side : PlaintextSide or None
        Which buffer may hold decrypted bytes (a word given is converted). None (or ``""``): :attr:`side`
        is :func:`~tdescope.app.events.default_plaintext_side` of the direction and being entry-only.
    requires : str
        What the database must have for the probed function to run at all (an extension
        such as ``pgcrypto``, or encrypted tablespaces); checked through the session's
        ``require_extension`` before anything is armed. Empty: nothing.
    """

    key: str
    label: str
    symbols: tuple[str, ...]
    before: ArgRef
    length: ArgRef
    after: ArgRef | None = None
    pgno: ArgRef | None = None
    condition: tuple[ArgRef, int] | None = None
    direction: Direction = Direction.DECRYPT
    library: str | None = None
    max_length: int = 65536
    plaintext_side: PlaintextSide | None = None
    requires: str = ""
    context: ArgRef | None = None
    context_kind: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "direction", Direction(self.direction))
        object.__setattr__(self, "plaintext_side", PlaintextSide(self.plaintext_side) if self.plaintext_side else None)

    @property
    def side(self) -> PlaintextSide:
        """Which buffer of this recipe's captures may hold decrypted bytes."""
        if self.plaintext_side is not None:
            return self.plaintext_side
        return default_plaintext_side(self.direction, entry_only=self.after is None)


@dataclass(frozen=True, **SLOTS)
class DecodedField:
    """One decoded field of a page, with the byte span it came from.

    ``start``/``end`` are offsets into the page (end exclusive). Groups such as
    "cell 3" have children and span them all.
    """

    name: str
    start: int
    end: int
    value: str = ""
    children: tuple["DecodedField", ...] = ()

    def walk(self):
        """Yield this field and every descendant, depth first."""
        yield self
        for c in self.children:
            yield from c.walk()


@dataclass(frozen=True, **SLOTS)
class DecodedPage:
    """A page decoded into structure.

    Attributes
    ----------
    page_type : str
        e.g. ``"table leaf"``, ``"index interior"``, ``"encrypted"``, ``"unknown"``.
    fields : tuple of DecodedField
        Top-level fields in page order.
    cells : int
        Number of cells (rows or index entries) on the page, 0 when unknown.
    records : tuple of tuple
        Decoded row values, when the page holds table rows.
    problems : tuple of str
        What did not decode and why; empty for a clean page.
    space_id : int or None
        The tablespace the page belongs to, when the page says so (InnoDB's FIL header).
    """

    page_type: str
    fields: tuple[DecodedField, ...] = ()
    cells: int = 0
    records: tuple[tuple, ...] = ()
    problems: tuple[str, ...] = ()
    space_id: int | None = None

    def field_at(self, offset: int) -> DecodedField | None:
        """The innermost field whose span holds ``offset``, or None."""
        best = None
        for top in self.fields:
            for f in top.walk():
                if f.start <= offset < f.end and (best is None or f.end - f.start <= best.end - best.start):
                    best = f
        return best


class PageDecoder(Protocol):
    """Turns raw page bytes into structure."""

    def decode(self, data: bytes, pgno: int = -1, context: CaptureContext | None = None) -> DecodedPage:
        """Decode ``data`` (one page; ``context``: the capture's ``where``, what its call belonged to);
        never raises on bad bytes, reports problems instead."""
        ...


@dataclass(frozen=True, **SLOTS)
class Inventory:
    """What is encrypted, with which cipher, and the key state: rows of (section, name, value)."""

    engine: str
    rows: tuple[tuple[str, str, str], ...]

    def get(self, name: str, default: str = "") -> str:
        """The value of the first row called ``name``."""
        for _, n, v in self.rows:
            if n == name:
                return v
        return default


@dataclass(frozen=True, **SLOTS_KW_ONLY)
class ConnectParams:
    """How to reach a database, and what every engine reads the same way. ``password`` is used once and
    never stored. ``lab``: start the engine's own lab (a private server or worker) instead. ``prompt``:
    ``prompt(where) -> password`` when the server wants one (the window's dialog; None: the terminal's, or
    none). ``pid``: probe this process instead of the session's own (``--target-pid``). ``allow_critical``:
    a critical process (postmaster, background workers) may be the target. ``options``: the engine's own
    settings (``host``, ``port``, ``page_size``…); the four above are refused there (issue #25)."""

    dsn: str = ""
    lab: bool = False
    prompt: Callable[[str], str | None] | None = None
    pid: int | None = None
    allow_critical: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    password: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        typed = sorted(set(self.options) & {"lab", "prompt", "pid", "allow_critical"})
        if typed:
            raise TypeError(f"ConnectParams.options[{typed[0]!r}]: say it as ConnectParams({typed[0]}=...)")


class WorkloadControl:
    """Cooperative cancel flag and progress sink handed to a running workload.

    Workloads check :attr:`cancelled` between steps and call :meth:`emit`
    with events. Thread-safe.
    """

    def __init__(self, sink: Callable[[Event], None] | None = None) -> None:
        self._cancel = threading.Event()
        self._sink = sink

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Ask the workload to stop at its next safe point."""
        self._cancel.set()

    def emit(self, event: Event) -> None:
        """Pass ``event`` to the sink, if any."""
        if self._sink is not None:
            self._sink(event)

    def progress(self, workload: str, side: str, done: int, total: int, message: str = "") -> None:
        """Emit a :class:`~tdescope.app.events.WorkloadProgress` stamped now."""
        self.emit(WorkloadProgress(time.time(), workload, side, done, total, message))



@dataclass(frozen=True, **SLOTS)
class Workload:
    """A runnable experiment.

    ``params`` holds defaults (name -> int/float/str); ``run(params, control)``
    blocks until done or cancelled and returns a :class:`WorkloadResult`.
    """

    name: str
    label: str
    description: str
    params: Mapping[str, Any]
    run: Callable[[Mapping[str, Any], WorkloadControl], Any]
    sides: tuple[str, ...] = ()
    """The sides it compares (``("encrypted", "plain")``) when it is an A/B workload: then
    ``params["sides"]`` (comma-separated, see :func:`wanted_sides`) chooses which run, in
    that order, so the A/B runner can time each side of each round on its own."""
    creates: tuple[str, ...] = ()
    """What it creates on a server someone else owns ("table tdescope_ab_plain", "database
    tdescope_pgbench"), said before it runs; empty for a lab, which is tdescope's own."""
    cleanup: Callable[[], None] | None = None
    """Drops what :attr:`creates` names (``--cleanup``, or the window's offer after a run)."""
    clients: Callable[[list["TargetChoice"]], int | None] | None = None
    """When the work happens on other connections than tdescope's (pgbench's clients): picks, among
    the session's targets, the one to watch while it runs (None while none is busy yet)."""


def wanted_sides(params: Mapping[str, Any], default: tuple[str, ...] = ("encrypted", "plain")) -> tuple[str, ...]:
    """The sides ``params["sides"]`` asks for, in its order (``"plain,encrypted"``); ``default`` when absent.

    Raises
    ------
    ValueError
        When it names a side outside ``default``.
    """
    raw = params.get("sides")
    if not raw:
        return tuple(default)
    chosen = tuple(s.strip() for s in (raw.split(",") if isinstance(raw, str) else raw) if s.strip())
    unknown = [s for s in chosen if s not in default]
    if unknown or not chosen:
        raise ValueError(f"unknown side(s) {', '.join(unknown) or '(none)'}: choose from {', '.join(default)}")
    return chosen


class WaitSource(Protocol):
    """The engine's own wait events for the target (pg_stat_activity, V$SESSION...)."""

    def sample(self) -> list[Event]:
        """Take one sample (on a database, one statement per call); cheap enough to call at 10-20 Hz."""
        ...

    def describe(self) -> str:
        """What each :meth:`sample` reads, for the window and the CLI ("pg_stat_activity, the row of pid
        4242"); the caller says the rate it polls at."""
        ...


@dataclass(frozen=True, **SLOTS)
class TargetChoice:
    """A process the user may pick as the probe target (a backend, a server process)."""

    pid: int
    kind: str
    user: str = ""
    application: str = ""
    state: str = ""
    activity: str = ""


@runtime_checkable
class EngineSession(Protocol):
    """A live connection to one database, and the process that serves it.

    Optional abilities (another target to choose, SQL to run, extensions to require) are
    Protocols in :mod:`tdescope.app.engines.capabilities`, declared by the engine.
    """

    own_target: bool
    """True when the target is a process this session started (a lab's worker or server): nobody else's
    work runs in it, so capture windows get the lab's stop budget and recordings keep plaintext. A fact of
    the session, not of the engine (MariaDB has a lab and production servers); checked when one opens."""

    def server_pid(self) -> int:
        """The pid of the process serving this connection (the probe target)."""
        ...

    def inventory(self) -> Inventory:
        """What is encrypted, with which cipher and key state."""
        ...

    def workloads(self) -> list[Workload]:
        """Experiments this session can run, with progress and cancel."""
        ...

    def wait_source(self) -> WaitSource | None:
        """The engine's own wait events, or None when it has none."""
        ...

    def close(self) -> None:
        """Release the connection (and any process the session started)."""
        ...


@runtime_checkable
class Engine(Protocol):
    """An engine plugin: registered under the ``tdescope.engines`` entry point group."""

    name: str
    """Short name: ``"sqlcipher"``, ``"postgres"``, ``"oracle"``."""

    label: str
    """Display name."""

    abilities: frozenset
    """The optional abilities of the plugin (its own, its sessions' and its decoder's): a
    frozenset of :class:`tdescope.app.engines.capabilities.Ability`, empty when it has none.
    Checked when the plugin loads (sessions: when one opens); ``tdescope doctor`` lists them."""

    def connect(self, params: ConnectParams) -> EngineSession:
        """Open a session; raise ``tdescope.app.errors.UserError`` with one clear line on failure."""
        ...

    def probe_recipes(self) -> list[ProbeRecipe]:
        """How to catch decryption (and encryption) in this engine's processes."""
        ...

    def page_decoder(self) -> PageDecoder:
        """Bytes -> structure tree with field spans."""
        ...

    def glossary(self) -> Mapping[str, str]:
        """Function name -> what it does, for hotspots and probes."""
        ...
