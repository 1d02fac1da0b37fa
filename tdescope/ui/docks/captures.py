"""The Captures dock: every page pair caught, newest last, in a sortable table."""

from __future__ import annotations

import time
from operator import attrgetter

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QDockWidget, QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from tdescope.app.probe.capture_record import CaptureRecord
from tdescope.app.events import PageCapture
from tdescope.ui.models.table import RowTableModel

__all__ = ["CapturesDock", "CapturesModel", "EMPTY_TEXTS"]

_COLUMNS = ("Time", "#", "Page", "Direction", "Plaintext", "Symbol", "Page type", "Cells", "Entropy before",
            "Entropy after", "Stop µs")
#: Each column's sort key, from the record (the time is the capture's).
_SORT_KEYS = (None, *map(attrgetter, ("seq", "pgno", "direction", "plaintext_side", "symbol", "page_type", "cells",
                                      "before_entropy", "after_entropy", "stop_us")))
#: Each column's text. A data buffer (a pgcrypto value) has no page number, type or cells. The time is to the
#: microsecond: an eBPF probe's hits (stamped in the kernel) come microseconds apart.
_CELLS = (
    lambda cap, rec: time.strftime("%H:%M:%S", time.localtime(cap.ts)) + f".{int(cap.ts * 1e6) % 1_000_000:06d}",
    lambda cap, rec: rec.seq,
    lambda cap, rec: rec.pgno if rec.is_page else "—",
    lambda cap, rec: rec.direction,
    lambda cap, rec: rec.plaintext_side,
    lambda cap, rec: rec.symbol,
    lambda cap, rec: rec.page_type if rec.is_page else f"buffer, {rec.size} B",
    lambda cap, rec: rec.cells if rec.is_page else "",
    lambda cap, rec: f"{rec.before_entropy:.2f}",
    lambda cap, rec: f"{rec.after_entropy:.2f}",
    lambda cap, rec: f"{rec.stop_us:.0f}",
)
#: The columns a class reads from the back of the room (presentation mode).
TEACHING_COLUMNS = ("#", "Page", "Page type", "Cells", "Entropy before", "Entropy after")


class CapturesModel(RowTableModel):
    """Table of (PageCapture, CaptureRecord) rows, appended in batches."""

    columns = _COLUMNS

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[tuple[PageCapture, CaptureRecord]] = []

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        cap, rec = self.rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return _CELLS[col](cap, rec)  # this cell only: the view asks cell by cell
        if role == Qt.ItemDataRole.UserRole:  # sort key: the sorting proxy asks for it per comparison
            return cap.ts if col == 0 else _SORT_KEYS[col](rec)
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (1, 2, 7, 8, 9, 10):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and col == 4:
            return "Which buffer may hold decrypted bytes: before (input), after (output) or both"
        if role == Qt.ItemDataRole.ToolTipRole and rec.problems:
            return "\n".join(rec.problems)
        return None

    def append(self, rows: list[tuple[PageCapture, CaptureRecord]]) -> None:
        """Add a batch of rows with one insert notification."""
        if not rows:
            return
        first = len(self.rows)
        self.beginInsertRows(QModelIndex(), first, first + len(rows) - 1)
        self.rows.extend(rows)
        self.endInsertRows()

    def clear(self) -> None:
        """Remove every row."""
        self.beginResetModel()
        self.rows.clear()
        self.endResetModel()

    def row(self, i: int) -> tuple[PageCapture, CaptureRecord]:
        """The capture and its record at row ``i``."""
        return self.rows[i]


#: What the empty dock says, by the window's state.
EMPTY_TEXTS = {
    "live": "No captures yet. Press Run (Ctrl+R): the probe arms on the cipher call while the workload runs.",
    "unticked": "No captures yet. Tick “Capture pages” in the Workload dock and press Run (Ctrl+R).",
    "replay": "No captures up to this point of the replay. Press Space to play, or click a note or the slider.",
}


class CapturesDock(QDockWidget):
    """Lists captures; selecting one shows it in the Page view."""

    captureSelected = Signal(object, object)
    """Emitted with (PageCapture, CaptureRecord) when the user selects a row."""

    def __init__(self, parent=None) -> None:
        super().__init__("Captures", parent)
        self.setObjectName("CapturesDock")
        self.model = CapturesModel(self)
        self.proxy = QSortFilterProxyModel(self)
        self.proxy.setSourceModel(self.model)
        self.proxy.setSortRole(Qt.ItemDataRole.UserRole)
        self.view = QTableView()
        self.view.setModel(self.proxy)
        self.view.setSortingEnabled(True)
        self.view.sortByColumn(0, Qt.SortOrder.AscendingOrder)
        self.view.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.view.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.view.verticalHeader().setVisible(False)
        self.view.verticalHeader().setDefaultSectionSize(20)
        # Interactive, not ResizeToContents: that would measure every row on every batch.
        self.view.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.view.horizontalHeader().setStretchLastSection(True)
        # resizeColumnsToContents on the first batch measures the rows in sight and 50 more, not 1000 (a storm's
        # first batch is hundreds of rows, each a Python data() call per column)
        self.view.horizontalHeader().setResizeContentsPrecision(50)
        # the symbol is the same on every row of a run: last, so page type and cells show in a narrow dock
        self.view.horizontalHeader().moveSection(_COLUMNS.index("Symbol"), len(_COLUMNS) - 1)
        self.view.selectionModel().currentRowChanged.connect(self._on_current)
        self.empty = QLabel(EMPTY_TEXTS["live"])
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet("color: gray; padding: 8px;")
        self.count_label = QLabel("")
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.empty)
        lay.addWidget(self.view, 1)
        lay.addWidget(self.count_label)
        self.setWidget(body)
        self.view.hide()
        self._seeking = True  # until the user picks a row: move to the first page with user rows
        self._sized = False  # the columns were fitted to the first batch
        self._selecting = False

    def set_teaching(self, on: bool) -> None:
        """Presentation mode: only :data:`TEACHING_COLUMNS`, sized to their contents; off shows all."""
        for col, name in enumerate(_COLUMNS):
            self.view.setColumnHidden(col, on and name not in TEACHING_COLUMNS)
        if on:
            self.view.resizeColumnsToContents()

    def set_empty_state(self, state: str) -> None:
        """What the dock says while it has no capture: one of :data:`EMPTY_TEXTS`' keys."""
        self.empty.setText(EMPTY_TEXTS[state])

    def add(self, rows: list[tuple[PageCapture, CaptureRecord]]) -> None:
        """Append a batch; the first capture of a run is shown at once."""
        if not rows:
            return
        first = self.model.rowCount()
        self.model.append(rows)
        self.empty.hide()
        self.view.show()
        self.count_label.setText(f"{self.model.rowCount()} captures")
        if not self._sized:  # once: after a replay's seek back the columns keep their widths (measuring the
            self._sized = True  # first batch again, cell by cell, was the seek's longest GUI-thread step)
            self.view.resizeColumnsToContents()
        if self._seeking:
            # the first page a class should see holds the user's rows (not a bitmap or the change buffer)
            hit = next((first + i for i, (_cap, rec) in enumerate(rows) if rec.holds_user_rows), None)
            if hit is not None or first == 0:
                self._select_source_row(hit if hit is not None else 0)
                self._seeking = hit is None

    def select_capture(self, ts: float | None, seq: int) -> bool:
        """Select the capture numbered ``seq`` (at ``ts`` when given: the nearest); True when found."""
        best, best_dt = -1, float("inf")
        for i in range(self.model.rowCount()):
            cap, _ = self.model.row(i)
            if cap.seq == seq:
                dt = abs(cap.ts - ts) if ts is not None else 0.0
                if dt < best_dt:
                    best, best_dt = i, dt
        if best < 0:
            return False
        index = self.proxy.mapFromSource(self.model.index(best, 0))
        self.view.setCurrentIndex(index)
        self.view.scrollTo(index)
        return True

    def _select_source_row(self, row: int) -> None:
        index = self.proxy.mapFromSource(self.model.index(row, 0))
        self._selecting = True
        try:
            self.view.setCurrentIndex(index)
            self.view.scrollTo(index)
        finally:
            self._selecting = False

    def clear(self) -> None:
        """Forget every capture."""
        self._seeking = True
        self.model.clear()
        self.view.hide()
        self.empty.show()
        self.count_label.setText("")

    def _on_current(self, current: QModelIndex, _prev: QModelIndex) -> None:
        if current.isValid():
            if not self._selecting:
                self._seeking = False  # the user chose: stay there
            cap, rec = self.model.row(self.proxy.mapToSource(current).row())
            self.captureSelected.emit(cap, rec)
