"""Qt panel of the Oracle engine: the inventory.

The only module of the plugin that imports Qt; tdescope.ui loads it lazily
through the engine (``OracleEngine.panel``), never by import. It is fed the
:class:`~tdescope.app.engines.api.Inventory` dataclass on the GUI thread. A 10046
trace is read with ``tdescope oracle parse-trace`` (no database needed).
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from tdescope.app.engines.api import Inventory

__all__ = ["OracleDock", "create_docks"]

_RIGHT = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _table(headers: list[str]) -> QtWidgets.QTableWidget:
    t = QtWidgets.QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
    t.horizontalHeader().setStretchLastSection(True)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 6)
    return t


def _fill(table: QtWidgets.QTableWidget, rows) -> None:
    table.setRowCount(0)
    for r, row in enumerate(rows):
        table.insertRow(r)
        for c, value in enumerate(row):
            item = QtWidgets.QTableWidgetItem(str(value))
            if c and _numeric(str(value)):
                item.setTextAlignment(_RIGHT)
            table.setItem(r, c, item)
    table.resizeColumnsToContents()


class OracleDock(QtWidgets.QDockWidget):
    """The Oracle dock: the inventory (wallet, encrypted tablespaces and columns, version, AES-NI)."""

    def __init__(self, parent=None) -> None:
        super().__init__("Oracle", parent)
        self.setObjectName("oracle-dock")
        self.inventory = _table(["Section", "Name", "Value"])
        self.setWidget(self.inventory)

    def show_inventory(self, inventory: Inventory) -> None:
        """Inventory rows (section, name, value)."""
        _fill(self.inventory, inventory.rows)


def create_docks(parent=None) -> list[QtWidgets.QDockWidget]:
    """The docks this engine adds to the main window."""
    return [OracleDock(parent)]
