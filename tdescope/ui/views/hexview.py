"""A custom-painted hex view for one captured buffer.

Only the visible rows are painted, so a 64 KB buffer costs the same per frame as
a 4 KB page: no item per byte, no layout per byte. Where each byte goes (the column
math, hit-testing, the row text) is :class:`~tdescope.ui.views.hex_layout.HexLayout`, which
knows no Qt; how a frame is painted is :mod:`~tdescope.ui.views.hex_paint`. This widget keeps the
data, cursor, selection and scroll state, measures its font and handles events.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, QPoint, QRect, QRectF, Qt, Signal
from PySide6.QtGui import (
    QFont,
    QFontDatabase,
    QFontMetricsF,
    QGuiApplication,
    QKeySequence,
    QPainter,
    QPalette,
)
from PySide6.QtWidgets import QAbstractScrollArea, QToolTip, QWidget

from tdescope.ui.views.hex_layout import BYTES_PER_ROW, HexLayout, describe_byte, selected_hex
from tdescope.ui.views.hex_paint import HexFrame, paint_frame

__all__ = ["BYTES_PER_ROW", "HexView"]


def _as_mask(mask) -> np.ndarray | None:
    """Bytes (non-zero = differs), a bool array or None -> a bool array or None."""
    if mask is None:
        return None
    if isinstance(mask, (bytes, bytearray, memoryview)):
        return np.frombuffer(bytes(mask), dtype=np.uint8) != 0
    return np.asarray(mask, dtype=bool).ravel()


class HexView(QAbstractScrollArea):
    """Rows of 16 bytes with offsets, hex and ASCII; spans, diff and selection drawn on top.

    The vertical scroll bar counts rows; the horizontal one counts pixels. All
    spans are ``[start, end)`` byte offsets.
    """

    offsetClicked = Signal(int)
    """The user clicked the byte at this offset (hex or ASCII area)."""
    offsetHovered = Signal(int)
    """The mouse moved onto the byte at this offset; -1 when it left every byte."""
    selectionChanged = Signal(int, int)
    """The selection became ``[start, end)`` (mouse drag or keyboard)."""
    cursorMoved = Signal(int)
    """The cursor moved to this offset, by click or by keyboard."""
    visibleRangeChanged = Signal(int, int)
    """The bytes ``[start, end)`` are now on screen (scroll or resize)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._data = b""
        self._mask: np.ndarray | None = None
        self._highlight: tuple[int, int] | None = None
        self._anchor = self._cursor = 0
        self._hover = -1
        self._dragging = False
        self._placeholder = "No data"
        self._linked: list[HexView] = []
        self._layout = HexLayout()
        font = QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont)
        font.setStyleHint(QFont.StyleHint.Monospace)
        self._base_size = self._full_size = font.pointSizeF()
        self.setFont(font)
        self._metrics()
        self.setFocusPolicy(Qt.FocusPolicy.StrongFocus)
        self.viewport().setMouseTracking(True)
        self.viewport().setAutoFillBackground(True)
        self.viewport().setBackgroundRole(QPalette.ColorRole.Base)
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self.horizontalScrollBar().valueChanged.connect(self._on_scrolled)

    # ---- data -------------------------------------------------------------------------------
    def set_data(self, data: bytes) -> None:
        """Show ``data``; resets cursor, selection, highlight and diff mask."""
        self._data = bytes(data)
        self._mask = None
        self._highlight = None
        self._anchor = self._cursor = 0
        self._metrics()  # the offset column widens past 64 KB
        self._update_scrollbars()
        self.verticalScrollBar().setValue(0)
        self.viewport().update()

    def data(self) -> bytes:
        """The bytes shown."""
        return self._data

    def set_diff(self, mask) -> None:
        """Mark differing bytes: ``mask`` is bytes (non-zero = differs), a bool array, or None."""
        self._mask = _as_mask(mask)
        self.viewport().update()

    def set_highlight(self, start: int, end: int) -> None:
        """Draw ``[start, end)`` with a highlight background and scroll it into view."""
        self._highlight = (max(0, start), max(start, end))
        self._ensure_visible(start, max(start, end - 1))
        self.viewport().update()

    def clear_highlight(self) -> None:
        """Remove the highlighted span."""
        self._highlight = None
        self.viewport().update()

    def highlight(self) -> tuple[int, int] | None:
        """The highlighted span, or None."""
        return self._highlight

    def set_placeholder(self, text: str) -> None:
        """Text painted, centred and gray, while there is no data."""
        self._placeholder = text
        self.viewport().update()

    # ---- selection and cursor ---------------------------------------------------------------
    def selection(self) -> tuple[int, int]:
        """The selected span ``[start, end)``; a lone cursor selects its byte; (0, 0) when empty."""
        if not self._data:
            return (0, 0)
        return (min(self._anchor, self._cursor), max(self._anchor, self._cursor) + 1)

    def set_selection(self, start: int, end: int) -> None:
        """Select ``[start, end)`` and put the cursor on its last byte."""
        if not self._data:
            return
        last = len(self._data) - 1
        self._anchor = min(max(0, start), last)
        self._move_cursor(min(max(self._anchor, end - 1), last), extend=True)

    def cursor_offset(self) -> int:
        """The offset under the keyboard cursor."""
        return self._cursor

    def selected_hex(self) -> str:
        """The selected bytes as space-separated hex (what Ctrl+C copies)."""
        return selected_hex(self._data, *self.selection())

    # ---- scrolling --------------------------------------------------------------------------
    def content_width(self) -> int:
        """Width the whole widget needs to show rows without horizontal scrolling."""
        return self._layout.content_w + 2 * self.frameWidth() + self.verticalScrollBar().sizeHint().width()

    def full_width(self) -> int:
        """Width the whole widget needs to show rows without horizontal scrolling at the full font
        size (before :meth:`_fit_font` shrinks it to the width it was given)."""
        font = QFont(self.font())
        font.setPointSizeF(self._full_size)
        full_cw = QFontMetricsF(font).horizontalAdvance("0" * 64) / 64
        return int(self._layout.content_w / self._layout.char_w * full_cw) + 3 + 2 * self.frameWidth() + \
            self.verticalScrollBar().sizeHint().width()

    def row_count(self) -> int:
        """Rows needed for the data (the last one may be partial)."""
        return self._layout.row_count()

    def visible_rows(self) -> int:
        """Whole rows that fit in the viewport."""
        return self._layout.visible_rows(self.viewport().height())

    def visible_range(self) -> tuple[int, int]:
        """Byte span ``[start, end)`` of the whole rows on screen."""
        first = self.verticalScrollBar().value() * BYTES_PER_ROW
        return (first, min(len(self._data), first + self.visible_rows() * BYTES_PER_ROW))

    def scroll_to(self, offset: int) -> None:
        """Scroll so the row holding ``offset`` is visible (no move when it already is)."""
        self._ensure_visible(offset, offset)

    def link_scroll(self, other: "HexView") -> None:
        """Scroll together with ``other``, both ways and on both axes."""
        if other is self or other in self._linked:
            return
        for a, b in ((self, other), (other, self)):
            a.verticalScrollBar().valueChanged.connect(b.verticalScrollBar().setValue)
            a.horizontalScrollBar().valueChanged.connect(b.horizontalScrollBar().setValue)
            a._linked.append(b)
        # setValue on an equal value emits nothing, so the pair cannot ping-pong.
        other.verticalScrollBar().setValue(self.verticalScrollBar().value())

    def unlink_scroll(self, other: "HexView") -> None:
        """Undo :meth:`link_scroll`."""
        if other not in self._linked:
            return
        for a, b in ((self, other), (other, self)):
            a.verticalScrollBar().valueChanged.disconnect(b.verticalScrollBar().setValue)
            a.horizontalScrollBar().valueChanged.disconnect(b.horizontalScrollBar().setValue)
            a._linked.remove(b)

    # ---- geometry ---------------------------------------------------------------------------
    def byte_rect(self, offset: int) -> QRect:
        """Viewport rectangle of the hex cell of ``offset`` (may lie off screen)."""
        return QRectF(*self._layout.hex_cell(offset, *self._scroll())).toAlignedRect()

    def ascii_rect(self, offset: int) -> QRect:
        """Viewport rectangle of the ASCII cell of ``offset``."""
        return QRectF(*self._layout.ascii_cell(offset, *self._scroll())).toAlignedRect()

    def offset_at(self, pos: QPoint, clamp: bool = False) -> int:
        """Offset of the byte under ``pos`` (viewport coordinates), or -1.

        With ``clamp`` a point beside the columns maps to the nearest byte, so a
        drag that leaves the text still extends the selection.
        """
        return self._layout.offset_at(pos.x(), pos.y(), *self._scroll(), clamp=clamp)

    def _scroll(self) -> tuple[int, int]:
        """``(top_row, hscroll)``: the first row on screen and the horizontal scroll in pixels."""
        return self.verticalScrollBar().value(), self.horizontalScrollBar().value()

    def _metrics(self) -> None:
        fm = QFontMetricsF(self.font())
        self._layout = HexLayout(char_w=max(1.0, fm.horizontalAdvance("0" * 64) / 64), line_h=int(fm.height()) + 2,
                                 ascent=round(fm.ascent()) + 1, length=len(self._data))

    def _update_scrollbars(self) -> None:
        vis = self.visible_rows()
        vsb, hsb = self.verticalScrollBar(), self.horizontalScrollBar()
        vsb.setRange(0, max(0, self.row_count() - vis))
        vsb.setPageStep(vis)
        hsb.setRange(0, max(0, self._layout.content_w - self.viewport().width()))
        hsb.setPageStep(self.viewport().width())
        hsb.setSingleStep(round(self._layout.char_w))

    def _ensure_visible(self, first_off: int, last_off: int) -> None:
        top = self.verticalScrollBar().value()
        row = self._layout.scroll_to_show(first_off, last_off, top, self.visible_rows())
        if row != top:
            self.verticalScrollBar().setValue(row)

    def _on_scrolled(self) -> None:
        self.viewport().update()
        self.visibleRangeChanged.emit(*self.visible_range())

    # ---- painting ---------------------------------------------------------------------------
    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self.viewport())
        pal = self.palette()
        if not self._data:
            p.setPen(pal.color(QPalette.ColorRole.PlaceholderText))
            p.setFont(QGuiApplication.font())  # a sentence, not data: the UI font reads better
            flags = Qt.AlignmentFlag.AlignCenter | Qt.TextFlag.TextWordWrap
            p.drawText(self.viewport().rect().adjusted(16, 16, -16, -16), flags, self._placeholder)
            return
        p.setFont(self.font())
        top, hscroll = self._scroll()
        paint_frame(p, pal, HexFrame(self._layout, self._data, self._mask, self._highlight, self.selection(),
                                     self._cursor, self.hasFocus(), top, hscroll, self.visible_rows() + 1,
                                     self.viewport().width(), self.viewport().height()))

    # ---- events -----------------------------------------------------------------------------
    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt override
        super().resizeEvent(event)
        self._fit_font(event.size().width())
        self._update_scrollbars()
        self.visibleRangeChanged.emit(*self.visible_range())

    def set_font_scale(self, scale: float, min_px: int = 0) -> None:
        """Grow (or shrink) the hex font by ``scale`` of its normal size, and to at least ``min_px``
        pixels high (presentation mode)."""
        self._full_size = max(self._base_size * scale, min_px * 72.0 / max(1, self.logicalDpiY()))
        font = QFont(self.font())
        font.setPointSizeF(self._full_size)
        self.setFont(font)
        self._fit_font(self.width())

    def _fit_font(self, width: int) -> None:
        """The largest font, from the full size down to 75 % of it, that shows 16 columns and the
        ASCII column in ``width`` without scrolling (column widths from the font's own metrics)."""
        spare = 2 * self.frameWidth() + self.verticalScrollBar().sizeHint().width() + 2
        chars = self._layout.content_w / self._layout.char_w  # the row's width in characters, whatever the font
        font = QFont(self.font())
        size = self._full_size
        while size > self._full_size * 0.75:
            font.setPointSizeF(size)
            if chars * QFontMetricsF(font).horizontalAdvance("0" * 64) / 64 + spare <= width:
                break
            size -= 0.5
        if abs(size - self.font().pointSizeF()) > 0.01:
            font.setPointSizeF(size)
            self.setFont(font)

    def changeEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.FontChange:
            self._metrics()
            self._update_scrollbars()
        super().changeEvent(event)

    def viewportEvent(self, event) -> bool:  # noqa: N802 - Qt override
        if event.type() == QEvent.Type.ToolTip:
            off = self.offset_at(event.pos())
            if off < 0:
                QToolTip.hideText()
            else:
                QToolTip.showText(event.globalPos(), self.describe_offset(off), self.viewport(), self.byte_rect(off))
            return True
        return super().viewportEvent(event)

    def describe_offset(self, off: int) -> str:
        """Tooltip text for ``off``: offset (dec/hex), value and diff state."""
        differs = self._mask is not None and off < len(self._mask) and bool(self._mask[off])
        return describe_byte(self._data, off, differs)

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.button() != Qt.MouseButton.LeftButton:
            return super().mousePressEvent(event)
        off = self.offset_at(event.position().toPoint())
        if off < 0:
            return
        extend = bool(event.modifiers() & Qt.KeyboardModifier.ShiftModifier)
        self._dragging = True
        self._move_cursor(off, extend=extend, ensure=False, always_emit=True)
        self.offsetClicked.emit(off)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt override
        pos = event.position().toPoint()
        if self._dragging and event.buttons() & Qt.MouseButton.LeftButton:
            self._move_cursor(self.offset_at(pos, clamp=True), extend=True)
            return
        off = self.offset_at(pos)
        if off != self._hover:
            self._hover = off
            self.offsetHovered.emit(off)

    def mouseReleaseEvent(self, event) -> None:  # noqa: N802 - Qt override
        self._dragging = False
        event.accept()

    def leaveEvent(self, event) -> None:  # noqa: N802 - Qt override
        if self._hover != -1:
            self._hover = -1
            self.offsetHovered.emit(-1)
        super().leaveEvent(event)

    def keyPressEvent(self, event) -> None:  # noqa: N802 - Qt override
        if event.matches(QKeySequence.StandardKey.Copy):
            if self._data:
                QGuiApplication.clipboard().setText(self.selected_hex())
            return
        if event.matches(QKeySequence.StandardKey.SelectAll) and self._data:
            self.set_selection(0, len(self._data))
            return
        if not self._data:
            return super().keyPressEvent(event)
        k, mods = event.key(), event.modifiers()
        ctrl = bool(mods & Qt.KeyboardModifier.ControlModifier)
        page = self.visible_rows() * BYTES_PER_ROW
        row_start = self._cursor - self._cursor % BYTES_PER_ROW
        target = {
            Qt.Key.Key_Left: self._cursor - 1,
            Qt.Key.Key_Right: self._cursor + 1,
            Qt.Key.Key_Up: self._cursor - BYTES_PER_ROW,
            Qt.Key.Key_Down: self._cursor + BYTES_PER_ROW,
            Qt.Key.Key_PageUp: self._cursor - page,
            Qt.Key.Key_PageDown: self._cursor + page,
            Qt.Key.Key_Home: 0 if ctrl else row_start,
            Qt.Key.Key_End: len(self._data) - 1 if ctrl else row_start + BYTES_PER_ROW - 1,
        }.get(k)
        if target is None:
            return super().keyPressEvent(event)
        target = min(max(target, 0), len(self._data) - 1)
        self._move_cursor(target, extend=bool(mods & Qt.KeyboardModifier.ShiftModifier))

    def _move_cursor(self, off: int, extend: bool, ensure: bool = True, always_emit: bool = False) -> None:
        before = self.selection()
        # A click on the byte already under the cursor still counts: listeners re-sync to it.
        moved = always_emit or off != self._cursor
        self._cursor = off
        if not extend:
            self._anchor = off
        if ensure:
            self.scroll_to(off)
        self.viewport().update()
        if moved:
            self.cursorMoved.emit(off)
        if self.selection() != before:
            self.selectionChanged.emit(*self.selection())
