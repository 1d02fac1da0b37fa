"""A thin vertical strip of per-chunk entropy, beside a hex view.

The strip is an overview: the whole buffer fits its height (one cell per chunk,
256 bytes by default), so a 64 KB capture still shows at a glance where the
structure and the randomness are. A frame marks the part the linked hex view
shows; clicking a cell asks to jump there.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QEvent, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPalette, QPen
from PySide6.QtWidgets import QToolTip, QWidget

__all__ = ["EntropyStrip", "entropy_color", "entropy_verdict"]

# Cool (structured) to hot (random). The hot end sits near 7.2 rather than 8
# because 256 random bytes cannot reach 8 bits/byte: they score about 7.2.
_STOPS = (
    (0.0, QColor("#2c4f9e")),
    (3.0, QColor("#2f9fbf")),
    (5.0, QColor("#8fc34a")),
    (6.5, QColor("#f2b134")),
    (7.2, QColor("#e0452c")),
    (8.0, QColor("#a8141c")),
)

_LEGEND = (
    "Entropy in bits/byte, one cell per chunk\n"
    "blue ≈ 0: constant (zeroes, padding)\n"
    "teal–green 3–5: structure, text, records\n"
    "red ≥ 7: random-looking (ciphertext, compressed)\n"
    "(a random 256-byte chunk scores ≈ 7.2, not 8)"
)


def entropy_color(bits: float) -> QColor:
    """Colour for ``bits`` (0..8 bits/byte) on the cool-to-hot scale."""
    bits = min(max(float(bits), 0.0), 8.0)
    for (x0, c0), (x1, c1) in zip(_STOPS, _STOPS[1:]):
        if bits <= x1:
            t = (bits - x0) / (x1 - x0)
            return QColor.fromRgbF(
                c0.redF() + (c1.redF() - c0.redF()) * t,
                c0.greenF() + (c1.greenF() - c0.greenF()) * t,
                c0.blueF() + (c1.blueF() - c0.blueF()) * t,
            )
    return QColor(_STOPS[-1][1])


def entropy_verdict(bits: float) -> str:
    """A few words on what a 256-byte chunk of ``bits`` entropy usually is."""
    if bits < 1.0:
        return "nearly constant (zeroes, padding)"
    if bits < 5.0:
        return "structured (headers, text, records)"
    if bits < 6.8:
        return "mixed"
    return "random-looking (ciphertext or compressed)"


class EntropyStrip(QWidget):
    """Per-chunk entropy as a column of coloured cells, the whole buffer top to bottom."""

    chunkClicked = Signal(int)
    """The user clicked a cell: the byte offset where its chunk starts."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._values: list[float] = []
        self._chunk = 256
        self._total = 0
        self._window: tuple[int, int] | None = None
        self.setMouseTracking(True)
        self.setFixedWidth(16)
        self.setToolTip(_LEGEND)  # shown while empty; cells replace it with their own text
        self.setCursor(Qt.CursorShape.PointingHandCursor)

    def sizeHint(self) -> QSize:  # noqa: N802 - Qt override
        return QSize(16, 120)

    def set_values(self, values: Sequence[float], chunk: int = 256, total: int | None = None) -> None:
        """Show ``values`` (bits/byte per chunk of ``chunk`` bytes) for a buffer of ``total`` bytes.

        ``total`` defaults to ``len(values) * chunk``; a shorter last chunk then
        gets a proportionally shorter cell.
        """
        self._values = [float(v) for v in values]
        self._chunk = max(1, int(chunk))
        self._total = int(total) if total is not None else len(self._values) * self._chunk
        self.update()

    def values(self) -> list[float]:
        """The entropy values shown."""
        return list(self._values)

    def clear(self) -> None:
        """Show nothing."""
        self.set_values([], self._chunk, 0)
        self._window = None

    def set_window(self, start: int, end: int) -> None:
        """Frame the byte span ``[start, end)`` (what the linked hex view shows)."""
        self._window = (start, end)
        self.update()

    def chunk_at(self, y: float) -> int:
        """Index of the cell at widget height ``y``, or -1."""
        area = self._area()
        if not self._values or self._total <= 0 or not (area.top() <= y < area.bottom()):
            return -1
        off = int((y - area.top()) / area.height() * self._total)
        i = off // self._chunk
        return i if 0 <= i < len(self._values) else -1

    def cell_rect(self, index: int) -> QRectF:
        """Widget rectangle of cell ``index``."""
        area = self._area()
        scale = area.height() / max(1, self._total)
        y0 = area.top() + index * self._chunk * scale
        y1 = area.top() + min(self._total, (index + 1) * self._chunk) * scale
        return QRectF(area.left(), y0, area.width(), y1 - y0)

    def _area(self) -> QRectF:
        return QRectF(self.rect()).adjusted(2, 1, -2, -1)

    def paintEvent(self, event) -> None:  # noqa: N802 - Qt override
        p = QPainter(self)
        pal = self.palette()
        area = self._area()
        p.fillRect(area, pal.color(QPalette.ColorRole.AlternateBase))
        for i, v in enumerate(self._values):
            # Overlap by a pixel fraction so antialiased cell edges leave no hairline gaps.
            p.fillRect(self.cell_rect(i).adjusted(0, 0, 0, 0.5), entropy_color(v))
        if self._window and self._total > 0 and self._values:
            scale = area.height() / self._total
            s, e = self._window
            frame = QRectF(area.left() - 1.5, area.top() + s * scale, area.width() + 3, max(3.0, (e - s) * scale))
            p.setPen(QPen(pal.color(QPalette.ColorRole.Text), 1.5))
            p.drawRect(frame)
        p.setPen(pal.color(QPalette.ColorRole.Mid))
        p.drawRect(area.adjusted(-0.5, -0.5, 0.5, 0.5))

    def event(self, event) -> bool:
        if event.type() == QEvent.Type.ToolTip:
            i = self.chunk_at(event.pos().y())
            if i < 0:
                QToolTip.showText(event.globalPos(), _LEGEND, self)
            else:
                s = i * self._chunk
                e = min(self._total, s + self._chunk) - 1
                v = self._values[i]
                text = f"chunk {i}: 0x{s:04x}–0x{e:04x}\n{v:.2f} bits/byte — {entropy_verdict(v)}\n\n{_LEGEND}"
                QToolTip.showText(event.globalPos(), text, self, self.cell_rect(i).toRect())
            return True
        return super().event(event)

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        i = self.chunk_at(event.position().y())
        if event.button() == Qt.MouseButton.LeftButton and i >= 0:
            self.chunkClicked.emit(i * self._chunk)
