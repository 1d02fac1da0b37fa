"""Presentation mode: bigger fonts, full screen, one teaching view at a time; F5 again puts everything back."""

from __future__ import annotations

from PySide6.QtCore import QRect, QSize, Qt
from PySide6.QtWidgets import QApplication

from tdescope.app.engines import discover_engines
from tdescope.app.events import PageCapture
from tdescope.app.probe.capture_record import describe_capture
from tdescope.ui.window.main_window import MainWindow
from tdescope.ui.window.presentation import MIN_HEX_PX, SCALE

from test_ui_session import session_file  # noqa: F401 - the recorded session fixture


def _window(qtbot, qsettings) -> MainWindow:
    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win._default_layout(QSize(1280, 720))
    win.show()
    win.activateWindow()
    qtbot.waitUntil(win.isActiveWindow, timeout=3000)
    return win


def test_presentation_mode_and_back(qtbot, qsettings):
    win = _window(qtbot, qsettings)
    app_size = QApplication.font().pointSizeF()
    hex_size = win.page_view.after_view.font().pointSizeF()
    hotspots = win.observation.hotspots_dock
    qtbot.keyClick(win, Qt.Key.Key_F5)
    assert win.presentation.active and win.isFullScreen()
    assert QApplication.font().pointSizeF() == app_size * SCALE
    assert win.page_view.after_view.font().pointSizeF() > hex_size
    assert win.captures_dock.isVisible() and win.page_view.isVisible()  # the "pages" teaching view
    assert not win.workload_dock.isVisible() and not hotspots.isVisible() and not win.engine_dock.isVisible()
    assert win.statusBar().isVisible()  # the ARMED badge stays in view
    qtbot.keyClick(win, Qt.Key.Key_F6)  # the "results" teaching view: the Workload dock alone
    assert win.presentation.view == "results"
    assert win.workload_dock.isVisible() and not win.captures_dock.isVisible() and not win.page_view.isVisible()
    qtbot.keyClick(win, Qt.Key.Key_F6)
    assert win.presentation.view == "pages" and win.page_view.isVisible()
    qtbot.keyClick(win, Qt.Key.Key_F5)
    assert not win.presentation.active and not win.isFullScreen()
    assert QApplication.font().pointSizeF() == app_size
    assert not win.engine_dock.isHidden() and not hotspots.isHidden()  # back in their tab group
    assert not win.engine_dock.isFloating() and not hotspots.isFloating()
    assert win.page_view.isVisible() and win.workload_dock.isVisible()
    win.shutdown()


def test_presentation_fits_1280x720_with_16_columns_and_ascii_at_14px(qtbot, qsettings):
    """Item 1-2 of issue #23: the teaching view's least size fits a 1280×720 projector; both hex panes
    show 16 columns and their ASCII, at least 14 px high; leaving restores the exact geometry and docks."""
    win = _window(qtbot, qsettings)
    win.setGeometry(QRect(0, 0, 1280, 720))
    qtbot.waitUntil(lambda: win.geometry() == QRect(0, 0, 1280, 720), timeout=3000)
    data = bytes(range(256)) * 16
    cap = PageCapture(ts=1.0, seq=1, pgno=2, direction="decrypt", symbol="sqlcipher_page_cipher",
                      before=data, after=bytes(4096))
    record, _ = describe_capture(cap, win.decoder, full=False)
    win.captures_dock.add([(cap, record)])
    win.show_capture(cap, record)
    qtbot.waitUntil(lambda: win.capture_presenter.shown is cap, timeout=5000)
    docks_before = {d.objectName(): d.geometry() for d in (win.workload_dock, win.captures_dock)}
    win.presentation.enter()
    win.setGeometry(QRect(0, 0, 1280, 720))  # the projector's screen (offscreen's own is another size)
    qtbot.waitUntil(lambda: win.geometry() == QRect(0, 0, 1280, 720), timeout=3000)
    hint = win.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720, hint
    for view in (win.page_view.before_view, win.page_view.after_view):
        qtbot.waitUntil(lambda v=view: v.content_width() <= v.width() + 1, timeout=3000)
        assert view.fontInfo().pixelSize() >= MIN_HEX_PX, view.fontInfo().pixelSize()
        assert view.ascii_rect(15).right() <= view.viewport().width(), "the ASCII column is cut"
        assert view.isVisible() and view.visible_rows() >= 6
    view = win.captures_dock.view  # the captures' teaching columns, page type whole
    shown = [win.captures_dock.model.headerData(c, Qt.Orientation.Horizontal) for c in range(11)
             if not view.isColumnHidden(c)]
    assert shown == ["#", "Page", "Page type", "Cells", "Entropy before", "Entropy after"]
    page_type = shown.index("Page type")
    col = [c for c in range(11) if not view.isColumnHidden(c)][page_type]
    assert view.columnViewportPosition(col) + view.columnWidth(col) <= view.viewport().width()
    win.presentation.next_view()  # results: the A/B table with room for its phases
    assert win.workload_dock.results.height() > 150
    win.presentation.leave()
    qtbot.waitUntil(lambda: win.geometry() == QRect(0, 0, 1280, 720), timeout=3000)
    qtbot.waitUntil(lambda: {d.objectName(): d.geometry() for d in (win.workload_dock, win.captures_dock)}
                    == docks_before, timeout=3000)
    assert not any(win.captures_dock.view.isColumnHidden(c) for c in range(11))
    win.shutdown()


def test_reset_layout_fits_the_screen_again(qtbot, qsettings):
    """View → Reset layout sizes the window for its screen, not for the size it had grown to."""
    win = _window(qtbot, qsettings)
    win.resize(4000, 3000)
    win._reset_layout()
    screen = win.screen().availableGeometry()
    assert win.width() <= max(screen.width(), 1280) and win.height() <= max(screen.height(), 720)
    win.shutdown()


def test_presentation_of_a_replay_fits_1280x720_too(qtbot, qsettings, session_file):  # noqa: F811
    """In replay the REPLAY toolbar stays (it is how the class moves through the session) and still fits."""
    from tdescope.ui.window.main_window import open_replay_window

    win = open_replay_window(str(session_file), qsettings)
    qtbot.addWidget(win)
    win.show()
    win.presentation.enter()
    qtbot.waitUntil(lambda: win.isFullScreen(), timeout=3000)
    hint = win.minimumSizeHint()
    assert hint.width() <= 1280 and hint.height() <= 720, hint
    assert win.replay.replay_bar.isVisible()
    win.presentation.leave()
    win.shutdown()
