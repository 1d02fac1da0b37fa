"""A captured page pair summarised for people and machines (CLI records, tables, reports)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from tdescope.app.engines.api import DecodedPage, PageDecoder
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.probe.entropy import shannon_entropy
from tdescope.app.events import Direction, PageCapture, PlaintextSide

__all__ = ["CaptureRecord", "describe_capture", "side_label"]


@dataclass(frozen=True, slots=True)
class CaptureRecord:
    """What ``tdescope capture`` prints for one capture."""

    seq: int
    ts: float
    pgno: int
    symbol: str
    direction: Direction
    size: int
    before_entropy: float
    after_entropy: float
    page_type: str
    cells: int
    before_sha256: str
    after_sha256: str
    stop_us: float
    plaintext_side: PlaintextSide = PlaintextSide.AFTER
    problems: tuple[str, ...] = ()
    space_id: int | None = None

    def to_json(self) -> dict:
        out = asdict(self)
        out["problems"] = list(self.problems)
        if self.space_id is None:
            del out["space_id"]  # only engines whose pages name their tablespace (InnoDB) have one
        return out

    @property
    def holds_user_rows(self) -> bool:
        """True for a page with rows of the user's tables: cells, and a page type a decoder did not
        qualify in parentheses ("INDEX (change buffer)", "INDEX (system)" are the engine's own)."""
        return self.cells > 0 and "(" not in self.page_type

    @property
    def is_page(self) -> bool:
        """True for a database page; False for a data buffer with no page number (a pgcrypto value)."""
        return self.pgno >= 0

    def line(self) -> str:
        """One human line: a page with its type and cells, or a data buffer with its length."""
        if not self.is_page:
            return (f"#{self.seq:<4} buffer      {self.direction:<7} {self.size:>6} B  "
                    f"entropy {self.before_entropy:4.2f} -> {self.after_entropy:4.2f}  "
                    f"plaintext {self.plaintext_side}  stop {self.stop_us:.0f} us")
        return (
            f"#{self.seq:<4} page {self.pgno:<6} {self.direction:<7} {self.size:>6} B  "
            f"entropy {self.before_entropy:4.2f} -> {self.after_entropy:4.2f}  "
            f"{self.page_type}, {self.cells} cells  plaintext {self.plaintext_side}  stop {self.stop_us:.0f} us"
        )


def side_label(capture: PageCapture, side: str) -> str:
    """What buffer ``side`` (``"before"``/``"after"``) of ``capture`` holds, for labels and file names.

    ``"plaintext"``, ``"ciphertext"``, ``"plaintext or ciphertext"`` (reads and
    copies) or ``"not captured"`` when the buffer is empty.
    """
    if not (capture.before if side == "before" else capture.after):
        return "not captured"
    if not capture.holds_plaintext(side):
        return "ciphertext"
    return "plaintext or ciphertext" if capture.side == PlaintextSide.BOTH else "plaintext"


def describe_capture(
    capture: PageCapture, decoder: PageDecoder | None, full: bool = True
) -> tuple[CaptureRecord, DecodedPage | None]:
    """Summarise ``capture``, decoding its plaintext side with ``decoder``.

    With ``full=False`` only the page type and cell count are read (through the
    decoder's optional ``summarize``), which keeps a capture storm cheap; the
    full decode happens when someone looks at the page.
    """
    plain = capture.plaintext
    if not full and decoder is not None and plain and has_ability(decoder, Ability.SUMMARIZE_PAGES):
        page_type, cells = decoder.summarize(plain, capture.pgno)
        decoded = DecodedPage(page_type, cells=cells)
    else:
        decoded = decoder.decode(plain, capture.pgno, capture.where) if decoder is not None and plain else None
    record = CaptureRecord(
        seq=capture.seq,
        ts=capture.ts,
        pgno=capture.pgno,
        symbol=capture.symbol,
        direction=capture.direction,
        size=len(capture.before),
        before_entropy=round(shannon_entropy(capture.before), 4),
        after_entropy=round(shannon_entropy(capture.after), 4),
        page_type=decoded.page_type if decoded else "unknown",
        cells=decoded.cells if decoded else 0,
        before_sha256=hashlib.sha256(capture.before).hexdigest(),
        after_sha256=hashlib.sha256(capture.after).hexdigest(),
        stop_us=round(capture.stop_us, 1),
        plaintext_side=capture.side,
        problems=decoded.problems if decoded else (),
        space_id=decoded.space_id if decoded else None,
    )
    return record, decoded
