"""A flame graph of folded stacks, custom-painted: click a frame to focus, the root to reset.

A search (:meth:`FlameGraph.set_search`, the Hotspots filter box) paints the matching frames magenta,
as FlameGraph.pl does, fades the others, and says what share of the samples pass through a match.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPen
from PySide6.QtWidgets import QToolTip, QWidget

from tdescope.app.hotspots.crypto import is_crypto

__all__ = ["MATCH_COLOR", "FlameGraph", "FlameNode", "build_tree", "matched_samples"]

_ROW = 18
#: A frame matching the search (FlameGraph.pl's colour), and how much the others fade towards the background.
MATCH_COLOR = QColor(230, 50, 190)
_FADE = 0.7
_BACKGROUND = QColor(250, 250, 248)


class FlameNode:
    """One frame of the merged call tree: ``value`` samples pass through it."""

    __slots__ = ("name", "value", "self_value", "children", "parent")

    def __init__(self, name: str, parent: FlameNode | None = None) -> None:
        self.name = name
        self.value = 0
        self.self_value = 0
        self.children: dict[str, FlameNode] = {}
        self.parent = parent

    def path(self) -> tuple[str, ...]:
        """Names from the root's child down to this node."""
        out = []
        node: FlameNode | None = self
        while node is not None and node.parent is not None:
            out.append(node.name)
            node = node.parent
        return tuple(reversed(out))


def build_tree(stacks: dict[str, int]) -> FlameNode:
    """Merge folded stacks (outermost first) into a tree under a root called ``all``."""
    root = FlameNode("all")
    for stack, count in stacks.items():
        node = root
        node.value += count
        for name in stack.split(";"):
            child = node.children.get(name)
            if child is None:
                child = node.children[name] = FlameNode(name, node)
            child.value += count
            node = child
        node.self_value += count
    return root


def matched_samples(root: FlameNode, matches: Callable[[str], bool]) -> int:
    """Samples passing through at least one frame that ``matches`` (a match inside a match counts once)."""
    total, todo = 0, list(root.children.values())
    while todo:
        node = todo.pop()
        if matches(node.name):
            total += node.value
        else:
            todo.extend(node.children.values())
    return total


def _faded(color: QColor) -> QColor:
    b = _BACKGROUND
    return QColor(*(round(c + (bc - c) * _FADE) for c, bc in ((color.red(), b.red()), (color.green(), b.green()),
                                                               (color.blue(), b.blue()))))


def _color(name: str) -> QColor:
    if is_crypto(name):
        return QColor(120, 110, 230)  # crypto stands out in blue-violet
    if name.startswith("["):
        return QColor(190, 190, 190)  # unsymbolized code grouped by DSO
    h = zlib.crc32(name.encode()) & 0xFFFF
    return QColor(205 + h % 50, 80 + (h >> 4) % 120, 40 + (h >> 8) % 40)


class FlameGraph(QWidget):
    """Flame graph: the root at the bottom, callees above, widths proportional to samples.

    Only frames at least one pixel wide are drawn, so the cost of a paint is
    bounded by the widget's width times its depth, not by the profile's size.
    """

    frameClicked = Signal(str)
    """Emitted with the frame's symbol when the user clicks one (after focusing it)."""

    def __init__(self, describe: Callable[[str], str] | None = None, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setMouseTracking(True)
        self.setMinimumHeight(120)
        self._describe = describe or (lambda _name: "")
        self.root = FlameNode("all")
        self._focus: tuple[str, ...] = ()
        self._hits: list[tuple[QRectF, FlameNode]] = []
        self._search = ""
        self._matches: Callable[[str], bool] | None = None
        self._matched: dict[str, bool] = {}  # name -> verdict, for the current search
        self.matched = 0
        """Samples passing through a frame that matches the search (0 without one)."""

    def set_stacks(self, stacks: dict[str, int]) -> None:
        """Show these folded stacks; the focus stays on the same path when it still exists."""
        self.root = build_tree(stacks)
        self.matched = matched_samples(self.root, self.is_match) if self._matches is not None else 0
        self._fit_height()
        self.update()

    def depth(self) -> int:
        """Rows the graph needs from its root (the focus's ancestors included) to its deepest frame."""
        focus = self.focus_node()
        above, node = 0, focus
        while node.parent is not None:
            above, node = above + 1, node.parent
        deepest, todo = 0, [(focus, 1)]
        while todo:
            node, d = todo.pop()
            deepest = max(deepest, d)
            todo.extend((c, d + 1) for c in node.children.values())
        return above + deepest

    def _fit_height(self) -> None:
        # every row fits: in its scroll area the graph is as tall as its deepest stack (SHA-512 and AES-NI
        # sit at the top of the deepest ones), and the view scrolls instead of clipping them
        self.setMinimumHeight(max(120, (self.depth() + 2) * _ROW))  # a free row on top for the search line

    def set_search(self, text: str, matches: Callable[[str], bool] | None = None) -> None:
        """Highlight the frames whose name ``matches`` (by default: contains ``text``, any case).

        An empty ``text`` ends the search. The Hotspots dock passes its filter box's rule, which also
        matches a frame's library and glossary sentence.
        """
        self._search = text.strip()
        needle = self._search.lower()
        self._matches = None if not needle else (matches or (lambda name: needle in name.lower()))
        self._matched = {}
        self.matched = matched_samples(self.root, self.is_match) if self._matches is not None else 0
        self.update()

    def is_match(self, name: str) -> bool:
        """True when a search is on and the frame called ``name`` matches it."""
        if self._matches is None:
            return False
        verdict = self._matched.get(name)
        if verdict is None:
            verdict = self._matched[name] = bool(self._matches(name))
        return verdict

    def focus_node(self) -> FlameNode:
        """The node drawn full width (the root when nothing is focused)."""
        node = self.root
        for name in self._focus:
            child = node.children.get(name)
            if child is None:
                return self.root
            node = child
        return node

    def set_focus(self, path: tuple[str, ...]) -> None:
        """Zoom to the frame at ``path`` (names from the root's child); ``()`` resets."""
        self._focus = tuple(path)
        self._fit_height()
        self.update()

    def paintEvent(self, _event) -> None:  # noqa: N802 - Qt API
        p = QPainter(self)
        p.fillRect(self.rect(), _BACKGROUND)
        self._hits = []
        focus = self.focus_node()
        if self.root.value == 0:
            p.setPen(QColor(120, 120, 120))
            p.drawText(self.rect(), Qt.AlignmentFlag.AlignCenter, "no samples yet")
            return
        fm = QFontMetrics(self.font())
        width = float(self.width())
        bottom = float(self.height())
        # Ancestors of the focus, full width, so clicking one zooms back out.
        chain = []
        node: FlameNode | None = focus
        while node is not None:
            chain.append(node)
            node = node.parent
        chain.reverse()
        depth = 0
        for anc in chain[:-1]:
            self._draw(p, fm, anc, 0.0, width, bottom - (depth + 1) * _ROW, dim=True)
            depth += 1
        scale = width / max(focus.value, 1)
        stack = [(focus, 0.0, depth)]
        while stack:
            node, x, d = stack.pop()
            w = node.value * scale
            y = bottom - (d + 1) * _ROW
            if y + _ROW < 0:
                continue
            self._draw(p, fm, node, x, w, y)
            cx = x
            for child in sorted(node.children.values(), key=lambda c: c.name):
                cw = child.value * scale
                if cw >= 1.0:
                    stack.append((child, cx, d + 1))
                cx += cw
        if self._matches is not None:
            share = 100.0 * self.matched / max(self.root.value, 1)
            p.setPen(MATCH_COLOR.darker(130))
            p.drawText(self.rect().adjusted(4, 2, -4, 0), Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop,
                       f"“{self._search}”: {share:.1f}% of samples")
        p.end()

    def _draw(self, p: QPainter, fm: QFontMetrics, node: FlameNode, x: float, w: float, y: float,
              dim: bool = False) -> None:
        rect = QRectF(x, y, w, _ROW - 1)
        if dim:
            color = QColor(225, 225, 225)
        elif self._matches is None or node.parent is None:
            color = _color(node.name)
        else:
            color = MATCH_COLOR if self.is_match(node.name) else _faded(_color(node.name))
        p.fillRect(rect, color)
        p.setPen(QPen(QColor(255, 255, 255)))
        p.drawLine(rect.topRight(), rect.bottomRight())
        if w > 24:
            p.setPen(QColor(20, 20, 20) if not dim else QColor(90, 90, 90))
            label = node.name if node.parent is not None else f"all ({self.root.value} samples)"
            text = fm.elidedText(label, Qt.TextElideMode.ElideRight, int(w - 6))
            p.drawText(rect.adjusted(3, 0, -3, 0), Qt.AlignmentFlag.AlignVCenter, text)
        self._hits.append((rect, node))

    def node_at(self, x: float, y: float) -> FlameNode | None:
        """The frame drawn at widget coordinates (x, y), or None."""
        for rect, node in reversed(self._hits):
            if rect.contains(x, y):
                return node
        return None

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt API
        node = self.node_at(event.position().x(), event.position().y())
        if node is None:
            return
        self.set_focus(node.path())
        if node.parent is not None:
            self.frameClicked.emit(node.name)

    def mouseMoveEvent(self, event) -> None:  # noqa: N802 - Qt API
        node = self.node_at(event.position().x(), event.position().y())
        if node is None:
            QToolTip.hideText()
            return
        total = self.root.value or 1
        text = f"<b>{node.name}</b><br>{node.value} samples ({100.0 * node.value / total:.1f}%)"
        if node.self_value:
            text += f", self {node.self_value}"
        about = self._describe(node.name) if node.parent is not None else ""
        if about:
            text += f"<br><i>{about}</i>"
        QToolTip.showText(event.globalPosition().toPoint(), text, self)
