"""Opening an encrypted session in the GUI: a password dialog, then replay; a wrong passphrase is one line."""

import os

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QInputDialog, QLineEdit, QMessageBox

from tdescope.app.engines import discover_engines
from tdescope.app.errors import UserError
from tdescope.app.events import PageCapture
from tdescope.app.session.notes import NoteTarget
from tdescope.app.session.file import SessionRecorder, is_encrypted
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta
from tdescope.ui.window.main_window import MainWindow

PASSPHRASE = "class 'room' pass"


_generation = [0]  # dialog pollers stop when their test is over


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    _generation[0] += 1
    yield
    # and at its end: a poller left running walked the top-level widgets of the next test in this worker
    # (another file's, with --dist load) while they were being deleted: a segfault
    _generation[0] += 1


@pytest.fixture
def encrypted_file(tmp_path):
    path = tmp_path / "secret.tds"
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)"), PASSPHRASE) as rec:
        for i in range(3):
            rec.record(PageCapture(1_700_000_000.0 + i, i + 1, "sqlcipher_page_cipher", "decrypt", 10 + i,
                                   os.urandom(1024), bytes(1024), 20.0, "sqlcipher"))
    return path


def _answer(text: str, seen: dict) -> None:
    """Type ``text`` into the password dialog once it is up, then dismiss the message box that may follow."""

    mine = _generation[0]

    def step() -> None:
        if _generation[0] != mine:
            return
        for w in QApplication.topLevelWidgets():
            if isinstance(w, QInputDialog) and w.isVisible() and "echo" not in seen:
                seen["echo"] = w.textEchoMode()
                w.grab().save("/tmp/tdescope_passphrase_dialog.png")
                w.setTextValue(text)
                w.accept()
            elif isinstance(w, QMessageBox) and w.isVisible():
                seen["message"] = w.text()
                w.accept()
                return
        seen["steps"] = seen.get("steps", 0) + 1
        if seen["steps"] < 100:  # give up after ~2 s: no poller may outlive its test
            QTimer.singleShot(20, step)

    QTimer.singleShot(20, step)


def test_encrypted_session_opens_after_the_passphrase(qtbot, qsettings, encrypted_file):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    seen: dict = {}
    _answer("wrong one", seen)
    assert win.files.open_path(encrypted_file) is None
    assert seen["echo"] == QLineEdit.EchoMode.Password
    assert seen["message"] == f"wrong passphrase for {encrypted_file}"
    assert win.files.mode != "replay"
    seen.clear()
    _answer(PASSPHRASE, seen)
    assert win.files.open_path(encrypted_file) is win
    assert win.files.mode == "replay" and "message" not in seen
    store = win._note_store()  # notes go to the encrypted file too
    assert store is not None and store.all() == []
    store.close()
    win.shutdown()


def test_save_as_keeps_an_encrypted_replay_encrypted(qtbot, qsettings, encrypted_file, tmp_path):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.replay.enter_replay(encrypted_file, PASSPHRASE)
    copy = win.files.save_as(str(tmp_path / "copy"))
    qtbot.waitUntil(lambda: win.files.saving is None, timeout=10000)
    assert copy == tmp_path / "copy.tds" and is_encrypted(copy)
    with SessionReader(copy, passphrase=PASSPHRASE) as reader:
        assert reader.counts() == {"PageCapture": 3}
    with pytest.raises(UserError, match="wrong passphrase"):
        SessionReader(copy, passphrase="not it")
    win.shutdown()


def _type_passphrases(texts: list[str], seen: dict) -> None:
    """Answer the next password dialogs with ``texts`` in turn, and a message box if one follows."""
    left = list(texts)
    mine = _generation[0]

    def step() -> None:
        if _generation[0] != mine:
            return
        for w in QApplication.topLevelWidgets():
            if isinstance(w, QInputDialog) and w.isVisible() and left:
                seen.setdefault("echo", []).append(w.textEchoMode())
                w.setTextValue(left.pop(0))
                w.accept()
            elif isinstance(w, QMessageBox) and w.isVisible():
                seen["message"] = w.text()
                w.accept()
                return
        if left or "message" not in seen:
            QTimer.singleShot(20, step)

    QTimer.singleShot(20, step)


def _capture(i: int) -> PageCapture:
    return PageCapture(1_700_000_000.0 + i, i + 1, "sqlcipher_page_cipher", "decrypt", 10 + i,
                       os.urandom(1024), b"plaintext row " * 70, 20.0, "sqlcipher")


def test_encrypt_recording_encrypts_the_autosave_in_place_and_goes_on_recording(qtbot, qsettings):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    win.feed(_capture(0))
    qtbot.waitUntil(lambda: win.recording.recorder is not None and win.recording.recorder.written == 1, timeout=5000)
    path = win.recording.recorder.path
    assert not is_encrypted(path)
    store = win._note_store()
    store.add(NoteTarget("free", ts=1_700_000_000.0), "before encrypting")

    seen: dict = {}
    _type_passphrases(["one", "another"], seen)  # typed differently: nothing is encrypted
    assert win.recording.encrypt_recording() is False
    assert seen.get("message") == "The passphrases differ; nothing was encrypted.", seen
    assert not is_encrypted(path)

    seen = {}
    _type_passphrases([PASSPHRASE, PASSPHRASE], seen)
    assert win.recording.encrypt_recording() is True
    assert seen["echo"] == [QLineEdit.EchoMode.Password] * 2
    win.feed(_capture(1))
    win.notes.dock.store.add(NoteTarget("free", ts=1_700_000_001.0), "after encrypting")
    qtbot.waitUntil(lambda: win.recording.recorder.written == 2, timeout=5000)
    win.shutdown()
    assert is_encrypted(path)
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(path.name)) == [path.name]
    with SessionReader(path, passphrase=PASSPHRASE) as reader:
        assert reader.counts() == {"PageCapture": 2}
        assert [n.text for n in reader.notes()] == ["before encrypting", "after encrypting"]


def test_a_window_told_to_encrypt_first_never_writes_a_plain_file(qtbot, qsettings):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    assert win.recording.encrypt_recording(passphrase=PASSPHRASE)  # what `tdescope gui --encrypt` does
    win.feed(_capture(0))
    qtbot.waitUntil(lambda: win.recording.recorder is not None and win.recording.recorder.written == 1, timeout=5000)
    path = win.recording.recorder.path
    assert is_encrypted(path) and win.recording.recorder.encrypted
    win.shutdown()
    with SessionReader(path, passphrase=PASSPHRASE) as reader:
        assert reader.counts() == {"PageCapture": 1}


def _file_action(win, text: str):
    return next(a for a in win.menuBar().actions()[0].menu().actions() if a.text() == text)


def test_the_file_menu_actions_ask_before_they_write(qtbot, qsettings, tmp_path, monkeypatch):
    """Through the real QActions: `triggered` passes `checked`, which must not become a path
    (Save As once wrote ./False.tds) or a passphrase (Encrypt Recording said "empty")."""
    from PySide6.QtWidgets import QFileDialog

    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    win.feed(_capture(0))
    qtbot.waitUntil(lambda: win.recording.recorder is not None and win.recording.recorder.written == 1, timeout=5000)
    monkeypatch.setattr(QFileDialog, "getSaveFileName", lambda *a, **k: (str(tmp_path / "saved.tds"), ""))
    monkeypatch.chdir(tmp_path)
    _file_action(win, "Save &As…").trigger()
    qtbot.waitUntil(lambda: win.files.saving is None, timeout=10000)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix == ".tds") == ["saved.tds"]

    seen: dict = {}
    _type_passphrases([PASSPHRASE, PASSPHRASE], seen)
    _file_action(win, "En&crypt Recording…").trigger()
    assert seen["echo"] == [QLineEdit.EchoMode.Password] * 2 and "message" not in seen
    path = win.recording.recorder.path
    win.shutdown()
    assert is_encrypted(path)
    assert not list(path.parent.glob("*.part"))
