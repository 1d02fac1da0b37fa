"""The PostgreSQL panel: the column-crypto matrix as a table and a bar chart of the ratio to plain.

Imported lazily by the UI (the only module of the plugin that may import Qt).
"""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtWidgets import QDockWidget, QLabel, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget
from PySide6.QtCore import Qt

from tdescope.app.events import Side, WorkloadResult
from tdescope.plugins.postgres.workloads import matrix_table

__all__ = ["MatrixDock", "MatrixPanel", "create_docks"]

_PLAIN = (120, 170, 120)
_MDC = (70, 110, 190)
_NO_MDC = (150, 180, 230)


class MatrixPanel(QWidget):
    """Shows a ``matrix`` :class:`WorkloadResult`: seconds, µs per row, and the ratio to plain as bars."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.title = QLabel("<b>Column-crypto matrix</b> — avg(length(pgp_sym_decrypt(col))) per cell")
        self.table = QTableWidget(0, 4)
        self.table.setHorizontalHeaderLabels(["cell", "seconds", "µs per row", "ratio to plain"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.plot = pg.PlotWidget()
        self.plot.setBackground("w")
        self.plot.showGrid(y=True, alpha=0.3)
        self.plot.setLabel("left", "time ÷ plain")
        self.plot.setMouseEnabled(x=False, y=False)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.table)
        split.addWidget(self.plot)
        split.setSizes([220, 300])
        lay = QVBoxLayout(self)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.title)
        lay.addWidget(split, 1)

    def show_result(self, result: WorkloadResult) -> None:
        """Fill the table and the bars from ``result``'s timings (:func:`matrix_table`: numbers, never its text)."""
        if not result.timings:
            return
        table = matrix_table(result)
        self.table.setRowCount(len(table.rows))
        for r, row in enumerate(table.rows):
            for c, cell in enumerate(row):
                item = QTableWidgetItem(cell.text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                self.table.setItem(r, c, item)
        self.table.resizeColumnsToContents()
        self.plot.clear()
        labels = [str(cell.value) for cell in table.column("cell")]
        ratios = [cell.value or 0.0 for cell in table.column("ratio to plain")]
        brushes = [_PLAIN if label == Side.PLAIN else _NO_MDC if "no-mdc" in label else _MDC for label in labels]
        self.plot.addItem(pg.BarGraphItem(x=list(range(len(labels))), height=ratios, width=0.7, brushes=brushes))
        axis = self.plot.getAxis("bottom")
        axis.setTicks([[(i, label.replace(" no-mdc", "\nno-mdc")) for i, label in enumerate(labels)]])
        params = ", ".join(f"{k} {v}" for k, v in result.params.items())
        self.title.setText(f"<b>Column-crypto matrix</b> — avg(length(pgp_sym_decrypt(col))), {params}")


class MatrixDock(QDockWidget):
    """The matrix panel as a dock; it shows only the column-crypto matrix's results."""

    def __init__(self, parent=None) -> None:
        super().__init__("Column-crypto matrix", parent)
        self.setObjectName("PostgresMatrixDock")
        self.panel = MatrixPanel(self)
        self.setWidget(self.panel)

    def show_result(self, result: WorkloadResult) -> None:
        """Show ``result`` when it comes from the matrix workload."""
        if result.workload == "matrix":
            self.panel.show_result(result)
            self.show()
            self.raise_()


def create_docks(parent=None) -> list[QDockWidget]:
    """The docks the PostgreSQL engine adds to the window (the engine's ``panel`` hook)."""
    return [MatrixDock(parent)]
