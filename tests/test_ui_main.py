"""The main window with pytest-qt: run the workload from the dock, see progress, results and captures."""

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
    dock._spins["groups"].setValue(6)
    dock._spins["ids_per_group"].setValue(300)
    seen = []
    dock.progress.valueChanged.connect(seen.append)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    assert dock.cancel_button.isEnabled() and not dock.run_button.isEnabled()
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=60000)
    assert dock.progress.value() == 100
    assert any(0 < v < 100 for v in seen), seen  # it moved on the way
    assert dock.status.text().startswith("Done: encrypted / plain = ")
    phases = [dock.results.item(r, 0).text() for r in range(dock.results.rowCount())]
    assert phases == ["insert", "delete", "update", "select", "commit", "total"]
    assert "Insert = 1800" in dock.counts.text()
    assert window.captures_dock.model.rowCount() == 0


def test_run_with_capture_fills_the_page_view(qtbot, window):
    dock = window.workload_dock
    dock._spins["groups"].setValue(8)
    dock._spins["cache_pages"].setValue(30)
    dock.max_captures.setValue(25)
    armed = []
    window.pump.subscribe(CaptureWindowState,
                          lambda b: armed.extend(e.state for e in b))
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=90000)
    assert "armed" in armed and armed[-1] == "disarmed"
    assert window.captures_dock.model.rowCount() == 25
    assert "not armed" in window.probe_status.armed_label.text()
    # the first capture is shown: hex on both sides and a decoded tree
    assert window.page_view.after_view.data() and window.page_view.before_view.data()
    assert window.page_view.model.rowCount() > 0


def test_cancel_from_the_keyboard(qtbot, window):
    dock = window.workload_dock
    dock.capture.setChecked(False)
    dock._spins["groups"].setValue(5000)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.progress.value() > 0, timeout=30000)
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
