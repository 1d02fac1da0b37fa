"""Presentation mode for a class on a projector: bigger fonts, full screen, one teaching view at a time.

F5 (View → Presentation mode) toggles it: the interface font and the hex font grow by
:data:`SCALE` (the hex text at least :data:`MIN_HEX_PX` pixels), the window goes full screen
on the screen it is on, and one teaching view fills it instead of everything crammed:

- **pages**: Captures on the left (number, page, page type, cells, entropies), the page view
  on the right with its two hex panes one above the other, so both show 16 columns and their
  ASCII at the big font;
- **results**: the Workload dock alone (Run, progress, every phase of the A/B table or its chart).

F6 (View → Next teaching view) switches between them. The status bar with the ARMED badge
stays in both. F5 again puts back the fonts, the docks and the exact window geometry.
F11 alone toggles full screen.
"""

from __future__ import annotations

import enum

from PySide6.QtCore import QByteArray, QObject, QRect, Qt, QTimer
from PySide6.QtGui import QFont
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow

__all__ = ["MIN_HEX_PX", "Presentation", "SCALE", "TeachingView", "VIEWS"]

#: How much bigger fonts get.
SCALE = 1.35
#: The hex text's least height in pixels in presentation mode (read from the back of the room).
MIN_HEX_PX = 14


class TeachingView(enum.StrEnum):
    """What presentation mode shows: the pages (captures and the page view) or the results (workload)."""

    PAGES = "pages"
    RESULTS = "results"


#: The teaching views, in F6's order.
VIEWS = tuple(TeachingView)


class Presentation(QObject):
    """Toggles presentation mode on ``window``.

    Parameters
    ----------
    window : QMainWindow
        The main window; its central widget is the page view.
    captures, workload : QDockWidget
        The docks the "pages" and "results" views show.
    page_view : PageView
        The central widget (its hex panes stack in presentation mode).
    """

    def __init__(self, window: QMainWindow, captures: QDockWidget, workload: QDockWidget, page_view) -> None:
        super().__init__(window)
        self.window = window
        self.captures = captures
        self.workload = workload
        self.page_view = page_view
        self.active = False
        self.view = VIEWS[0]
        self._state = QByteArray()
        self._geometry = QRect()
        self._maximized = False
        self._font: QFont | None = None

    def toggle(self) -> None:
        """On when off, off when on."""
        self.leave() if self.active else self.enter()

    def enter(self) -> None:
        """Bigger fonts, full screen, the first teaching view."""
        if self.active:
            return
        app = QApplication.instance()
        self._state = self.window.saveState()
        self._geometry = self.window.geometry()  # kept as is: restoreGeometry() would "fix" it to the screen
        self._maximized = self.window.isMaximized()
        self._font = QFont(app.font())
        big = QFont(self._font)
        big.setPointSizeF(self._font.pointSizeF() * SCALE)
        app.setFont(big)
        self.page_view.set_presentation(True, SCALE, MIN_HEX_PX)
        self.captures.set_teaching(True)
        self.active = True
        self.show_view(VIEWS[0])
        screen = self.window.screen()
        if screen is not None:  # full screen on the screen it is on, whatever a window manager does
            self.window.setGeometry(screen.geometry())
        self.window.showFullScreen()
        self.window.statusBar().showMessage("Presentation mode: F6 next view, F5 to leave", 5000)

    def show_view(self, view: TeachingView) -> None:
        """Show the teaching view ``view`` (one of :data:`VIEWS`); only in presentation mode."""
        if not self.active:
            return
        self.view = view
        win = self.window
        keep = self.captures if view is TeachingView.PAGES else self.workload
        for dock in win.findChildren(QDockWidget):
            if dock is not keep:
                dock.hide()
        self.page_view.setVisible(view is TeachingView.PAGES)
        keep.setFloating(False)
        win.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, keep)  # out of any tab group
        keep.show()
        keep.raise_()
        if view is TeachingView.PAGES:
            win.resizeDocks([keep], [win.width() * 30 // 100], Qt.Orientation.Horizontal)

    def next_view(self) -> None:
        """F6: the teaching view after the current one."""
        if self.active:
            self.show_view(VIEWS[(VIEWS.index(self.view) + 1) % len(VIEWS)])

    def leave(self) -> None:
        """Everything as it was before :meth:`enter`: fonts, docks, the window's exact geometry."""
        if not self.active:
            return
        self.active = False
        if self._font is not None:
            QApplication.instance().setFont(self._font)
        self.page_view.set_presentation(False)
        self.captures.set_teaching(False)
        self.page_view.show()
        self.window.showNormal()
        # the small fonts' layouts first: with the big fonts' minimum sizes still in force, the window
        # could not shrink back and would keep the size it grew to
        QApplication.sendPostedEvents()
        self.window.layout().activate()
        self._restore()
        QTimer.singleShot(0, self._restore)  # once more after the window system answered

    def _restore(self) -> None:
        if self.active:
            return
        if self._maximized:
            self.window.showMaximized()
        else:
            self.window.setGeometry(self._geometry)
        self.window.restoreState(self._state)  # dock sizes are kept relative to the window's size

    def toggle_full_screen(self) -> None:
        """F11: full screen on or off, nothing else."""
        self.window.showNormal() if self.window.isFullScreen() else self.window.showFullScreen()
