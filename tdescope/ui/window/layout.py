"""Where the docks go, chosen for the screen the window opens on.

Three arrangements, by the window's available size:

- **compact** (a classroom projector, 1280×720 and anything under 1500×850): one tab
  group on the left (Workload in front, then Engine, Hotspots, Waits, Notes and the
  engine's own docks), Captures and Timeline along the bottom, the page view in the
  middle with all the width that is left: Run, results, captures, page view and the
  status bar (the ARMED badge) all on screen.
- **medium** (up to 1800 wide): Engine above Workload on the left; Hotspots, Waits
  and Notes as tabs beside Captures and Timeline at the bottom, so the page view
  keeps both hex panes at 16 columns with their ASCII.
- **wide** (1920×1080): Engine and Workload on the left, Hotspots/Waits/Notes tabbed
  on the right, Captures and Timeline at the bottom.

A saved layout (``layout/state``) replaces this on the next start; View → Reset
layout comes back to it. The replay toolbar is never part of a saved layout.
"""

from __future__ import annotations

import enum

from PySide6.QtCore import QByteArray, QSettings, QSize, Qt
from PySide6.QtWidgets import QDockWidget, QMainWindow, QTabBar

__all__ = ["Arrangement", "arrangement_for", "arrange", "default_layout", "restore_layout", "save_layout"]

#: Bumped when docks are added or renamed, so an old saved layout is not restored.
LAYOUT_VERSION = 5

LEFT, RIGHT, BOTTOM = (Qt.DockWidgetArea.LeftDockWidgetArea, Qt.DockWidgetArea.RightDockWidgetArea,
                       Qt.DockWidgetArea.BottomDockWidgetArea)


class Arrangement(enum.StrEnum):
    """How the docks are placed, by the window's size."""

    COMPACT = "compact"  #: a 1280×720 projector: the left docks tabbed
    MEDIUM = "medium"
    WIDE = "wide"  #: 1920×1080: Hotspots and the others on the right


def arrangement_for(size: QSize) -> Arrangement:
    """The arrangement for a window of ``size``."""
    if size.width() < 1500 or size.height() < 850:
        return Arrangement.COMPACT
    return Arrangement.MEDIUM if size.width() < 1800 else Arrangement.WIDE


def _tabs(win: QMainWindow, docks: list[QDockWidget]) -> None:
    for dock in docks[1:]:
        win.tabifyDockWidget(docks[0], dock)
    docks[0].raise_()


def arrange(win: QMainWindow, kind: Arrangement, engine: QDockWidget, workload: QDockWidget, captures: QDockWidget,
            timeline: QDockWidget, side: list[QDockWidget]) -> None:
    """Place every dock for ``kind``; ``side`` lists Hotspots, Waits, Notes and the engine's docks
    (the first is raised in its tab group)."""
    w, h = win.width(), win.height()
    for dock in (engine, workload, captures, timeline, *side):
        win.removeDockWidget(dock)
        dock.setFloating(False)
        dock.show()
    win.addDockWidget(BOTTOM, captures)
    win.splitDockWidget(captures, timeline, Qt.Orientation.Horizontal)
    if kind is Arrangement.COMPACT:
        win.addDockWidget(LEFT, workload)
        _tabs(win, [workload, engine, *side])
        win.resizeDocks([workload], [max(360, w * 31 // 100)], Qt.Orientation.Horizontal)
        win.resizeDocks([captures], [max(150, h * 24 // 100)], Qt.Orientation.Vertical)
        win.resizeDocks([captures, timeline], [w * 45 // 100, w * 55 // 100], Qt.Orientation.Horizontal)
        return
    win.addDockWidget(LEFT, engine)
    win.splitDockWidget(engine, workload, Qt.Orientation.Vertical)
    win.resizeDocks([engine, workload], [h * 26 // 100, h * 60 // 100], Qt.Orientation.Vertical)
    win.resizeDocks([workload], [max(380, w * 22 // 100)], Qt.Orientation.Horizontal)
    if kind is Arrangement.MEDIUM:
        win.splitDockWidget(timeline, side[0], Qt.Orientation.Horizontal)
        _tabs(win, side)
        win.resizeDocks([captures, timeline, side[0]], [w * 28 // 100, w * 32 // 100, w * 40 // 100],
                        Qt.Orientation.Horizontal)
        win.resizeDocks([captures], [h * 30 // 100], Qt.Orientation.Vertical)
        return
    win.addDockWidget(RIGHT, side[0])
    _tabs(win, side)
    win.resizeDocks([side[0]], [max(420, w * 24 // 100)], Qt.Orientation.Horizontal)
    win.resizeDocks([captures], [h * 24 // 100], Qt.Orientation.Vertical)
    win.resizeDocks([captures, timeline], [w * 45 // 100, w * 55 // 100], Qt.Orientation.Horizontal)


def default_layout(win: QMainWindow, size: QSize | None, engine: QDockWidget, workload: QDockWidget,
                   captures: QDockWidget, timeline: QDockWidget, side: list[QDockWidget]) -> Arrangement:
    """Size ``win`` for ``size`` (the screen's available size, up to 1920×1080, when None) and arrange
    its docks; returns the arrangement's name."""
    if size is None:
        screen = win.screen().availableGeometry() if win.screen() is not None else None
        size = QSize(min(screen.width(), 1920), min(screen.height(), 1080)) if screen else QSize(1280, 720)
    win.resize(size)
    kind = arrangement_for(size)
    arrange(win, kind, engine, workload, captures, timeline, side)
    for bar in win.findChildren(QTabBar):  # dock tabs: whole names, scroll buttons when they do not fit
        bar.setElideMode(Qt.TextElideMode.ElideNone)
        bar.setUsesScrollButtons(True)
    return kind


def restore_layout(win: QMainWindow, settings: QSettings) -> None:
    """The layout saved by :func:`save_layout`, when it is of this version and fits this screen (a layout
    saved at 1920×1080 restored on a 1280×720 projector put the captures and the status bar off-screen:
    the default layout for the screen is kept then)."""
    if settings.value("layout/version", 0, type=int) != LAYOUT_VERSION:
        return
    saved = settings.value("layout/size")
    screen = win.screen().availableGeometry() if win.screen() is not None else None
    if isinstance(saved, QSize) and screen is not None and (saved.width() > screen.width()
                                                             or saved.height() > screen.height()):
        return
    geometry = settings.value("layout/geometry")
    state = settings.value("layout/state")
    if isinstance(geometry, QByteArray):
        win.restoreGeometry(geometry)
    if isinstance(state, QByteArray):
        win.restoreState(state, LAYOUT_VERSION)


def save_layout(win: QMainWindow, settings: QSettings) -> None:
    """Keep ``win``'s geometry and dock state for the next start."""
    settings.setValue("layout/version", LAYOUT_VERSION)
    settings.setValue("layout/geometry", win.saveGeometry())
    settings.setValue("layout/size", win.size())
    settings.setValue("layout/state", win.saveState(LAYOUT_VERSION))
