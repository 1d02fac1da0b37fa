"""How a :class:`~tdescope.ui.views.hexview.HexView` frame is painted: the column header, the visible
rows (offsets, hex, ASCII) with the highlight, the selection and the diff on them, and the cursor box.

The view says what is on screen in a :class:`HexFrame`; nothing here keeps state or handles events
(those stay with the view: scrolling, font fitting, mouse and keyboard selection).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QColor, QPainter, QPalette

from tdescope.ui.views.hex_layout import (
    BYTES_PER_ROW,
    HEX_COL,
    ByteStyle,
    HexLayout,
    ascii_text,
    byte_styles,
    hex_text,
    style_runs,
)

__all__ = ["HexFrame", "diff_color", "paint_frame"]


def diff_color(palette: QPalette) -> QColor:
    """Text colour for differing bytes, readable on ``palette``.

    Red-ish in both themes: a darker red on light bases, a salmon on dark ones.
    """
    dark = palette.color(QPalette.ColorRole.Base).lightness() < 128
    return QColor("#ff7b72") if dark else QColor("#c0261a")


@dataclass(frozen=True, slots=True)
class HexFrame:
    """What one paint of a hex view shows.

    ``top``: the first row on screen; ``hscroll``: the horizontal scroll in pixels; ``rows``: the rows
    painted (the whole ones that fit, and the partial one under them); ``width``, ``height``: the viewport.
    Spans are ``[start, end)`` byte offsets.
    """

    layout: HexLayout
    data: bytes
    mask: np.ndarray | None
    highlight: tuple[int, int] | None
    selection: tuple[int, int]
    cursor: int
    focused: bool
    top: int
    hscroll: int
    rows: int
    width: int
    height: int


def _paint_header(p: QPainter, pal: QPalette, dim: QColor, frame: HexFrame) -> None:
    lay, hscroll = frame.layout, frame.hscroll
    p.fillRect(0, 0, frame.width, lay.header_h, pal.color(QPalette.ColorRole.AlternateBase))
    p.setPen(dim)
    y = lay.ascent + 1
    for col in range(BYTES_PER_ROW):
        p.drawText(QPointF(lay.hex_x(col, hscroll), y), f"{col:02x}")
    p.drawText(QPointF(lay.ascii_x(0, hscroll), y), "".join(f"{c:x}" for c in range(BYTES_PER_ROW)))
    p.setPen(pal.color(QPalette.ColorRole.Mid))
    p.drawLine(0, lay.header_h - 1, frame.width, lay.header_h - 1)


def paint_frame(p: QPainter, pal: QPalette, frame: HexFrame) -> None:
    """Paint ``frame`` with ``p`` (its font already the view's) in ``pal``'s colours."""
    text, dim = pal.color(QPalette.ColorRole.Text), pal.color(QPalette.ColorRole.PlaceholderText)
    # Diff is text colour only: a decrypted page differs almost everywhere, and a
    # background there would drown the highlight and the bytes that did not change.
    diff_fg = diff_color(pal)
    diff_dim = QColor(diff_fg)
    diff_dim.setAlpha(120)
    sel_bg, sel_fg = pal.color(QPalette.ColorRole.Highlight), pal.color(QPalette.ColorRole.HighlightedText)
    if not frame.focused:
        sel_bg.setAlpha(150)
    hl_bg = QColor(pal.color(QPalette.ColorRole.Highlight))
    hl_bg.setAlpha(60)
    pens = {ByteStyle.NORMAL: text, ByteStyle.DIM: dim, ByteStyle.DIFF: diff_fg, ByteStyle.DIFF_DIM: diff_dim,
            ByteStyle.SELECTED: sel_fg}
    lay, top, hscroll, sel = frame.layout, frame.top, frame.hscroll, frame.selection
    _paint_header(p, pal, dim, frame)
    first, last = top, min(lay.row_count(), top + frame.rows)
    p.setClipRect(0, lay.header_h, frame.width, frame.height)
    for row in range(first, last):
        base = row * BYTES_PER_ROW
        chunk = frame.data[base : base + BYTES_PER_ROW]
        baseline = lay.row_y(row, top) + lay.ascent
        diff = frame.mask[base : base + len(chunk)].tolist() if frame.mask is not None else []
        for span, color in ((frame.highlight, hl_bg), (sel, sel_bg)):
            for box in lay.span_boxes(row, *span, top, hscroll) if span else ():
                p.fillRect(QRectF(*box), color)
        p.setPen(dim)
        p.drawText(QPointF(lay.offset_x(hscroll), baseline), f"{base:0{lay.digits}x}")
        hex_row, asc_row = hex_text(chunk), ascii_text(chunk)
        for i, j, style in style_runs(byte_styles(chunk, base, sel, diff)):
            p.setPen(pens[style])
            p.drawText(QPointF(lay.hex_x(i, hscroll), baseline), hex_row[HEX_COL[i] : HEX_COL[j] + 2])
            p.drawText(QPointF(lay.ascii_x(i, hscroll), baseline), asc_row[i : j + 1])
    if frame.focused and first <= frame.cursor // BYTES_PER_ROW < last:
        p.setPen(text)
        p.drawRect(QRectF(*lay.hex_cell(frame.cursor, top, hscroll)).toAlignedRect().adjusted(-1, 0, 0, -1))
        p.drawRect(QRectF(*lay.ascii_cell(frame.cursor, top, hscroll)).toAlignedRect().adjusted(0, 0, 0, -1))
