"""A captured page pair summarised for people and machines (CLI records, tables, reports)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

from tdescope.app.engines.api import DecodedPage, PageDecoder
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.probe.entropy import shannon_entropy
from tdescope.app.events import PageCapture

__all__ = ["CaptureRecord", "describe_capture"]


@dataclass(frozen=True, slots=True)
class CaptureRecord:
    """What ``tdescope capture`` prints for one capture."""

    seq: int
    ts: float
    pgno: int
    symbol: str
    direction: str
    size: int
    before_entropy: float
    after_entropy: float
    page_type: str
    cells: int
    before_sha256: str
    after_sha256: str
    stop_us: float
    problems: tuple[str, ...] = ()

    def to_json(self) -> dict:
        out = asdict(self)
        out["problems"] = list(self.problems)
        return out

    def line(self) -> str:
        """One human line."""
        return (
            f"#{self.seq:<4} page {self.pgno:<6} {self.direction:<7} {self.size:>6} B  "
            f"entropy {self.before_entropy:4.2f} -> {self.after_entropy:4.2f}  "
            f"{self.page_type}, {self.cells} cells  stop {self.stop_us:.0f} us"
        )


def describe_capture(
    capture: PageCapture, decoder: PageDecoder | None, full: bool = True
) -> tuple[CaptureRecord, DecodedPage | None]:
    """Summarise ``capture``, decoding its plaintext side with ``decoder``.

    With ``full=False`` only the page type and cell count are read (through the
    decoder's optional ``summarize``), which keeps a capture storm cheap; the
    full decode happens when someone looks at the page.
    """
    # decrypt and read ("read" = a page as it came from disk) decode the output buffer
    plain = capture.before if capture.direction == "encrypt" else capture.after
    if not capture.after:  # an entry-only recipe (e.g. Oracle kcbchk_ctx): the one buffer there is
        plain = capture.before
    if not full and decoder is not None and plain and has_ability(decoder, Ability.SUMMARIZE_PAGES):
        page_type, cells = decoder.summarize(plain, capture.pgno)
        decoded = DecodedPage(page_type, cells=cells)
    else:
        decoded = decoder.decode(plain, capture.pgno) if decoder is not None and plain else None
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
        problems=decoded.problems if decoded else (),
    )
    return record, decoded
