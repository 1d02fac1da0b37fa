"""The window's layout: it fits a 1280×720 projector, reflows on bigger screens, and a replay's
toolbar never comes back in a live window."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QSize, Qt
from PySide6.QtWidgets import QApplication

from conftest import replayed

from tdescope.app.engines import discover_engines
from tdescope.app.events import ABResult, PhaseTiming, RoundTime, WorkloadResult
from tdescope.app.ab.runner import summarize
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta
from tdescope.ui.window.layout import arrangement_for
from tdescope.ui.window.main_window import MainWindow, open_replay_window


@pytest.mark.parametrize("size, kind", [((1280, 720), "compact"), ((1366, 768), "compact"),
                                        ((1600, 1000), "medium"), ((1920, 1080), "wide")])
def test_arrangement_by_size(size, kind):
    assert arrangement_for(QSize(*size)) == kind


def _window(qtbot, qsettings, size):
    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win._default_layout(QSize(*size))
    win.show()
    qtbot.wait(50)
    return win


def test_compact_layout_fits_a_projector_with_everything_essential_on_screen(qtbot, qsettings):
    win = _window(qtbot, qsettings, (1280, 720))
    assert win.layout_kind == "compact"
    assert win.minimumSizeHint().width() <= 1280 and win.minimumSizeHint().height() <= 720
    assert win.width() <= 1280 and win.height() <= 720
    frame = win.rect()
    for widget in (win.statusBar(), win.workload_dock.run_button, win.workload_dock.results,
                   win.captures_dock, win.page_view):
        assert widget.isVisible(), widget
        top_left = widget.mapTo(win, widget.rect().topLeft())
        bottom_right = widget.mapTo(win, widget.rect().bottomRight())
        assert frame.contains(top_left) and frame.contains(bottom_right), (widget, top_left, bottom_right)
    assert win.captures_dock.height() >= 140  # several capture rows, not one
    assert not win.replay.replay_bar.isVisible()


def test_wide_layout_shows_both_hex_panes_whole(qtbot, qsettings):
    win = _window(qtbot, qsettings, (1920, 1080))
    assert win.layout_kind == "wide"
    for pane in (win.page_view.before_view, win.page_view.after_view):
        assert pane.content_width() <= pane.width() + 1, (pane.content_width(), pane.width())
    assert not win.observation.hotspots_dock.visibleRegion().isEmpty()
    assert win.page_view.panes.orientation() == Qt.Orientation.Horizontal  # side by side: there is room


@pytest.mark.parametrize("size", [(1280, 720), (1366, 768)])
def test_a_narrow_page_view_stacks_the_hex_panes_so_each_row_shows_its_ascii(qtbot, qsettings, size):
    """Side by side, a 1280-pixel screen cut both panes before their ASCII column: stacked, they are whole."""
    win = _window(qtbot, qsettings, size)
    assert win.page_view.width() < win.page_view.side_by_side_width()
    qtbot.waitUntil(lambda: win.page_view.panes.orientation() == Qt.Orientation.Vertical, timeout=3000)
    for view in (win.page_view.before_view, win.page_view.after_view):
        qtbot.waitUntil(lambda v=view: v.content_width() <= v.width() + 1, timeout=3000)
        assert view.ascii_rect(15).right() <= view.viewport().width(), "the ASCII column is cut"
        assert view.visible_rows() >= 5


def test_a_live_window_after_a_replay_shows_no_replay_toolbar(qtbot, qsettings, tmp_path):
    path = tmp_path / "r.tds"
    times = (RoundTime(1, "encrypted", {"total": 1.5}), RoundTime(1, "plain", {"total": 1.0}))
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(WorkloadResult(1.0, "ab_dml", {}, (PhaseTiming("encrypted", "total", 3.0),
                                                      PhaseTiming("plain", "total", 2.0)), {}))
        rec.record(ABResult(2.0, "ab_dml", "A/B DML", {}, 1, 1, times, summarize(times)))
    replay = open_replay_window(str(path), qsettings)
    qtbot.addWidget(replay)
    replay.show()
    assert replay.replay.replay_bar.isVisible()
    replay.replay.player.seek(10.0)
    replayed(qtbot, replay)
    qtbot.wait(20)
    assert replay.workload_dock.results.history.count() == 2  # the recorded A/B run is replayed too
    replay.close()  # saves its layout, the replay toolbar among it
    live = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(live)
    live.show()
    assert not live.replay.replay_bar.isVisible() and "REPLAY" not in live.windowTitle()


def test_workload_parameters_of_every_type_have_an_editor(qtbot):
    from tdescope.app.engines.api import Workload
    from tdescope.ui.docks.workload import WorkloadDock

    dock = WorkloadDock()
    qtbot.addWidget(dock)
    params = {"scale": 2, "seconds": 5, "database": "tdescope_pgbench", "create": False, "ratio": 0.5}
    dock.set_workloads([Workload("pgbench", "pgbench", "", params, lambda p, c: None)], [])
    assert dock.params() == params  # the database name came through (it was a KeyError before)
    dock._spins["database"].setText("other_db")
    dock._spins["create"].setChecked(True)
    assert dock.params()["database"] == "other_db" and dock.params()["create"] is True
    assert not dock.rounds.isEnabled()  # not an encrypted/plain comparison: one run


def test_window_messages_name_no_command_line_flags():
    from tdescope.app.errors import UserError
    from tdescope.ui.gui_thread.tasks import describe

    line = describe(UserError("pid 5 is the postmaster: probing it stops the server (--allow-critical overrides)"))
    assert "--" not in line and "Allow critical processes" in line


def test_a_lost_connection_offers_reconnect_and_reconnect_connects_again(qtbot, lab_window):
    from tdescope.app.events import LostConnection, Problem

    win = lab_window
    first = win.session.server_pid()
    # told by its class (issue #25 item 1): a Problem in the same words is only a line in the status bar
    win.feed(Problem(0.0, "workload", "workload ab_dml failed: the connection is closed"))
    qtbot.waitUntil(lambda: "connection is closed" in win.workload_dock.status.text(), timeout=5000)
    assert not win.engine_dock.reconnect.isVisibleTo(win)
    win.feed(LostConnection(0.0, "workload", "workload ab_dml failed: the connection is closed"))
    qtbot.waitUntil(lambda: win.engine_dock.reconnect.isVisibleTo(win), timeout=5000)
    assert "Connection lost" in win.engine_dock.title.text()
    qtbot.mouseClick(win.engine_dock.reconnect, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: win.session is not None and win.workload_dock.run_button.isEnabled(), timeout=30000)
    assert win.session.server_pid() != first  # a new lab: nothing else restarted
    assert not win.engine_dock.reconnect.isVisibleTo(win)


def test_the_hotspot_sampling_rate_is_a_choice_in_the_observe_menu(qtbot, lab_window):
    from tdescope.ui.window.menus import Menu

    win = lab_window
    menu = next(a.menu() for a in win.menus[Menu.OBSERVE].actions() if a.menu() is not None)
    choices = {a.text(): a for a in menu.actions()}
    from tdescope.app.hotspots.perf_record import DEFAULT_HZ

    assert any(t.startswith(f"{DEFAULT_HZ} Hz") and a.isChecked() for t, a in choices.items())
    next(a for t, a in choices.items() if t.startswith("99 Hz")).trigger()
    qtbot.waitUntil(lambda: win.observation.observation is not None
                    and win.observation.observation.frequency == 99, timeout=10000)


def test_long_status_texts_wrap_and_the_docks_keep_their_width(qtbot, qsettings):
    """Issue #23 item 4: the status lines of the left tab group grow as a run goes on; they wrap, so no
    dock's least width grows and the page view keeps its room."""
    win = _window(qtbot, qsettings, (1280, 720))
    obs = win.observation
    docks = [win.workload_dock, win.engine_dock, obs.hotspots_dock, obs.waits_dock, win.lessons.dock]

    def least_widths() -> dict:
        QApplication.sendPostedEvents()  # the layouts' requests: minimum sizes are computed again
        for dock in docks:
            dock.widget().layout().activate()
        return {d.objectName(): d.minimumSizeHint().width() for d in docks}

    before = least_widths()
    long = "1300 samples · whole run · top 4 events (638 OS samples shown) " * 4
    for label in (obs.waits_dock.summary, obs.hotspots_dock.status, win.workload_dock.status,
                  win.lessons.dock.status):
        label.setText(long)
    after = least_widths()
    assert all(after[name] <= before[name] for name in before), (before, after)
    win.shutdown()


@pytest.mark.parametrize("size", [(1280, 720), (1920, 1080)])
def test_every_column_of_the_ab_table_shows_in_the_workload_dock(qtbot, qsettings, size):
    """Issue #25 leftovers: at 1280×720 (and 1920×1080) the long header words pushed the "95 % interval"
    column out of the dock. Short words (the full ones as tooltips) keep every column in view."""
    win = _window(qtbot, qsettings, size)
    win.workload_dock.raise_()
    phases = {"total": 9.5, "insert": 4.04, "delete": 1.39, "update": 1.2, "select": 1.1, "commit": 0.63}
    times = tuple(RoundTime(n, side, {p: s * (1.6 if side == "encrypted" else 1.0) * (1 + n / 50)
                                      for p, s in phases.items()})
                  for n in range(4) for side in ("encrypted", "plain"))
    win.workload_dock.show_ab_result(ABResult(2.0, "ab_dml", "A/B DML (seed 000)", {}, 3, 1, times, summarize(times)))
    view = win.workload_dock.results
    view.tabs.setCurrentWidget(view.table)
    qtbot.wait(50)
    table = view.table
    header, width = table.horizontalHeader(), table.viewport().width()
    assert table.isVisible() and header.count() == 5
    for c in range(header.count()):
        left = header.sectionViewportPosition(c)
        assert 0 <= left < width, (c, header.model().headerData(c, Qt.Orientation.Horizontal), left, width)
        assert left + header.sectionSize(c) <= width + 1, (c, left, header.sectionSize(c), width)  # whole, too
    assert [table.horizontalHeaderItem(c).toolTip() for c in range(5)][-1] == "95 % interval"
    assert table.horizontalHeaderItem(1).toolTip() == "Encrypted (s, median)"  # the full words stay
    win.shutdown()
