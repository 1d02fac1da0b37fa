"""The Engine panel: what is encrypted, with which cipher, and the key state.

Its inventory reads catalogs only; **Sample columns…** (sessions that can) reads user
tables for pgcrypto columns, and says which first.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QMessageBox,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.engines.api import EngineSession, Inventory
from tdescope.app.engines.capabilities import Ability, has_ability

__all__ = ["EngineDock"]


class EngineDock(QDockWidget):
    """Shows an engine's Inventory grouped by section, plus the probe target."""

    def __init__(self, parent=None) -> None:
        super().__init__("Engine", parent)
        self.setObjectName("EngineDock")
        self.title = QLabel("<b>No engine connected</b>")
        self.target = QLabel("")
        self.target.setStyleSheet("color: gray;")
        self.change_target = QPushButton("Change target…")
        self.change_target.setToolTip("Probe another server process (a backend from the server's activity list)")
        self.change_target.hide()
        self.reconnect = QPushButton("Reconnect")
        self.reconnect.setToolTip("Connect again (asks for the password again); nothing else restarts")
        self.reconnect.hide()
        self.sample_columns = QPushButton("Sample columns…")
        self.sample_columns.setToolTip("Look for pgcrypto columns by reading the first bytes of a few rows of each "
                                       "bytea column of user tables; says which it will read first")
        self.sample_columns.hide()
        self.sample_columns.clicked.connect(self._ask_sampling)
        self._sampling: tuple | None = None  # (session, tasks, on_inventory) while a session offers sampling
        self._label = ""
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Property", "Value"])
        self.tree.setRootIsDecorated(True)
        self.tree.setAlternatingRowColors(True)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addWidget(self.title)
        row = QHBoxLayout()
        row.addWidget(self.target, 1)
        row.addWidget(self.change_target)
        row.addWidget(self.sample_columns)
        row.addWidget(self.reconnect)
        lay.addLayout(row)
        lay.addWidget(self.tree, 1)
        self.setWidget(body)

    def show_inventory(self, label: str, inventory: Inventory, pid: int | None) -> None:
        """Fill the tree from ``inventory``."""
        self.reconnect.hide()
        self._label = label
        self.title.setText(f"<b>{label}</b>")
        self.target.setText(f"Probe target: pid {pid}" if pid else "")
        self.tree.clear()
        sections: dict[str, QTreeWidgetItem] = {}
        for section, name, value in inventory.rows:
            parent = sections.get(section)
            if parent is None:
                parent = sections[section] = QTreeWidgetItem(self.tree, [section, ""])
                f = parent.font(0)
                f.setBold(True)
                parent.setFont(0, f)
            item = QTreeWidgetItem(parent, [name, value])
            item.setToolTip(1, value)
        self.tree.expandAll()
        self.tree.resizeColumnToContents(0)

    def offer_sampling(self, session: EngineSession | None, tasks, on_inventory: Callable[[Inventory], None]) -> None:
        """Show **Sample columns…** when ``session`` can sample user tables; ``on_inventory(inventory)`` gets the
        sampled inventory (the recording keeps it) once the dock shows it. ``tasks``: the window's task runner."""
        able = has_ability(session, Ability.SAMPLE_COLUMNS)
        self._sampling = (session, tasks, on_inventory) if able else None
        self.sample_columns.setVisible(able)

    def _ask_sampling(self) -> None:
        if self._sampling is None:
            return
        session, tasks, on_inventory = self._sampling

        def ask(reads: str) -> None:
            answer = QMessageBox.question(self, "tdescope — sample columns", f"{reads}\n\nRead them now?")
            if answer != QMessageBox.StandardButton.Yes:
                return
            self.sample_columns.setEnabled(False)
            tasks.run(lambda _state: session.sample_columns(), name="sample-columns", on_done=sampled,
                      on_exception=failed)

        def sampled(inventory: Inventory) -> None:
            self.sample_columns.setEnabled(True)
            self.show_inventory(self._label, inventory, session.server_pid())
            on_inventory(inventory)

        def failed(exc: BaseException) -> None:
            self.sample_columns.setEnabled(True)
            self.target.setText(f"Sampling failed: {(str(exc).splitlines() or [''])[0]}")

        tasks.run(lambda _state: session.sampling_reads(), name="sampling-reads", on_done=ask, on_exception=failed)

    def show_error(self, message: str, lost: bool = False) -> None:
        """Say the engine could not be reached (or the connection was lost), and offer to reconnect."""
        self.title.setText("<b>Connection lost</b>" if lost else "<b>Engine not available</b>")
        self.target.setText(message)
        self.target.setWordWrap(True)
        self.change_target.hide()
        self.sample_columns.hide()
        self.reconnect.show()
        self.raise_()
