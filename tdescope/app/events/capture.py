"""What a probe window sends: the pages it caught, and its state.

A recipe's and a capture's words (:class:`Direction`, :class:`PlaintextSide`, :class:`ContextKind`) are
``str``-valued Enums: session files and frames store the plain word and keep reading.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tdescope.app.events.base import Event, Word
from tdescope.app.slots import SLOTS, SLOTS_KW_ONLY

__all__ = ["Direction", "PlaintextSide", "ContextKind", "CaptureContext", "default_plaintext_side", "PageCapture",
           "WindowState", "CaptureWindowState"]


class Direction(Word):
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


class PlaintextSide(Word):
    """Which buffer of a capture may hold decrypted bytes: the one rule masking and labels follow."""

    BEFORE = "before"
    """The input at entry (encrypting; or an entry-only recipe that sits after the decryption)."""
    AFTER = "after"
    """The output at return (decrypting)."""
    BOTH = "both"
    """Either side may (reads and copies: plaintext whenever the data is not encrypted at rest)."""


class ContextKind(Word):
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
    direction : Direction
        What the probed call does (a plain word given or read is converted; an unknown one is a
        ValueError, and a file's event holding one is skipped like any that no longer fits).
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
    plaintext_side : PlaintextSide
        The recipe's. Files written before it existed say ``""``: such a capture gets
        :func:`default_plaintext_side` of its direction and whether it has an output, once, when built.
    context : int
        What the call belongs to, read by the probe (a relation's OID or file node,
        a cipher context's address); ``-1`` when the recipe reads none.
    context_kind : str
        A :class:`ContextKind` value saying what :attr:`context` is; empty without one.
    """

    seq: int
    symbol: str
    direction: Direction
    pgno: int
    before: bytes
    after: bytes
    stop_us: float = 0.0
    engine: str = ""
    plaintext_side: PlaintextSide = ""  # type: ignore[assignment]  # "": not said, resolved when built
    context: int = -1
    context_kind: str = ""

    def __post_init__(self) -> None:
        if type(self.direction) is not Direction:  # a word from a file or a frame
            object.__setattr__(self, "direction", Direction(self.direction))
        if type(self.plaintext_side) is not PlaintextSide:
            side = (PlaintextSide(self.plaintext_side) if self.plaintext_side
                    else default_plaintext_side(self.direction, entry_only=not self.after))
            object.__setattr__(self, "plaintext_side", side)

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
        return self.plaintext_side

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
        return dataclasses.replace(self, before=b"" if self.holds_plaintext("before") else self.before,
                                   after=b"" if self.holds_plaintext("after") else self.after)


class WindowState(Word):
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


@dataclass(frozen=True, **SLOTS_KW_ONLY)
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
