"""The part every flat table model in tdescope shares: rows under fixed column headers."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QAbstractTableModel, QModelIndex, Qt

__all__ = ["RowTableModel"]


class RowTableModel(QAbstractTableModel):
    """A flat table: ``rows`` (any objects) under ``columns`` (header texts).

    Subclasses set ``columns`` and implement ``data``; :meth:`set_rows` refreshes in place when the
    row count holds (a live table keeps its selection and scroll), else resets.
    """

    columns: Sequence[str] = ()

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list = []

    def rowCount(self, parent=QModelIndex()) -> int:  # noqa: N802 - Qt API
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent=QModelIndex()) -> int:  # noqa: N802 - Qt API
        return 0 if parent.isValid() else len(self.columns)

    def headerData(self, section, orientation, role=Qt.ItemDataRole.DisplayRole):  # noqa: N802 - Qt API
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return self.columns[section]
        return None

    def set_rows(self, rows: list) -> None:
        """Show ``rows``; same length: one dataChanged, else a reset."""
        if len(rows) == len(self.rows) and rows:
            self.rows = rows
            self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, len(self.columns) - 1))
            return
        self.beginResetModel()
        self.rows = rows
        self.endResetModel()
