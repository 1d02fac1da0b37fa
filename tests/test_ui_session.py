"""Sessions in the GUI (pytest-qt): replay drives the same docks, notes with undo, autosave, drag and drop."""

import os
import threading
import time

import pytest
from PySide6.QtCore import QMimeData, QPoint, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent

from conftest import replayed

from tdescope.app.engines import discover_engines
from tdescope.app.events import CaptureWindowState, Marker, PageCapture, PhaseTiming, WorkloadProgress, WorkloadResult
from tdescope.app.session.notes import NoteStore, NoteTarget
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta
from tdescope.ui.window.main_window import MainWindow, open_replay_window
from tdescope.ui.window.menus import Menu


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    return tmp_path / "data"


@pytest.fixture
def session_file(tmp_path):
    path = tmp_path / "class.tds"
    t0 = 1_700_000_000.0
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        for i in range(5):
            rec.record(WorkloadProgress(t0 + i * 0.5, "ab_dml", "encrypted", i + 1, 5, f"group {i + 1}/5"))
            rec.record(PageCapture(t0 + i * 0.5 + 0.1, i + 1, "sqlcipher_page_cipher", "decrypt", 10 + i,
                                   os.urandom(1024), bytes(1024), 20.0, "sqlcipher"))
        rec.record(WorkloadResult(t0 + 3.0, "ab_dml", {"groups": 5},
                                  (PhaseTiming("encrypted", "total", 3.0), PhaseTiming("plain", "total", 2.0)),
                                  {"encrypted": {"Insert": 5}}))
    return path


@pytest.fixture
def replay(qtbot, qsettings, session_file):
    win = open_replay_window(str(session_file), qsettings)
    qtbot.addWidget(win)
    win.show()
    yield win
    win.shutdown()


def settle(qtbot, win):
    replayed(qtbot, win)  # events are read from the file in the feeder's process
    qtbot.wait(20)
    qtbot.waitUntil(lambda: win.capture_presenter.settled, timeout=5000)  # the selected capture decoded


def test_replay_drives_the_captures_dock(qtbot, replay, data_home):
    win, player = replay, replay.replay.player
    assert win.windowTitle().startswith("REPLAY — class.tds")
    assert win.replay.replay_bar.isVisible() and win.replay.replay_bar.banner.text().strip() == "REPLAY"
    assert not win.workload_dock.run_button.isEnabled() and win.session is None
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 0  # only the first progress event is at t0
    player.seek(1.2)
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 3
    assert win.page_view.before_view.data()  # the first capture is shown, as live
    player.seek(0.3)  # back: views are cleared and replayed up to the new position
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 1
    player.set_speed(None)
    qtbot.keyClick(win, Qt.Key.Key_Space)  # play
    qtbot.waitUntil(lambda: not player.playing, timeout=5000)
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 5
    assert win.workload_dock.status.text().startswith("Done: encrypted / plain = 1.50")
    assert win.replay.replay_bar.slider.value() == win.replay.replay_bar.slider.maximum()
    # replayed events pass through the window's hub but a replay records nothing
    assert win.recording.recorder is None and not (data_home / "tdescope" / "sessions").exists()


def test_captures_clicked_through_fast_are_decoded_off_the_gui_thread_and_the_last_one_shows(qtbot, replay):
    """Issue #25, item 5: the page view's decoding never runs on the GUI thread again (MariaDB's may run
    SQL under the session lock), and a click that came later is never replaced by an earlier one."""
    win, player = replay, replay.replay.player
    inner, threads = win.decoder, []

    class Watched:  # the window's own decoder, noting where it runs
        def decode(self, data, pgno=-1, context=None):
            threads.append(threading.current_thread())
            return inner.decode(data, pgno, context)

    player.seek(player.duration)
    settle(qtbot, win)
    win.decoder = Watched()
    view = win.captures_dock.view
    for row in range(win.captures_dock.model.rowCount()):
        qtbot.mouseClick(view.viewport(), Qt.MouseButton.LeftButton, pos=view.visualRect(view.model().index(row, 0)).center())
    last = win.captures_dock.model.row(win.captures_dock.proxy.mapToSource(view.currentIndex()).row())[0]
    settle(qtbot, win)
    assert threads and threading.main_thread() not in threads
    assert win.capture_presenter.shown is last and f"capture #{last.seq}" in win.page_view._header.text()


def test_notes_add_edit_undo_redo(qtbot, replay, session_file):
    win, notes = replay, replay.notes.dock
    replay.replay.player.seek(replay.replay.player.duration)
    settle(qtbot, win)
    win.captures_dock.view.selectRow(2)
    settle(qtbot, win)
    win.page_view.after_view.set_selection(16, 32)
    targets = win.notes.targets()
    assert [t.kind for t in targets][:2] == ["bytes", "capture"]
    assert targets[0].seq == 3 and (targets[0].start, targets[0].end, targets[0].side) == (16, 32, "after")
    assert notes.add_note(targets[0], "zeros where the ciphertext was")
    assert win.statusBar().currentMessage() == "Note added on capture #3, after bytes 0x0010–0x001f (Ctrl+Z undoes it)"
    assert notes.selected_note().text == "zeros where the ciphertext was" and notes.isVisible()
    assert notes.add_note(NoteTarget("free"), "ask the class why")
    assert [n.text for n in notes.notes] == ["zeros where the ciphertext was", "ask the class why"]
    notes.edit_note(notes.notes[0], "plaintext: zeros")
    assert notes.tree.topLevelItem(0).text(2) == "plaintext: zeros"
    notes.undo_stack.undo()
    assert notes.notes[0].text == "zeros where the ciphertext was"
    notes.delete_note(notes.notes[1])
    assert len(notes.notes) == 1
    notes.undo_stack.undo()  # the deleted note comes back under its id
    notes.undo_stack.undo()  # and the edit was already undone: now undo the second add
    assert [n.text for n in notes.notes] == ["zeros where the ciphertext was"]
    notes.undo_stack.redo()
    assert len(notes.notes) == 2
    undo = next(a for a in win.menus[Menu.EDIT].actions() if a.text().startswith("&Undo"))
    assert undo.shortcut().toString() == "Ctrl+Z"
    stored = NoteStore(session_file)
    assert [n.text for n in stored.all()] == ["zeros where the ciphertext was", "ask the class why"]
    assert stored.all()[0].target.describe() == "capture #3, after bytes 0x0010–0x001f"
    stored.close()


def test_activating_a_note_goes_past_its_capture_and_selects_its_bytes(qtbot, replay):
    win, notes = replay, replay.notes.dock
    player = win.replay.player
    player.seek(player.duration)
    settle(qtbot, win)
    win.captures_dock.view.selectRow(2)
    settle(qtbot, win)
    win.page_view.after_view.set_selection(16, 32)
    assert notes.add_note(win.notes.targets()[0], "zeros where the ciphertext was")
    player.seek(0.0)  # back to the start: capture #3 is not in the views yet
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 0
    notes.noteActivated.emit(notes.notes[0])  # what a double-click on it does
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 3  # the replay went just past the capture
    index = win.captures_dock.proxy.mapToSource(win.captures_dock.view.currentIndex())
    assert win.captures_dock.model.row(index.row())[0].seq == 3
    assert win.page_view.after_view.selection() == (16, 32)
    timeline = win.observation.timeline_dock
    qtbot.waitUntil(lambda: len(timeline.notes.getData()[0]) == 1, timeout=3000)  # and the note is on the timeline


def test_replay_shows_the_state_at_the_slider_position(qtbot, qsettings, tmp_path):
    path = tmp_path / "armed.tds"
    t0 = 1_700_000_000.0
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(CaptureWindowState(t0, state="armed", backend="ebpf"))
        for i in range(4):
            rec.record(WorkloadProgress(t0 + 0.5 + i * 0.5, "ab_dml", "encrypted", i + 1, 4))
        rec.record(CaptureWindowState(t0 + 2.5, state="disarmed", captures=0, backend="ebpf", message="max captures"))
        rec.record(WorkloadResult(t0 + 3.0, "ab_dml", {}, (PhaseTiming("encrypted", "total", 3.0),
                                                           PhaseTiming("plain", "total", 2.0)), {}))
    win = open_replay_window(str(path), qsettings)
    qtbot.addWidget(win)
    win.show()
    badge = win.probe_status.armed_label
    player = win.replay.player
    player.seek(1.0)
    settle(qtbot, win)
    assert badge.text().strip() == "REPLAY · was armed · eBPF"  # never the red ARMED of a live probe
    assert win.workload_dock.results.history.count() == 0  # the result is not there yet
    assert 0 < win.workload_dock.progress.value() < 100
    player.seek(player.duration)
    settle(qtbot, win)
    assert badge.text().strip() == "REPLAY · not armed then"
    assert win.workload_dock.results.history.count() == 1
    player.seek(1.0)  # back again: the result goes, the badge comes back
    settle(qtbot, win)
    assert win.workload_dock.results.history.count() == 0 and "was armed" in badge.text()
    win.shutdown()


def test_live_events_are_recorded_to_the_autosave_file(qtbot, qsettings, data_home, tmp_path):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    t = time.time()
    for i in range(10):
        win.live.publish(WorkloadProgress(t + i / 10, "ab_dml", "plain", i + 1, 10))
    win.feed(PageCapture(t + 1, 1, "sqlcipher_page_cipher", "decrypt", 2, os.urandom(512), bytes(512)))
    qtbot.waitUntil(lambda: win.recording.recorder is not None, timeout=5000)
    path = win.recording.recorder.path
    assert path.parent == data_home / "tdescope" / "sessions"
    copy = win.files.save_as(str(tmp_path / "copy.tds"))
    qtbot.waitUntil(lambda: win.files.saving is None, timeout=10000)  # copied on a worker thread
    assert win.statusBar().currentMessage() == f"Saved a copy to {copy}"
    with SessionReader(copy) as reader:
        assert reader.summary().counts == {"workload_progress": 10, "capture": 1}
        assert reader.meta.engine == "sqlcipher"
    qtbot.waitUntil(lambda: win.notes.dock.store is not None, timeout=5000)
    win.shutdown()
    with SessionReader(path) as reader:
        assert reader.summary().counts["capture"] == 1


def test_dropping_a_tds_opens_it_in_replay(qtbot, qsettings, session_file):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(session_file))])
    drop = QDropEvent(QPointF(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    # QApplication.sendEvent drops a synthetic QDropEvent without a drag in progress, so hand it to the
    # window's event filter as Qt's drag manager would
    enter = QDragEnterEvent(QPoint(50, 50), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    assert win.files.eventFilter(win, enter) and enter.isAccepted()
    assert win.files.eventFilter(win, drop)
    assert win.files.mode == "replay" and "REPLAY" in win.windowTitle()
    win.files.new()
    assert win.files.mode == "idle" and not win.replay.replay_bar.isVisible()
    settle(qtbot, win)
    assert win.captures_dock.model.rowCount() == 0
    win.shutdown()


@pytest.fixture
def two_runs(tmp_path):
    """A session of two runs 200 s apart, each with captures, and a note on a capture of the second."""
    path = tmp_path / "two-runs.tds"
    t0 = 1_700_000_000.0
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        for run, start in ((1, t0), (2, t0 + 200.0)):
            rec.record(Marker(start, f"ab_dml run {run} start"))
            for i in range(3):
                rec.record(PageCapture(start + 1 + i, 3 * run + i, "sqlcipher_page_cipher", "decrypt", 10 + i,
                                       os.urandom(1024), bytes(1024), 20.0, "sqlcipher"))
            rec.record(Marker(start + 5.0, f"ab_dml run {run} end"))
    store = NoteStore(path)
    store.add(NoteTarget("capture", ts=t0 + 202.0, seq=7), "the plaintext of page 11")
    store.close()
    return path, t0


def test_clicking_a_note_moves_the_slider_the_timeline_and_the_views_together(qtbot, qsettings, two_runs):
    """Issue #23 item 9: one click on a note seeks the replay to it; the slider, the play head and the
    timeline's visible range (the run it falls in) follow, and its capture is shown."""
    path, t0 = two_runs
    win = open_replay_window(str(path), qsettings)
    qtbot.addWidget(win)
    win.resize(1280, 720)
    win.show()
    timeline, notes, bar = win.observation.timeline_dock, win.notes.dock, win.replay.replay_bar
    timeline.show()
    notes.show()
    notes.raise_()
    settle(qtbot, win)
    timeline.refresh(force=True)
    assert timeline.plot.viewRange()[0][1] < 150  # at the start: the first run's view
    item = notes.tree.topLevelItem(0)
    rect = notes.tree.visualItemRect(item)
    qtbot.mouseClick(notes.tree.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
    settle(qtbot, win)
    player = win.replay.player
    assert abs(player.position - 202.0) < 0.01
    assert bar.slider.value() == int(player.position * 1000)
    (x0, x1), _ = timeline.plot.viewRange()
    assert x0 <= 202.0 <= x1 and x0 > 150, (x0, x1)  # the second run, not the old empty view
    assert timeline.head.isVisible() and abs(timeline.head.value() - player.position) < 0.01
    index = win.captures_dock.proxy.mapToSource(win.captures_dock.view.currentIndex())
    assert win.captures_dock.model.row(index.row())[0].seq == 7
    win.shutdown()


def test_clicking_the_slider_track_jumps_there(qtbot, qsettings, two_runs):
    path, _t0 = two_runs
    win = open_replay_window(str(path), qsettings)
    qtbot.addWidget(win)
    win.resize(1280, 720)
    win.show()
    slider, player, timeline = win.replay.replay_bar.slider, win.replay.player, win.observation.timeline_dock
    qtbot.waitUntil(lambda: slider.width() > 100, timeout=3000)
    qtbot.mouseClick(slider, Qt.MouseButton.LeftButton, pos=QPoint(slider.width() * 9 // 10, slider.height() // 2))
    settle(qtbot, win)
    assert player.position > 0.6 * player.duration  # a jump, not one page step (a tenth) toward the click
    assert slider.value() == int(player.position * 1000)
    (x0, x1), _ = timeline.plot.viewRange()
    assert x0 <= player.position <= x1
    win.shutdown()


def test_a_closed_replay_window_is_freed(qtbot, replay, session_file, monkeypatch):
    """Issue #27, item 15: replay windows opened beside a live one were kept in ``replay_windows`` for
    the life of the workbench; closed, one is deleted, forgotten and collected."""
    import gc
    import weakref

    monkeypatch.setattr(replay.files, "_is_live", lambda: True)  # a live window opens replays beside it
    opened = replay.files.open_path(session_file)
    assert opened is not None and opened is not replay and opened in replay.files.replay_windows
    dead = weakref.ref(opened)
    opened.close()
    del opened
    qtbot.waitUntil(lambda: replay.files.replay_windows == [], timeout=10000)

    def freed():
        gc.collect()  # on the GUI thread, as the workbench's collector does
        return dead() is None

    qtbot.waitUntil(freed, timeout=10000)
