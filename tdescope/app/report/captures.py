"""The captures a report shows, and how: chosen for a reader, each as a :class:`CaptureSection`.

:func:`selected_captures` picks those the notes and lesson cards point to, then the first of each
kind of page (direction and decoded page type), each with why it is shown; :func:`capture_section`
turns one into hex excerpts, entropies, the decoded structure and rows, with every buffer that may
hold plaintext masked unless the report includes plaintext (:meth:`PageCapture.holds_plaintext`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

from tdescope.app.engines.api import DecodedPage, PageDecoder
from tdescope.app.events import LessonCard, PageCapture
from tdescope.app.probe.capture_record import side_label
from tdescope.app.probe.entropy import MIN_JUDGED, Randomness, chunk_entropy, shannon_entropy, verdict
from tdescope.app.report.plots import entropy_strip
from tdescope.app.session.notes import Note, NoteKind
from tdescope.app.session.reader import SessionReader

__all__ = ["MASK", "CaptureSection", "capture_section", "selected_captures"]

#: What a redacted byte looks like in hex excerpts.
MASK = "··"
_EXCERPT_ROWS = 8


@dataclass(frozen=True, slots=True)
class CaptureSection:
    """One capture as the report shows it."""

    title: str
    ts: float
    before_label: str
    after_label: str
    before_hex: tuple[str, ...]
    after_hex: tuple[str, ...]
    before_entropy: float
    after_entropy: float
    before_verdict: Randomness
    after_verdict: Randomness
    page_type: str
    cells: int
    structure: tuple[tuple[int, str, str, str], ...]  # depth, name, span, value
    records: tuple[tuple[str, ...], ...]  # first decoded rows; empty when redacted
    entropy_svg: str
    redacted: bool
    before_masked: bool = False
    after_masked: bool = False
    notes: tuple[Note, ...] = ()
    why: str = ""  # why it is shown: a note points to it, a lesson card cites it, the first of its kind

    @property
    def entropy_uri(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.entropy_svg.encode()).decode()



def _hex_rows(data: bytes, start: int, rows: int, masked: bool) -> tuple[str, ...]:
    out = []
    for off in range(start - start % 16, min(len(data), start - start % 16 + rows * 16), 16):
        chunk = data[off:off + 16]
        if masked:
            hexpart, text = " ".join([MASK] * len(chunk)), "·" * len(chunk)
        else:
            hexpart = " ".join(f"{b:02x}" for b in chunk)
            text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{off:06x}  {hexpart:<47}  {text}")
    return tuple(out)


def _structure(decoded: DecodedPage | None, masked: bool, limit: int = 24) -> tuple[tuple[int, str, str, str], ...]:
    if decoded is None:
        return ()
    rows: list[tuple[int, str, str, str]] = []
    for top in decoded.fields:
        rows.append((0, top.name, f"{top.start}–{top.end - 1}", "(redacted)" if masked and top.value else top.value))
        kids = top.children
        for c in kids[:4]:  # a page has hundreds of cells: the first few show the shape
            rows.append((1, c.name, f"{c.start}–{c.end - 1}", "(redacted)" if masked and c.value else c.value))
        if len(kids) > 4:
            rows.append((1, f"… {len(kids) - 4} more", f"{kids[4].start}–{kids[-1].end - 1}", ""))
        if len(rows) >= limit:
            break
    return tuple(rows)


def _cell(value) -> str:
    text = value.hex() if isinstance(value, (bytes, bytearray)) else str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def capture_section(cap: PageCapture, decoder: PageDecoder | None, include_plaintext: bool,
                     notes: list[Note], why: str = "") -> CaptureSection:
    mask_before = cap.holds_plaintext("before") and not include_plaintext
    mask_after = cap.holds_plaintext("after") and not include_plaintext
    plain = cap.plaintext
    decoded = decoder.decode(plain, cap.pgno, cap.where) if decoder is not None and plain else None
    start = min((n.target.start for n in notes if n.target.kind is NoteKind.BYTES and n.target.start is not None), default=0)
    label = (f"{side_label(cap, 'before')} (input)", f"{side_label(cap, 'after')} (output)")
    return CaptureSection(
        title=f"Capture #{cap.seq}: " + (f"page {cap.pgno}, " if cap.pgno >= 0 else "") + f"{cap.direction} in {cap.symbol}",
        ts=cap.ts,
        before_label=label[0], after_label=label[1],
        before_hex=_hex_rows(cap.before, start, _EXCERPT_ROWS, mask_before),
        after_hex=_hex_rows(cap.after, start, _EXCERPT_ROWS, mask_after),
        before_entropy=shannon_entropy(cap.before), after_entropy=shannon_entropy(cap.after),
        before_verdict=verdict(cap.before), after_verdict=verdict(cap.after),
        page_type=decoded.page_type if decoded else "unknown", cells=decoded.cells if decoded else 0,
        structure=_structure(decoded, masked=not include_plaintext),
        records=() if not include_plaintext or decoded is None else tuple(
            tuple(_cell(v) for v in row) for row in decoded.records[:8]),
        entropy_svg=entropy_strip(chunk_entropy(cap.before), chunk_entropy(cap.after)),
        redacted=not include_plaintext,
        before_masked=mask_before, after_masked=mask_after,
        notes=tuple(notes), why=why,
    )


def _full(reader: SessionReader, c: PageCapture) -> PageCapture:
    return next(iter(reader.events(kinds=[PageCapture], start=c.ts, end=c.ts + 1e-6, limit=1)), None) or c


def selected_captures(reader: SessionReader, notes: list[Note], limit: int, decoder: PageDecoder | None = None,
                       cards: tuple[LessonCard, ...] = (), scan: int = 3000) -> list[tuple[PageCapture, str]]:
    """The captures a reader is shown, each with why: those notes point at, those lesson cards cite
    (``figures["seq"]``: the latest capture of that number before the card), then the first capture of
    each kind of page not shown yet (direction and decoded page type, over the first ``scan``
    captures), up to ``limit`` more; in time order."""
    listing = list(reader.events(kinds=[PageCapture], with_bytes=False))
    why: dict[float, str] = {}
    noted = {round(n.target.ts, 6) for n in notes if n.target.kind in (NoteKind.CAPTURE, NoteKind.BYTES) and n.target.ts}
    for c in listing:
        if round(c.ts, 6) in noted:
            why[c.ts] = "a note points to it"
    for card in cards:
        seq = card.figures.get("seq")
        cited = [c for c in listing if c.seq == seq and c.ts <= card.ts] if isinstance(seq, int) else []
        if cited:
            why.setdefault(cited[-1].ts, f"the lesson card “{card.title}” cites it")
    kinds: set[tuple[str, str, bool]] = set()
    firsts: list[tuple[PageCapture, tuple[str, str, bool]]] = []  # the first capture of each kind, in time order
    short: list[PageCapture] = []  # too short to judge (pgcrypto's 1-byte packet headers): shown only alone
    for c in reader.events(kinds=[PageCapture], limit=scan):
        if c.ts not in why and max(len(c.before), len(c.after)) < MIN_JUDGED:
            short.append(c)
            continue
        plain = c.plaintext
        decoded = decoder.decode(plain, c.pgno, c.where) if decoder is not None and plain else None
        kind = (c.direction, decoded.page_type if decoded else "unknown", bool(decoded and decoded.records))
        if c.ts in why:
            kinds.add(kind)
        elif kind not in kinds:
            kinds.add(kind)
            firsts.append((c, kind))
    # pages whose rows decode first (they show what the window shows), then the other kinds, up to limit
    for c, (direction, page_type, rows) in sorted(firsts, key=lambda f: not f[1][2])[:limit]:
        what = f"{page_type} page with decoded rows" if rows else f"{page_type} page"
        why[c.ts] = f"the first {what} ({direction}) of the session"
    if not why:  # nothing long enough to judge was captured: the first short one, saying so
        for c in short[:min(1, limit)]:
            why[c.ts] = f"a short buffer ({max(len(c.before), len(c.after))} B): nothing longer was captured"
    chosen = sorted((c for c in listing if c.ts in why), key=lambda c: c.ts)
    return [(_full(reader, c), why[c.ts]) for c in chosen]
