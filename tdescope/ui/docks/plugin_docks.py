"""Engine-specific parts of the window: a plugin's own docks, and asking for a password.

A plugin may name Qt docks of its own in its engine's ``panel`` attribute
(``"package.module:create_docks"``, the ``Ability.PANEL`` ability), imported here by name only when
a window opens on that engine, so ui/ never imports plugins directly (the
layer contract). ``create_docks(parent)`` returns QDockWidgets; :class:`EngineDocks` sorts them once,
by the dock abilities they declare (``ShowsInventory``, ``ShowsResults``), into what the window feeds.
"""

from __future__ import annotations

import importlib
import threading
from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Signal, Slot
from PySide6.QtWidgets import QDockWidget, QInputDialog, QLineEdit, QWidget

from tdescope.app.engines.capabilities import Ability, ShowsInventory, ShowsResults, has_ability
from tdescope.app.errors import UserError

__all__ = ["EngineDocks", "PasswordPrompt", "create_engine_docks"]


@dataclass(frozen=True)
class EngineDocks:
    """A plugin's docks, and which of them the window feeds with what."""

    docks: tuple[QDockWidget, ...] = ()
    #: The docks that show the session's inventory when it connects.
    inventory_views: tuple[ShowsInventory, ...] = ()
    #: The docks that show workload results.
    result_views: tuple[ShowsResults, ...] = ()

    @classmethod
    def of(cls, docks: list[QDockWidget]) -> EngineDocks:
        """``docks`` sorted by the dock abilities they declare."""
        return cls(tuple(docks), tuple(d for d in docks if isinstance(d, ShowsInventory)),
                   tuple(d for d in docks if isinstance(d, ShowsResults)))


def create_engine_docks(engine, parent: QWidget) -> EngineDocks:
    """The engine's own docks (if it names any), each with an object name; the window places and feeds them.

    A broken plugin panel raises UserError (one line for the status bar), never anything else.
    """
    if not has_ability(engine, Ability.PANEL):
        return EngineDocks()
    module_name, _, func = engine.panel.partition(":")
    try:
        docks = list(getattr(importlib.import_module(module_name), func)(parent))
    except Exception as exc:  # noqa: BLE001 - a broken plugin panel is reported, never fatal
        raise UserError(f"{engine.label} panel not loaded: {type(exc).__name__}: {exc}") from exc
    for dock in docks:
        if not dock.objectName():
            dock.setObjectName(f"{engine.name}-{dock.windowTitle()}")
    return EngineDocks.of(docks)


class PasswordPrompt(QObject):
    """Asks for a password on the GUI thread on behalf of a worker thread.

    Engines call it (``ConnectParams.prompt``) from the connect thread; the call
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
