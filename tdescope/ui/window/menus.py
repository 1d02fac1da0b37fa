"""The window's menus, created once in a fixed order and looked up by key, never by title."""

from __future__ import annotations

from enum import Enum

from PySide6.QtWidgets import QMenu, QMenuBar, QMessageBox, QWidget

from tdescope import __version__

__all__ = ["Menu", "MenuRegistry", "show_about"]


def show_about(parent: QWidget) -> None:
    """Help → About tdescope."""
    QMessageBox.about(parent, "About tdescope", f"<b>tdescope {__version__}</b><br>Look inside database "
                      "encryption while it happens.<br><br>Probes are eBPF uprobes or read-only gdb breakpoints "
                      "in bounded windows; the target never waits on this window.")


class Menu(Enum):
    """The menus of the menu bar, in their order on screen; the value is the title."""

    FILE = "&File"
    EDIT = "&Edit"
    RUN = "&Run"
    VIEW = "&View"
    OBSERVE = "&Observe"
    HELP = "&Help"


class MenuRegistry:
    """Every :class:`Menu` of one menu bar, added in enum order at construction.

    Controllers get the registry and add their actions to ``menus[Menu.X]``.
    """

    def __init__(self, bar: QMenuBar) -> None:
        self._menus = {key: bar.addMenu(key.value) for key in Menu}

    def __getitem__(self, key: Menu) -> QMenu:
        return self._menus[key]
