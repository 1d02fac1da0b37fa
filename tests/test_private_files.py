"""Every file holding captured bytes or their decoding is 0600, every folder tdescope creates for one 0700,
whatever the umask (issue #27, item 1: a security hole, so these tests were committed failing first).

The commands run as a user runs them, with the loosest umask (0), into folders that do not exist yet:
reports (HTML, PDF, masked or not), ``capture --dump``, ``record``, session copies, and in the window
(pytest-qt) the autosave, Save As and Export report. ``--dump`` never replaces earlier dumps unasked.
"""

from __future__ import annotations

import os
import stat
import subprocess
import time
from pathlib import Path

import pytest

from conftest import TDESCOPE, assert_one_line_error
from tdescope.app.events import PageCapture
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta

MARKER = b"card-4111111111111111"
PLAIN = (MARKER * 60)[:1024]
#: How the plaintext's first bytes look in a report that includes them (its hex view).
PLAIN_HEX = " ".join(f"{b:02x}" for b in PLAIN[:16])


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _assert_private(path: Path, made_below: Path) -> None:
    """``path`` is 0600 and every folder between it and ``made_below`` (which tdescope created) is 0700."""
    assert path.is_file() and _mode(path) == 0o600, f"{path}: {oct(_mode(path))}"
    folder = path.parent
    while folder != made_below:
        assert _mode(folder) == 0o700, f"{folder}: {oct(_mode(folder))}"
        folder = folder.parent


def _run(*args, timeout=180) -> subprocess.CompletedProcess:
    """``tdescope ARGS`` with umask 0: without tdescope's own care every file would be 0666."""
    return subprocess.run([*TDESCOPE, *args], capture_output=True, text=True, timeout=timeout, umask=0,
                          stdin=subprocess.DEVNULL)


@pytest.fixture
def session(tmp_path) -> Path:
    """A lab session holding one capture whose plaintext carries MARKER."""
    path = tmp_path / "s.tds"
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(PageCapture(time.time(), 1, "sqlcipher_page_cipher", "decrypt", 2, os.urandom(1024), PLAIN,
                               20.0, "sqlcipher"))
    return path


@pytest.mark.parametrize("include", [False, True], ids=["masked", "plaintext"])
@pytest.mark.parametrize("suffix", ["html", "pdf"])
def test_reports_are_0600_in_new_0700_folders(session, tmp_path, suffix, include):
    here = tmp_path / f"case.{suffix}"
    result = _run("report", str(session), "-o", str(here), *(["--include-plaintext"] if include else []))
    assert result.returncode == 0, result.stderr
    _assert_private(here, tmp_path)
    out = tmp_path / "new" / "deeper" / f"case.{suffix}"
    result = _run("report", str(session), "-o", str(out), *(["--include-plaintext"] if include else []))
    assert result.returncode == 0, result.stderr
    _assert_private(out, tmp_path)
    if suffix == "html":
        assert (PLAIN_HEX in out.read_text()) is include
    # writing over an earlier, world-readable report leaves a private one
    out.chmod(0o644)
    again = _run("report", str(session), "-o", str(out), *(["--include-plaintext"] if include else []))
    assert again.returncode == 0, again.stderr
    assert _mode(out) == 0o600


def test_a_report_in_a_folder_others_can_read_says_so_in_one_line(session, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o755)
    result = _run("report", str(session), "-o", str(shared / "r.html"))
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "can be read by others" in line]
    assert len(notes) == 1 and str(shared) in notes[0], result.stderr
    assert _mode(shared / "r.html") == 0o600
    quiet = _run("report", str(session), "-o", str(tmp_path / "own" / "r.html"))
    assert "can be read by others" not in quiet.stderr


@pytest.mark.gdb
def test_dump_is_private_and_never_replaces_earlier_dumps_unasked(tmp_path):
    dump = tmp_path / "a" / "b"
    first = _run("capture", "--lab", "--count", "2", "--dump", str(dump))
    assert first.returncode == 0, first.stderr
    files = sorted(dump.iterdir())
    assert files
    for f in files:
        _assert_private(f, tmp_path)
    before = {f.name: f.read_bytes() for f in files}
    again = _run("capture", "--lab", "--count", "2", "--dump", str(dump))
    assert_one_line_error(again, f"{dump} already holds dumps")
    assert "--force" in again.stderr
    assert {f.name: f.read_bytes() for f in sorted(dump.iterdir())} == before  # untouched
    (dump / "notes.txt").write_text("mine")  # not a dump: --force leaves it
    forced = _run("capture", "--lab", "--count", "2", "--dump", str(dump), "--force")
    assert forced.returncode == 0, forced.stderr
    after = {f.name: f.read_bytes() for f in sorted(dump.iterdir()) if f.suffix == ".bin"}
    assert after and after != before and all(_mode(dump / name) == 0o600 for name in after)
    assert (dump / "notes.txt").read_text() == "mine"


@pytest.mark.gdb
def test_recorded_session_is_private_in_new_folders(tmp_path):
    sleeper = subprocess.Popen(["sleep", "60"])
    out = tmp_path / "x" / "y" / "s.tds"
    try:
        result = _run("record", "--pid", str(sleeper.pid), "--captures", "0", "--no-hotspots", "--seconds", "1",
                      "-o", str(out))
    finally:
        sleeper.kill()
    assert result.returncode == 0, result.stderr
    _assert_private(out, tmp_path)


def test_session_copies_are_private_whatever_the_umask(session, tmp_path):
    from tdescope.app.session.copy import copy_session

    old = os.umask(0)
    try:
        plain = tmp_path / "c" / "d" / "copy.tds"
        copy_session(session, plain)
        encrypted = tmp_path / "e" / "f" / "copy.tds"
        copy_session(session, encrypted, new_passphrase="pass phrase")
    finally:
        os.umask(old)
    _assert_private(plain, tmp_path)
    _assert_private(encrypted, tmp_path)


def test_window_autosave_save_as_and_export_report_are_private(qtbot, qsettings, tmp_path, monkeypatch):
    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow

    data_home = tmp_path / "data"  # does not exist: tdescope creates data/tdescope/sessions
    monkeypatch.setenv("XDG_DATA_HOME", str(data_home))
    old = os.umask(0)
    try:
        win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
        qtbot.addWidget(win)
        win.feed(PageCapture(time.time(), 1, "sqlcipher_page_cipher", "decrypt", 2, os.urandom(1024),
                             PLAIN, 20.0, "sqlcipher"))
        qtbot.waitUntil(lambda: win.recording.recorder is not None, timeout=10000)
        autosave = Path(win.recording.recorder.path)
        copy = win.files.save_as(str(tmp_path / "saved" / "copy.tds"))
        assert copy is not None
        qtbot.waitUntil(lambda: win.files.saving is None, timeout=10000)
        reports = []
        for name, include in (("masked.html", False), ("plain.html", True), ("masked.pdf", False),
                              ("plain.pdf", True)):
            out = tmp_path / "exported" / name
            win.files.export(str(out), include)
            # the report is built on the task runner and written on the GUI thread: keep the event loop running
            qtbot.waitUntil(lambda: out.exists() and out.stat().st_size > 0, timeout=30000)
            reports.append(out)
        win.shutdown()
    finally:
        os.umask(old)
    _assert_private(autosave, tmp_path)
    _assert_private(copy, tmp_path)
    for out in reports:
        _assert_private(out, tmp_path)
    # (a capture fed to a window with no target of its own is recorded without its plaintext: the privacy
    # default; which bytes a report shows is tests/test_report_redaction.py's subject)
