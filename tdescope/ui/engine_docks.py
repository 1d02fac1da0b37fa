"""Engine-specific parts of the window: a plugin's own docks, and asking for a password.

A plugin may name Qt docks of its own in its engine's ``panel`` attribute
(``"package.module:create_docks"``, the ``Ability.PANEL`` ability), imported here by name only when
a window opens on that engine, so ui/ never imports plugins directly (the
layer contract). ``create_docks(parent)`` returns QDockWidgets; a dock that has
``show_inventory(inventory)`` or ``show_result(result)`` gets them as they come.
"""

from __future__ import annotations

import importlib
import threading

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QDockWidget, QInputDialog, QLineEdit, QWidget

from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.events import WorkloadResult

__all__ = ["PasswordPrompt", "attach_engine_docks"]


def attach_engine_docks(window) -> list[QDockWidget]:
    """Create the engine's own docks (if it names any) and keep them fed; returns them."""
    if not has_ability(window.engine, Ability.PANEL):
        return []
    module_name, _, func = window.engine.panel.partition(":")
    try:
        docks = list(getattr(importlib.import_module(module_name), func)(window))
    except Exception as exc:  # noqa: BLE001 - a broken plugin panel is reported, never fatal
        window.statusBar().showMessage(f"{window.engine.label} panel not loaded: {type(exc).__name__}: {exc}", 15000)
        return []
    view_menu = next((a.menu() for a in window.menuBar().actions() if a.text() == "&View"), None)
    for dock in docks:
        if not dock.objectName():
            dock.setObjectName(f"{window.engine.name}-{dock.windowTitle()}")
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, dock)
        if view_menu is not None:
            view_menu.addAction(dock.toggleViewAction())
        if hasattr(dock, "show_result"):
            window.pump.subscribe(WorkloadResult, lambda batch, d=dock: d.show_result(batch[-1]))
    return docks


class PasswordPrompt(QObject):
    """Asks for a password on the GUI thread on behalf of a worker thread.

    Engines call it (``options["prompt"]``) from the connect thread; the call
    blocks until the user answers. The password goes straight to the engine and
    is never stored or logged.
    """

    _ask = Signal(str)

    def __init__(self, parent: QWidget) -> None:
        super().__init__(parent)
        self._parent = parent
        self._answer: str | None = None
        self._done = threading.Event()
        self._ask.connect(self._on_ask, Qt.ConnectionType.QueuedConnection)

    def __call__(self, message: str = "Password:") -> str | None:
        self._done.clear()
        self._ask.emit(message)
        self._done.wait()
        answer, self._answer = self._answer, None
        return answer

    @Slot(str)
    def _on_ask(self, message: str) -> None:
        text, ok = QInputDialog.getText(self._parent, "tdescope — password", message, QLineEdit.EchoMode.Password)
        self._answer = text if ok else None
        self._done.set()
