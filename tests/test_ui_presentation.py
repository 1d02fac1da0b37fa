"""Presentation mode: bigger fonts, full screen, the focus view only; F5 again puts everything back."""

from __future__ import annotations

from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QApplication

from tdescope.app.engines import discover_engines
from tdescope.ui.window.main_window import MainWindow
from tdescope.ui.window.presentation import SCALE


def test_presentation_mode_and_back(qtbot, qsettings):
    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win._default_layout(QSize(1280, 720))
    win.show()
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=3000)
    app_size = QApplication.font().pointSizeF()
    hex_size = win.page_view.after_view.font().pointSizeF()
    hotspots = win.observation.hotspots_dock
    qtbot.keyClick(win, Qt.Key.Key_F5)
    assert win.presentation.active and win.isFullScreen()
    assert QApplication.font().pointSizeF() == app_size * SCALE
    assert win.page_view.after_view.font().pointSizeF() > hex_size
    assert win.workload_dock.isVisible() and win.captures_dock.isVisible() and win.page_view.isVisible()
    assert not hotspots.isVisible() and not win.engine_dock.isVisible()
    assert win.statusBar().isVisible()  # the ARMED badge stays in view
    qtbot.keyClick(win, Qt.Key.Key_F5)
    assert not win.presentation.active and not win.isFullScreen()
    assert QApplication.font().pointSizeF() == app_size
    assert not win.engine_dock.isHidden() and not hotspots.isHidden()  # back in their tab group
    assert not win.engine_dock.isFloating() and not hotspots.isFloating()
    win.shutdown()
