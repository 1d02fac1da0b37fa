"""The main window with pytest-qt: run the workload from the dock, see progress, results and captures."""

import re

import pytest
from PySide6.QtCore import Qt

from tdescope.app.engines import discover_engines
from tdescope.app.events import CaptureWindowState
from tdescope.ui.window.main_window import MainWindow


@pytest.fixture
def window(lab_window):
    return lab_window


def test_inventory_fills_the_engine_panel(window):
    items = window.engine_dock.tree.findItems("KDF iterations", Qt.MatchFlag.MatchRecursive)
    assert items and items[0].text(1) == "256000"
    assert str(window.session.server_pid()) in window.engine_dock.target.text()


def test_run_from_the_dock_shows_progress_and_the_ratio(qtbot, window):
    dock = window.workload_dock
    dock.capture.setChecked(False)
    dock._spins["groups"].setValue(30)  # long enough that progress shows between 0 and 100 % (batched repaints)
    dock._spins["ids_per_group"].setValue(300)
    dock.rounds.setValue(0)  # a single run first
    seen = []
    dock.progress.valueChanged.connect(seen.append)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    assert dock.cancel_button.isEnabled() and not dock.run_button.isEnabled()
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=60000)
    assert dock.progress.value() == 100
    assert any(0 < v < 100 for v in seen), seen  # it moved on the way
    assert dock.status.text().startswith("Done: encrypted / plain = ") and "(one run)" in dock.status.text()
    table = dock.results.table
    phases = [table.item(r, 0).text() for r in range(table.rowCount())]
    assert phases == ["insert", "delete", "update", "select", "commit", "total"]
    assert "Insert = 9000" in dock.results.note.text()
    assert window.captures_dock.model.rowCount() == 0
    # then three interleaved rounds: a median with its interval, and both runs kept
    dock.rounds.setValue(3)
    seen.clear()
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=60000)
    assert seen == sorted(seen) and seen[-1] == 100, seen  # one bar over all rounds, never going back
    assert re.match(r"Done: encrypted / plain = \d+\.\d\d× \(95 %: \d+\.\d\d–\d+\.\d\d, 3 rounds\)",
                    dock.status.text()), dock.status.text()
    assert [table.item(r, 0).text() for r in range(table.rowCount())][0] == "total"
    assert table.horizontalHeaderItem(4).text() == "95 % interval"
    assert dock.results.history.count() == 2 and "3 rounds" in dock.results.history.currentText()
    assert "3 rounds (ABBA) + 1 warm-up · captures: off" in dock.results.note.text()
    dock.results.history.setCurrentIndex(0)  # the earlier single run comes back
    assert table.rowCount() == 6 and table.item(5, 0).text() == "total"


def test_run_with_capture_fills_the_page_view(qtbot, window):
    dock = window.workload_dock
    dock._spins["groups"].setValue(8)
    dock._spins["cache_pages"].setValue(30)
    dock.max_captures.setValue(25)
    dock.rounds.setValue(2)
    armed = []
    window.pump.subscribe(CaptureWindowState,
                          lambda b: armed.extend(e.state for e in b))
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=90000)
    assert "armed" in armed and armed[-1] == "disarmed"
    assert window.captures_dock.model.rowCount() == 25
    assert "not armed" in window.probe_status.armed_label.text()
    # the first capture is shown (decoded on a worker thread): hex on both sides and a decoded tree
    qtbot.waitUntil(lambda: window.capture_presenter.shown is not None, timeout=5000)
    assert window.page_view.after_view.data() and window.page_view.before_view.data()
    assert window.page_view.model.rowCount() > 0
    # the capture round is kept apart from the timed rounds, which ran with the probe disarmed
    titles = [dock.results.history.itemText(i) for i in range(dock.results.history.count())]
    assert len(titles) == 2 and "capture round (untimed)" in titles[0] and "2 rounds" in titles[1], titles
    assert "captures: separate round" in dock.results.note.text()
    # a second run numbers its captures on from the first: "#3" names one capture in the session
    dock.max_captures.setValue(5)
    dock.rounds.setValue(0)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=90000)
    model = window.captures_dock.model
    seqs = [model.row(i)[0].seq for i in range(model.rowCount())]
    assert seqs == list(range(1, 31)), seqs


def test_cancel_from_the_keyboard(qtbot, window):
    dock = window.workload_dock
    dock.capture.setChecked(False)
    dock._spins["groups"].setValue(5000)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "group" in dock.status.text(), timeout=30000)  # the warm-up round is under way
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=30000)
    assert dock.status.text().startswith("Cancelled")


def test_layout_is_saved_and_restored(qtbot, qsettings):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    win.captures_dock.hide()
    win.close()
    again = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(again)
    again.show()
    assert again.captures_dock.isHidden()
    again.close()


def test_a_layout_saved_on_a_bigger_screen_is_not_restored_past_this_one(qtbot, qsettings):
    """Saved at 1920×1080, opened on a smaller screen (offscreen's is 800×800): the default layout for
    this screen, not a window whose captures and status bar are off-screen."""
    from PySide6.QtCore import QSize

    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win._default_layout(QSize(1920, 1080))
    win.show()
    win.close()
    assert qsettings.value("layout/size") == QSize(1920, 1080)
    again = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(again)
    screen = again.screen().availableGeometry()
    assert again.width() <= screen.width() and again.height() <= screen.height(), again.size()
    again.close()


def test_watch_arms_the_probe_with_no_workload_and_cancels(qtbot, window):
    dock = window.workload_dock
    assert dock.watch_button.isEnabled()
    states = []
    window.pump.subscribe(CaptureWindowState, lambda b: states.extend(e.state for e in b))
    qtbot.mouseClick(dock.watch_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "armed" in states, timeout=30000)
    assert "ARMED" in window.probe_status.armed_label.text() and not dock.run_button.isEnabled()
    assert window.experiment.workload is None  # nothing runs: the target's own work is what is watched
    qtbot.keyClick(window, Qt.Key.Key_Escape)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=30000)
    assert states[-1] in ("disarmed", "failed") and "not armed" in window.probe_status.armed_label.text()
    # no workload result ends a watch: the dock says it ended, not "Running…" (issue #25 leftovers)
    assert dock.status.text().startswith("Watch ended") and "Running" not in dock.status.text(), dock.status.text()
    assert dock.progress.format() == "ended"


def test_a_window_that_outlives_its_workload_says_so(qtbot, window):
    dock = window.workload_dock
    dock._spins["groups"].setValue(2)
    dock._spins["ids_per_group"].setValue(100)
    dock.max_captures.setValue(100000)
    dock.rounds.setValue(0)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=60000)
    qtbot.waitUntil(lambda: "closed" in window.probe_status.stopped_label.text(), timeout=10000)
    assert "(the workload finished)" in window.probe_status.stopped_label.text()  # not "cancelled"
