"""Pick another server process as the probe target (a backend from pg_stat_activity, ...).

Each backend's current query is shown with its literals masked (a watched
application's key in ``pgp_sym_decrypt(pan, 'hunter2')`` ends up in screenshots
and on projectors); **Show query literals** reveals them, off by default.
"""

from __future__ import annotations

from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QHeaderView,
    QLabel,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
)

from tdescope.app.engines.api import TargetChoice
from tdescope.app.system.statement_text import mask_literals

__all__ = ["TargetDialog"]

_COLUMNS = ("pid", "kind", "user", "application", "state", "activity")


class TargetDialog(QDialog):
    """A table of :class:`TargetChoice` rows; ``chosen()`` after ``exec()``."""

    def __init__(self, choices: list[TargetChoice], current: int | None, parent=None,
                 dialect: str = "postgres") -> None:
        super().__init__(parent)
        self.setWindowTitle("Probe target")
        self.resize(900, 420)
        self.table = QTableWidget(len(choices), len(_COLUMNS))
        self.table.setHorizontalHeaderLabels(list(_COLUMNS))
        self.table.verticalHeader().setVisible(False)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.table.horizontalHeader().setStretchLastSection(True)
        self._choices = choices
        self._dialect = dialect
        for r, c in enumerate(choices):
            for col, value in enumerate((c.pid, c.kind, c.user, c.application, c.state, "")):
                item = QTableWidgetItem(str(value))
                item.setToolTip(str(value))
                self.table.setItem(r, col, item)
            if c.pid == current:
                self.table.selectRow(r)
        self.reveal = QCheckBox("Show query literals (they may hold keys and card numbers)")
        self.reveal.setToolTip("Queries are shown as pg_stat_statements normalises them: literals become $1, $2…")
        self.reveal.toggled.connect(self._show_activity)
        self._show_activity(False)
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.allow_critical = QCheckBox("Allow critical processes (postmaster, checkpointer, walwriter…) — "
                                        "stopping them stalls the whole server")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        self.table.doubleClicked.connect(self.accept)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Which server process should the probes and samplers watch?"))
        lay.addWidget(self.table, 1)
        lay.addWidget(self.reveal)
        lay.addWidget(self.allow_critical)
        lay.addWidget(buttons)

    def _show_activity(self, reveal: bool) -> None:
        column = _COLUMNS.index("activity")
        for r, c in enumerate(self._choices):
            text = c.activity if reveal else mask_literals(c.activity, self._dialect)
            item = self.table.item(r, column)
            item.setText(text)
            item.setToolTip(text)

    def chosen(self) -> int | None:
        """The selected pid, or None."""
        rows = self.table.selectionModel().selectedRows()
        return self._choices[rows[0].row()].pid if rows else None
