"""The Engine panel: what is encrypted, with which cipher, and the key state."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.engines.api import Inventory

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
        row.addWidget(self.reconnect)
        lay.addLayout(row)
        lay.addWidget(self.tree, 1)
        self.setWidget(body)

    def show_inventory(self, label: str, inventory: Inventory, pid: int | None) -> None:
        """Fill the tree from ``inventory``."""
        self.reconnect.hide()
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

    def show_error(self, message: str, lost: bool = False) -> None:
        """Say the engine could not be reached (or the connection was lost), and offer to reconnect."""
        self.title.setText("<b>Connection lost</b>" if lost else "<b>Engine not available</b>")
        self.target.setText(message)
        self.target.setWordWrap(True)
        self.change_target.hide()
        self.reconnect.show()
        self.raise_()
