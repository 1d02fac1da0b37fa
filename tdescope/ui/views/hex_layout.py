"""Where a hex view puts each byte: the column math, the hit-testing and the row text, without Qt.

A row holds 16 bytes: an offset column, the hex bytes (``"xx "`` each, one extra space after the eighth)
and an ASCII column. :class:`HexLayout` turns a character width and a line height (which the widget
measures from its font) into pixel positions and back; the widget in :mod:`tdescope.ui.views.hexview` only
paints and handles events. Pixel coordinates are the viewport's: ``top_row`` is the first row on screen
(the vertical scroll bar counts rows) and ``hscroll`` the horizontal scroll in pixels.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

__all__ = ["BYTES_PER_ROW", "ByteStyle", "HexLayout", "ascii_text", "byte_styles", "describe_byte", "hex_text",
           "selected_hex", "style_runs"]

BYTES_PER_ROW = 16
_HEX = [f"{b:02x}" for b in range(256)]
_ASCII = [chr(b) if 0x20 <= b < 0x7F else "." for b in range(256)]
#: Character column of byte i inside the hex area: "xx " per byte plus one gap char after 8.
HEX_COL = tuple(3 * i + (1 if i >= 8 else 0) for i in range(BYTES_PER_ROW))
_HEX_CHARS = 3 * BYTES_PER_ROW  # 16 * "xx " minus the trailing space plus the gap
_ASCII_GAP = 2


class ByteStyle(IntEnum):
    """How one byte's text is drawn, in increasing precedence."""

    NORMAL = 0
    DIM = 1  # a zero byte: the structure of a plaintext page reads at a glance
    DIFF = 2
    DIFF_DIM = 3  # a zero byte that differs from the other side
    SELECTED = 4


@dataclass(frozen=True, slots=True, kw_only=True)
class HexLayout:
    """The geometry of a hex view for one font and one buffer length.

    Parameters
    ----------
    char_w
        Advance of one monospace character in pixels; fractional (7.22 px for DejaVu Sans Mono 9):
        rounding it would drift runs of text drawn as one string away from cells placed by column.
    line_h
        Height of a row in pixels.
    ascent
        Baseline of the text below a row's top, in pixels.
    length
        Bytes shown (the offset column widens past 64 KiB).
    """

    char_w: float = 1.0
    line_h: int = 1
    ascent: int = 0
    length: int = 0

    @property
    def header_h(self) -> int:
        """Height of the column header above the first row."""
        return self.line_h + 3

    @property
    def digits(self) -> int:
        """Hex digits of the offset column: at least 4, more for the last offset of a larger buffer."""
        return max(4, len(f"{max(0, self.length - 1):x}"))

    @property
    def hex_x0(self) -> float:
        """Left of the hex area, unscrolled."""
        return (self.digits + 2) * self.char_w

    @property
    def ascii_x0(self) -> float:
        """Left of the ASCII area, unscrolled."""
        return self.hex_x0 + (_HEX_CHARS + _ASCII_GAP) * self.char_w

    @property
    def content_w(self) -> int:
        """Width a row needs, in pixels."""
        return int(self.ascii_x0 + (BYTES_PER_ROW + 1) * self.char_w) + 1

    def row_count(self) -> int:
        """Rows needed for the data (the last one may be partial)."""
        return (self.length + BYTES_PER_ROW - 1) // BYTES_PER_ROW

    def visible_rows(self, viewport_h: int) -> int:
        """Whole rows that fit under the header in a viewport ``viewport_h`` pixels high (at least one)."""
        return max(1, (viewport_h - self.header_h) // self.line_h)

    def offset_x(self, hscroll: int = 0) -> float:
        """Left of the offset column."""
        return self.hex_x0 - (self.digits + 1) * self.char_w - hscroll

    def hex_x(self, col: int, hscroll: int = 0) -> float:
        """Left of the hex cell of column ``col``."""
        return self.hex_x0 + HEX_COL[col] * self.char_w - hscroll

    def ascii_x(self, col: int, hscroll: int = 0) -> float:
        """Left of the ASCII cell of column ``col``."""
        return self.ascii_x0 + col * self.char_w - hscroll

    def row_y(self, row: int, top_row: int = 0) -> int:
        """Top of ``row`` when ``top_row`` is the first row on screen."""
        return self.header_h + (row - top_row) * self.line_h

    def hex_cell(self, offset: int, top_row: int = 0, hscroll: int = 0) -> tuple[float, float, float, float]:
        """``(x, y, w, h)`` of the hex cell of ``offset`` (may lie off screen)."""
        row, col = divmod(offset, BYTES_PER_ROW)
        return (self.hex_x(col, hscroll), self.row_y(row, top_row), 2 * self.char_w, self.line_h)

    def ascii_cell(self, offset: int, top_row: int = 0, hscroll: int = 0) -> tuple[float, float, float, float]:
        """``(x, y, w, h)`` of the ASCII cell of ``offset``."""
        row, col = divmod(offset, BYTES_PER_ROW)
        return (self.ascii_x(col, hscroll), self.row_y(row, top_row), self.char_w, self.line_h)

    def span_boxes(self, row: int, start: int, end: int, top_row: int = 0,
                   hscroll: int = 0) -> list[tuple[float, float, float, float]]:
        """The hex and the ASCII box ``(x, y, w, h)`` of the part of ``[start, end)`` in ``row``; none when
        the span misses the row's bytes."""
        base = row * BYTES_PER_ROW
        c0 = max(start, base) - base
        c1 = min(end, base + BYTES_PER_ROW, self.length) - base - 1
        if c1 < c0:
            return []
        y = self.row_y(row, top_row)
        x0, x1 = self.hex_x(c0, hscroll) - self.char_w / 2, self.hex_x(c1, hscroll) + 2.5 * self.char_w
        return [(x0, y, x1 - x0, self.line_h), (self.ascii_x(c0, hscroll), y, (c1 - c0 + 1) * self.char_w, self.line_h)]

    def offset_at(self, x: float, y: float, top_row: int = 0, hscroll: int = 0, clamp: bool = False) -> int:
        """Offset of the byte under the viewport point ``(x, y)``, or -1.

        With ``clamp`` a point beside the columns (or above or below the rows) maps to the nearest byte, so a
        drag that leaves the text still extends the selection.
        """
        if not self.length:
            return -1
        y -= self.header_h
        if y < 0 and not clamp:
            return -1
        row = top_row + (int(y // self.line_h) if y >= 0 else -1)
        x += hscroll
        c = int((x - self.hex_x0) // self.char_w)
        a = int((x - self.ascii_x0) // self.char_w)
        if 0 <= a < BYTES_PER_ROW or (clamp and a >= 0):
            col = min(a, BYTES_PER_ROW - 1)
        elif 0 <= c < _HEX_CHARS or clamp:
            c = min(max(c, 0), _HEX_CHARS - 1)
            col = c // 3 if c < 24 else 7 if c == 24 else 8 + (c - 25) // 3
        else:
            return -1
        off = row * BYTES_PER_ROW + col
        if clamp:
            return min(max(off, 0), self.length - 1)
        return off if 0 <= row and off < self.length else -1

    def scroll_to_show(self, first_off: int, last_off: int, top_row: int, visible: int) -> int:
        """The first row to scroll to so that bytes ``first_off..last_off`` are on screen; ``top_row`` when
        they already are. One row of context stays above; a span taller than the view shows its start."""
        r0, r1 = first_off // BYTES_PER_ROW, last_off // BYTES_PER_ROW
        if r0 >= top_row and r1 < top_row + visible:
            return top_row
        if r0 < top_row or r1 - r0 + 1 >= visible:
            return max(0, r0 - 1)
        return r1 - visible + 2


def hex_text(chunk: bytes) -> str:
    """A row's hex area as one string: ``"xx "`` per byte, two spaces after the eighth (see ``HEX_COL``)."""
    return "".join(_HEX[b] + (" " if i != 7 else "  ") for i, b in enumerate(chunk))


def ascii_text(chunk: bytes) -> str:
    """A row's ASCII area: printable ASCII as itself, every other byte as ``.``."""
    return "".join(_ASCII[b] for b in chunk)


def byte_styles(chunk: bytes, base: int, selection: tuple[int, int], diff) -> list[ByteStyle]:
    """The style of each byte of ``chunk`` (which starts at offset ``base``): selected, else differing
    (``diff[i]`` true), dimmed when zero."""
    return [
        ByteStyle.SELECTED if selection[0] <= base + i < selection[1]
        else (ByteStyle.DIFF_DIM if b == 0 else ByteStyle.DIFF) if i < len(diff) and diff[i]
        else ByteStyle.DIM if b == 0 else ByteStyle.NORMAL
        for i, b in enumerate(chunk)
    ]


def style_runs(styles: list[ByteStyle]) -> list[tuple[int, int, ByteStyle]]:
    """``(first, last, style)`` for each run of equal styles: one drawText per run, usually two a row, not 32."""
    runs, i = [], 0
    while i < len(styles):
        j = i
        while j + 1 < len(styles) and styles[j + 1] == styles[i]:
            j += 1
        runs.append((i, j, styles[i]))
        i = j + 1
    return runs


def describe_byte(data: bytes, off: int, differs: bool) -> str:
    """Tooltip text for byte ``off``: offset (dec/hex), value and whether it differs from the other side."""
    b = data[off]
    lines = [f"offset {off} (0x{off:x})", f"value 0x{b:02x} = {b}" + (f" '{chr(b)}'" if _ASCII[b] != "." else "")]
    if differs:
        lines.append("differs from the other side")
    return "\n".join(lines)


def selected_hex(data: bytes, start: int, end: int) -> str:
    """Bytes ``[start, end)`` as space-separated hex (what Ctrl+C copies)."""
    return " ".join(_HEX[b] for b in data[start:end])
