"""Every state says something true (issue #23 item 10): empty docks live and in replay, Run lesson only when a
lesson can start, a finished lesson and a cancelled A/B run."""

from __future__ import annotations

from PySide6.QtCore import Qt

from tdescope.app.events import ABResult
from tdescope.ui.docks.captures import EMPTY_TEXTS
from tdescope.ui.views.pageview import PLACEHOLDERS
from tdescope.ui.window.main_window import open_replay_window
from tdescope.ui.docks.workload import WorkloadDock

from test_ui_session import session_file  # noqa: F401 - the recorded session fixture


def test_the_empty_captures_dock_says_what_to_do_for_the_box_as_it_is(lab_window, qtbot):
    win = lab_window
    dock = win.workload_dock
    assert dock.capture.isChecked() and win.captures_dock.empty.text() == EMPTY_TEXTS["live"]
    assert "Tick" not in win.captures_dock.empty.text()
    dock.capture.setChecked(False)
    assert win.captures_dock.empty.text() == EMPTY_TEXTS["unticked"]
    dock.capture.setChecked(True)
    # Run lesson is for a connected, idle window: not while a workload runs
    lessons = win.lessons.dock
    assert lessons.select("block-before-after")
    qtbot.waitUntil(lessons.run_button.isEnabled, timeout=5000)
    dock.rounds.setValue(0)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    assert win.experiment is not None and not lessons.run_button.isEnabled()
    assert "a workload is running" in lessons.run_button.toolTip()
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=60000)
    assert lessons.run_button.isEnabled()


def test_a_replay_says_replay_and_runs_no_lesson(qtbot, qsettings, session_file):  # noqa: F811
    win = open_replay_window(str(session_file), qsettings)
    qtbot.addWidget(win)
    win.show()
    win.pump.drain()
    assert win.captures_dock.empty.text() == EMPTY_TEXTS["replay"]
    assert PLACEHOLDERS["replay"] in win.page_view._header.text()
    lessons = win.lessons.dock
    for i in range(lessons.list.count()):
        lessons.list.setCurrentRow(i)
        assert not lessons.run_button.isEnabled()
    assert "a replay runs nothing" in lessons.run_button.toolTip()
    win.shutdown()


def test_a_cancelled_ab_run_says_cancelled_not_zero_rounds(qtbot):
    dock = WorkloadDock()
    qtbot.addWidget(dock)
    dock.set_running(True)
    result = ABResult(0.0, "ab_dml", "A/B DML", {}, 5, 1, (), (), cancelled=True)
    dock.show_ab_result(result)
    assert dock.progress.value() == 100 and dock.progress.text() == "cancelled"
    assert dock.status.text() == "Cancelled — rounds that completed: no round completed"
    note = dock.results.note.text()
    assert "cancelled before any timed round" in note and "0 rounds" not in note and "only 0" not in note
    assert result.warnings() == ["cancelled before any timed round: no figure"]


def _row(seq: int, page_type: str, cells: int):
    from tdescope.app.events import PageCapture
    from tdescope.app.probe.capture_record import CaptureRecord

    cap = PageCapture(1.0 + seq, seq, "encryption_scheme_decrypt", "decrypt", seq, bytes(64), bytes(64), 1.0, "mariadb")
    return cap, CaptureRecord(seq, cap.ts, seq, cap.symbol, "decrypt", 64, 8.0, 1.0, page_type, cells, "", "", 1.0)


def test_the_first_capture_shown_is_a_page_of_user_rows(qtbot):
    """Issue #23 item 6: not the IBUF_BITMAP that came first, nor the change buffer's INDEX page."""
    from tdescope.ui.docks.captures import CapturesDock

    dock = CapturesDock()
    qtbot.addWidget(dock)
    dock.show()
    shown = []
    dock.captureSelected.connect(lambda cap, rec: shown.append(rec.page_type))
    dock.add([_row(1, "IBUF_BITMAP", 0), _row(2, "INDEX (change buffer)", 3)])
    assert shown == ["IBUF_BITMAP"]  # nothing better yet: the first one, for now
    dock.add([_row(3, "FSP_HDR", 0), _row(4, "INDEX", 12), _row(5, "INDEX", 9)])
    assert shown[-1] == "INDEX" and dock.proxy.mapToSource(dock.view.currentIndex()).row() == 3
    dock.view.selectRow(0)  # the user's choice stays
    dock.add([_row(6, "INDEX", 4)])
    assert dock.proxy.mapToSource(dock.view.currentIndex()).row() == 0


def test_the_page_type_comes_before_the_symbol_in_the_captures_table(qtbot):
    """Issue #23 item 2: in a narrow Captures dock the page type shows; the symbol, the same on every row
    of a run, comes last."""
    from tdescope.ui.docks.captures import CapturesDock

    dock = CapturesDock()
    qtbot.addWidget(dock)
    header = dock.view.horizontalHeader()
    names = [dock.model.headerData(header.logicalIndex(v), Qt.Orientation.Horizontal) for v in range(header.count())]
    assert names.index("Page type") < names.index("Symbol") == len(names) - 1
