"""Opening an encrypted session in the GUI: a password dialog, then replay; a wrong passphrase is one line."""

import os

import pytest
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QInputDialog, QLineEdit, QMessageBox

from tdescope.app.engines import discover_engines
from tdescope.app.events import PageCapture
from tdescope.app.session_file import SessionRecorder
from tdescope.app.session_meta import SessionMeta
from tdescope.ui.main_window import MainWindow

PASSPHRASE = "class 'room' pass"


@pytest.fixture(autouse=True)
def data_home(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


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

    def step() -> None:
        for w in QApplication.topLevelWidgets():
            if isinstance(w, QInputDialog) and w.isVisible():
                seen["echo"] = w.textEchoMode()
                w.grab().save("/tmp/tdescope_passphrase_dialog.png")
                w.setTextValue(text)
                w.accept()
            elif isinstance(w, QMessageBox) and w.isVisible():
                seen["message"] = w.text()
                w.accept()
                return
        QTimer.singleShot(20, step)

    QTimer.singleShot(20, step)


def test_encrypted_session_opens_after_the_passphrase(qtbot, qsettings, encrypted_file):
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    seen: dict = {}
    _answer("wrong one", seen)
    assert win.sessions.open_path(encrypted_file) is None
    assert seen["echo"] == QLineEdit.EchoMode.Password
    assert seen["message"] == f"wrong passphrase for {encrypted_file}"
    assert win.sessions.mode != "replay"
    seen.clear()
    _answer(PASSPHRASE, seen)
    assert win.sessions.open_path(encrypted_file) is win
    assert win.sessions.mode == "replay" and "message" not in seen
    store = win.sessions._ensure_store()  # notes go to the encrypted file too
    assert store is not None and store.all() == []
    store.close()
    win.shutdown()
