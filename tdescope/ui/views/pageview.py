"""The Page view: one capture, ciphertext and plaintext side by side, with its decoded structure.

Side by side when both panes fit whole (16 hex columns and their ASCII), one above the other when
they do not (a 1280-pixel screen with the docks beside it): a row cut before its ASCII hides the
text a class is looking for.

The view is dumb on purpose: the caller decodes the pages and computes entropy
(off the GUI thread when it matters); this widget only lays them out and keeps
the hex panes and the structure tree in step.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import QModelIndex, Qt, Signal
from PySide6.QtGui import QStandardItem, QStandardItemModel
from PySide6.QtWidgets import (
    QAbstractItemView,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QSplitter,
    QTreeView,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.app.probe.entropy import Randomness, shannon_entropy, verdict
from tdescope.ui.views.entropy_strip import EntropyStrip
from tdescope.ui.views.hex_paint import diff_color
from tdescope.ui.views.hexview import HexView
from tdescope.ui.views.structure_tree import HEADERS, SPAN_ROLE, StructureRows, fill_structure_model

__all__ = ["PLACEHOLDERS", "PageView", "SPAN_ROLE", "fill_structure_model"]

#: The header while no capture is shown, live and in a replay.
PLACEHOLDERS = {"live": "No capture selected — run a workload with “Capture pages” ticked (Ctrl+R)",
                "replay": "No capture selected — play the replay (Space), or click a capture or a note"}
_ROLES = ("ciphertext", "plaintext")  # a decrypting call's: input, output


#: Side by side, each pane may shrink its hex font down to this share of the full size; below it the
#: panes go one above the other (at 1280×720 the side-by-side font fell to 8 px and still cut the ASCII).
SIDE_BY_SIDE_SCALE = 0.85

class PageView(QWidget):
    """Header line, "Before" and "After" hex panes with entropy strips, and the structure tree."""

    fieldSelected = Signal(object)
    """The current tree row changed: the :class:`DecodedField` (None for a group or problem row)."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._after_page: DecodedPage | None = None
        self._before_page: DecodedPage | None = None
        self._roles = _ROLES
        self._presenting = False
        self.placeholder = "live"  # which of PLACEHOLDERS the empty view says
        self._fields: dict[int, DecodedField] = {}
        self._after_items: dict[int, QStandardItem] = {}
        self._before_items: dict[int, QStandardItem] = {}

        self._header = QLabel()
        self._header.setTextFormat(Qt.TextFormat.RichText)
        self._header.setWordWrap(True)
        self._header.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.before_view, self.before_strip, self._before_caption, before_pane = self._pane(
            "Ciphertext appears here: the buffer as the cipher call received it"
        )
        self.after_view, self.after_strip, self._after_caption, after_pane = self._pane(
            "Plaintext appears here: the buffer as the cipher call returned it"
        )
        self.before_view.link_scroll(self.after_view)

        self.model = QStandardItemModel(0, len(HEADERS), self)
        self.tree = QTreeView()
        self.tree.setModel(self.model)
        self.tree.setUniformRowHeights(True)  # lets the view skip measuring every row
        self.tree.setAlternatingRowColors(True)
        self.tree.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.tree.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        header = self.tree.header()
        header.setStretchLastSection(True)
        header.resizeSection(0, 220)
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.ResizeToContents)

        self.panes = QSplitter(Qt.Orientation.Horizontal)
        self.panes.addWidget(before_pane)
        self.panes.addWidget(after_pane)
        self.splitter = QSplitter(Qt.Orientation.Vertical)
        self.splitter.addWidget(self.panes)
        self.splitter.addWidget(self.tree)
        self.splitter.setStretchFactor(0, 3)
        self.splitter.setStretchFactor(1, 2)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self._header)
        layout.addWidget(self.splitter, 1)

        self.tree.selectionModel().currentChanged.connect(self._on_tree_current)
        self.after_view.cursorMoved.connect(lambda off: self._select_field_at(off, "after"))
        self.before_view.cursorMoved.connect(lambda off: self._select_field_at(off, "before"))
        for view, strip in ((self.before_view, self.before_strip), (self.after_view, self.after_strip)):
            view.visibleRangeChanged.connect(strip.set_window)
            strip.chunkClicked.connect(view.scroll_to)
        self.clear()

    def _pane(self, placeholder: str) -> tuple[HexView, EntropyStrip, QLabel, QWidget]:
        pane = QWidget()
        caption = QLabel()
        view, strip = HexView(), EntropyStrip()
        view.set_placeholder(placeholder)
        # The strip hugs the hex columns; spare width goes to the right of the pane.
        view.setMaximumWidth(view.full_width())
        row = QHBoxLayout()
        row.setSpacing(3)
        row.addWidget(view, 1)
        row.addWidget(strip)
        row.addStretch(0)
        box = QVBoxLayout(pane)
        box.setContentsMargins(0, 0, 0, 0)
        box.setSpacing(2)
        box.addWidget(caption)
        box.addLayout(row, 1)
        return view, strip, caption, pane

    # ---- public API -------------------------------------------------------------------------
    def set_presentation(self, on: bool, scale: float = 1.0, min_px: int = 0) -> None:
        """Presentation mode: the hex panes one above the other (each gets the whole width, so 16
        columns and the ASCII show at the big font), the hex font ``scale`` times bigger and at least
        ``min_px`` pixels high; off puts the panes back at the normal size, side by side if they fit."""
        self._presenting = on
        for view in (self.before_view, self.after_view):
            view.set_font_scale(scale if on else 1.0, min_px if on else 0)
            view.setMaximumWidth(view.full_width())
        self.splitter.setStretchFactor(0, 4 if on else 3)
        self._fit_panes()

    def side_by_side_width(self) -> int:
        """The width both panes need side by side, whole (hex columns, ASCII and entropy strips) with the
        font at no less than :data:`SIDE_BY_SIDE_SCALE` of its size (a hex view shrinks its font to fit)."""
        pane = int(SIDE_BY_SIDE_SCALE * self.before_view.full_width()) + self.before_strip.sizeHint().width() + 6
        margins = self.layout().contentsMargins()
        return 2 * pane + self.panes.handleWidth() + margins.left() + margins.right()

    def resizeEvent(self, event) -> None:  # noqa: N802 - Qt API
        super().resizeEvent(event)
        self._fit_panes()

    def _fit_panes(self) -> None:
        fits = not self._presenting and self.width() >= self.side_by_side_width()
        orientation = Qt.Orientation.Horizontal if fits else Qt.Orientation.Vertical
        if self.panes.orientation() != orientation:
            self.panes.setOrientation(orientation)

    def show_capture(
        self,
        before: bytes,
        after: bytes,
        decoded_after: DecodedPage | None = None,
        decoded_before: DecodedPage | None = None,
        title: str = "",
        before_entropy: Sequence[float] = (),
        after_entropy: Sequence[float] = (),
        diff_mask=None,
        *,
        chunk: int = 256,
        roles: tuple[str, str] = _ROLES,
        rows: StructureRows | None = None,
    ) -> None:
        """Show one capture.

        Parameters
        ----------
        before, after : bytes
            The buffer at the cipher call's entry and at its return.
        decoded_after, decoded_before : DecodedPage or None
            Structure of each side; the tree follows ``decoded_after`` first.
        title : str
            Capture summary: page number, direction, symbol (plain text).
        before_entropy, after_entropy : sequence of float
            Bits/byte per ``chunk`` bytes of each side.
        diff_mask : bytes, bool array or None
            Which offsets differ between the sides; drawn in both panes.
        chunk : int
            Chunk size the entropy values were computed over.
        roles : (str, str)
            What the before and after buffers hold, from
            :func:`~tdescope.app.probe.capture_record.side_label` (``"plaintext"``,
            ``"ciphertext"``, ``"plaintext or ciphertext"``, ``"not captured"``).
        rows : StructureRows, optional
            The structure tree built already (off the GUI thread) from the same pages and roles.
        """
        self._after_page, self._before_page = decoded_after, decoded_before
        self._roles = tuple(roles)
        for view, strip, data, ent in (
            (self.before_view, self.before_strip, before, before_entropy),
            (self.after_view, self.after_strip, after, after_entropy),
        ):
            view.set_data(data)
            view.setMaximumWidth(view.full_width())  # past 64 KB the offset column widens
            view.set_diff(diff_mask)
            strip.set_values(ent, chunk, len(data))
            strip.set_window(*view.visible_range())
        self._before_caption.setText(self._caption(f"Before ({roles[0]})", before, before_entropy))
        self._after_caption.setText(self._caption(f"After ({roles[1]})", after, after_entropy))
        self._header.setText(self._summary(title, before, after, before_entropy, after_entropy, diff_mask))
        self._rebuild_tree(rows)

    def clear(self) -> None:
        """Show the empty state."""
        self._after_page = self._before_page = None
        self._roles = _ROLES
        for view, strip in ((self.before_view, self.before_strip), (self.after_view, self.after_strip)):
            view.set_data(b"")
            strip.clear()
        self._before_caption.setText("<b>Before (ciphertext)</b>")
        self._after_caption.setText("<b>After (plaintext)</b>")
        self._header.setText(f"<span style='color:gray'>{PLACEHOLDERS[self.placeholder]}</span>")
        self._rebuild_tree()

    def select_span(self, start: int, end: int) -> None:
        """Highlight ``[start, end)`` in both panes."""
        self.after_view.set_highlight(start, end)
        self.before_view.set_highlight(start, end)

    def current_field(self) -> DecodedField | None:
        """The field of the current tree row, or None."""
        item = self.model.itemFromIndex(self.tree.currentIndex().siblingAtColumn(0))
        return self._fields.get(id(item)) if item is not None else None

    # ---- sync -------------------------------------------------------------------------------
    def _rebuild_tree(self, rows: StructureRows | None = None) -> None:
        self.tree.setUpdatesEnabled(False)  # one repaint for the whole rebuild
        try:
            fg = diff_color(self.palette())
            self._after_items, self._before_items = fill_structure_model(
                self.model, self._after_page, self._before_page, fg, self._roles, rows
            )
            self._fields = {}
            for page, items in ((self._after_page, self._after_items), (self._before_page, self._before_items)):
                for top in page.fields if page else ():
                    for f in top.walk():
                        if id(f) in items:
                            self._fields[id(items[id(f)])] = f
            if self._before_items:
                self.tree.expandToDepth(0)
        finally:
            self.tree.setUpdatesEnabled(True)

    def _on_tree_current(self, current: QModelIndex, _previous: QModelIndex) -> None:
        span = current.siblingAtColumn(0).data(SPAN_ROLE) if current.isValid() else None
        if span is None:
            self.after_view.clear_highlight()
            self.before_view.clear_highlight()
        else:
            _side, start, end = span
            # The same offsets on both sides: the plaintext span came from those ciphertext bytes.
            self.select_span(start, end)
        self.fieldSelected.emit(self.current_field())

    def _select_field_at(self, offset: int, side: str) -> None:
        item = None
        if side == "before" and self._before_page is not None:
            f = self._before_page.field_at(offset)
            item = self._before_items.get(id(f)) if f is not None else None
        if item is None and self._after_page is not None:
            # A ciphertext byte without structure of its own maps to the plaintext field at that offset.
            f = self._after_page.field_at(offset)
            item = self._after_items.get(id(f)) if f is not None else None
        if item is None:
            return
        index = item.index()
        self.tree.setCurrentIndex(index)
        self.tree.scrollTo(index)  # expands collapsed parents too

    # ---- text -------------------------------------------------------------------------------
    @staticmethod
    def _caption(name: str, data: bytes, entropy: Sequence[float]) -> str:
        # one entropy figure everywhere: the whole buffer's (as the Captures table and the CLI);
        # the strip beside the hex shows 256-byte chunks and says so in its tooltip
        whole = f" · entropy {shannon_entropy(data):.2f} bits/B" if data else ""
        return f"<b>{name}</b> <span style='color:gray'>{len(data):,} B{whole}</span>"

    def _summary(self, title, before, after, before_entropy, after_entropy, diff_mask) -> str:
        fg = diff_color(self.palette())
        bad, good = fg.name(), "#2e9e5b"
        parts = [f"<b>{html.escape(title)}</b>"] if title else []
        parts.append(f"{len(before):,} B → {len(after):,} B")

        if before or after:
            fmt = lambda d: f"{shannon_entropy(d):.2f}" if d else "—"  # noqa: E731
            parts.append(f"entropy {fmt(before)} → {fmt(after)} bits/B (whole buffer)")
        if diff_mask is not None:
            raw = diff_mask
            if isinstance(raw, (bytes, bytearray, memoryview)):
                raw = np.frombuffer(bytes(raw), dtype=np.uint8)
            n = int(np.count_nonzero(raw))
            parts.append(f"{n:,} bytes differ")
        page = self._after_page
        if page is None and self._roles[0] == "plaintext":  # entry-only: the one buffer is the plaintext
            page = self._before_page
        if page is not None:
            cells = f", {page.cells} cells" if page.cells else ""
            if page.problems:
                parts.append(f"<span style='color:{bad}'>✗ {html.escape(page.page_type)}{cells}, "
                             f"{len(page.problems)} problem(s)</span>")
            else:
                parts.append(f"<span style='color:{good}'>✓ decodes as {html.escape(page.page_type)}{cells}</span>")
        # only a side known to be ciphertext is judged on its randomness
        cipher = {"before": before, "after": after}.get(
            "before" if self._roles[0] == "ciphertext" else "after" if self._roles[1] == "ciphertext" else "")
        judged = verdict(cipher) if cipher else None  # the report's words: one rule for both
        if judged is Randomness.ENCRYPTED:
            parts.append(f"<span style='color:{good}'>✓ ciphertext looks random</span>")
        elif judged in (Randomness.TOO_SHORT, Randomness.EMPTY):
            parts.append(f"<span style='color:gray'>ciphertext {judged} ({len(cipher)} B)</span>")
        elif judged is not None:
            parts.append(f"<span style='color:{bad}'>✗ ciphertext side does not look random</span>")
        return " · ".join(parts)
