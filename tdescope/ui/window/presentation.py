"""Presentation mode for a class on a projector: bigger fonts, full screen, one focus view.

F5 (View → Presentation mode) toggles it: the interface font and the hex font grow by
:data:`SCALE`, the window goes full screen, and only what the class watches stays: the
page view, the Workload dock and Captures (the status bar with the ARMED badge too).
F5 again puts back the fonts, the docks and the window as they were. F11 alone toggles
full screen.
"""

from __future__ import annotations

from PySide6.QtCore import QByteArray, QObject
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow

__all__ = ["Presentation", "SCALE"]

#: How much bigger fonts get.
SCALE = 1.35


class Presentation(QObject):
    """Toggles presentation mode on ``window``, keeping ``focus`` docks (the rest hide)."""

    def __init__(self, window: QMainWindow, focus: list[QDockWidget], hex_views: list) -> None:
        super().__init__(window)
        self.window = window
        self.focus = focus
        self.hex_views = hex_views
        self.active = False
        self._state = QByteArray()
        self._font: QFont | None = None
        self._was_full = False

    def toggle(self) -> None:
        """On when off, off when on."""
        self.leave() if self.active else self.enter()

    def enter(self) -> None:
        """Bigger fonts, full screen, only the focus docks."""
        if self.active:
            return
        app = QApplication.instance()
        self._state = self.window.saveState()
        self._was_full = self.window.isFullScreen()
        self._font = QFont(app.font())
        big = QFont(self._font)
        big.setPointSizeF(self._font.pointSizeF() * SCALE)
        app.setFont(big)
        for view in self.hex_views:
            view.set_font_scale(SCALE)
        for dock in self.window.findChildren(QDockWidget):
            dock.setVisible(dock in self.focus)
        for dock in self.focus:
            dock.raise_()
        self.window.showFullScreen()
        self.active = True
        self.window.statusBar().showMessage("Presentation mode: F5 to leave", 5000)

    def leave(self) -> None:
        """Everything as it was before :meth:`enter`."""
        if not self.active:
            return
        if self._font is not None:
            QApplication.instance().setFont(self._font)
        for view in self.hex_views:
            view.set_font_scale(1.0)
        self.window.restoreState(self._state)
        if not self._was_full:
            self.window.showNormal()
        self.active = False

    def toggle_full_screen(self) -> None:
        """F11: full screen on or off, nothing else."""
        self.window.showNormal() if self.window.isFullScreen() else self.window.showFullScreen()
