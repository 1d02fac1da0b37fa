"""Encrypted session files (SQLCipher), as a user meets them: record from the lab with --encrypt, info, report."""

import json
import os
import subprocess
import sys
import time
import zlib

import pytest

from conftest import wait_for
from tdescope.app.errors import UserError
from tdescope.app.session.notes import NoteStore, NoteTarget
from tdescope.app.session.file import is_encrypted
from tdescope.app.session.reader import SessionReader

TDESCOPE = [sys.executable, "-m", "tdescope"]
#: A row value the lab's workload writes into its pages.
PLAINTEXT_MARKER = b"abc_1"
#: Quotes and non-ASCII on purpose: PRAGMA key must quote it safely.
PASSPHRASE = "Tr0ub4dor 'n\" Ünïcode-7731"
RECORD = ["record", "--lab", "sqlcipher", "--captures", "5", "--seconds", "5", "--no-hotspots"]


def run(*args, stdin: str | None = None, timeout=120):
    return subprocess.run([*TDESCOPE, *args], input=stdin if stdin is not None else "", capture_output=True,
                          text=True, timeout=timeout)


def _raw(folder) -> bytes:
    """Every byte of every file in ``folder`` (the .tds and any -wal/-shm left beside it)."""
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def _readable(raw: bytes) -> bytes:
    """``raw`` plus every zlib stream found in it inflated: captures are stored zlib'd, so an
    attacker with the file reads them this way, without any tdescope or SQLite code."""
    out = [raw]
    at = raw.find(b"\x78")
    while at != -1:
        if raw[at + 1:at + 2] in (b"\x01", b"\x5e", b"\x9c", b"\xda"):
            try:
                out.append(zlib.decompressobj().decompress(raw[at:at + 65536]))
            except zlib.error:
                pass
        at = raw.find(b"\x78", at + 1)
    return b"".join(out)


@pytest.fixture(scope="module")
def encrypted(tmp_path_factory):
    """An encrypted lab recording; also the command line its record process had."""
    folder = tmp_path_factory.mktemp("enc")
    path = folder / "x.tds"
    proc = subprocess.Popen([*TDESCOPE, *RECORD, "--encrypt", "-o", str(path)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def execed() -> bytes:  # the command line once exec has happened (before, it is the parent python's)
        cmdline = open(f"/proc/{proc.pid}/cmdline", "rb").read()
        return cmdline if b"--encrypt" in cmdline else b""

    cmdline = wait_for(execed, timeout=10, interval=0.01, what="the exec of the record command")
    out, err = proc.communicate(PASSPHRASE + "\n", timeout=120)
    assert proc.returncode == 0, err
    return path, cmdline, out + err


def test_encrypted_file_holds_no_plaintext_and_plain_one_does(encrypted, tmp_path):
    path, cmdline, output = encrypted
    head = path.read_bytes()[:16]
    assert head != b"SQLite format 3\x00" and is_encrypted(path)
    raw = _raw(path.parent)
    assert PLAINTEXT_MARKER not in _readable(raw) and b"PageCapture" not in raw
    # control: the same recording unencrypted does hold the marker, so the check above can fail
    plain = tmp_path / "plain.tds"
    result = run(*RECORD, "-o", str(plain))
    assert result.returncode == 0, result.stderr
    assert plain.read_bytes()[:16] == b"SQLite format 3\x00" and not is_encrypted(plain)
    plain_raw = _raw(tmp_path)
    assert PLAINTEXT_MARKER in _readable(plain_raw) and b"PageCapture" in plain_raw
    # the passphrase went through stdin only: not in argv, the file, or what was printed
    secret = PASSPHRASE.encode()
    assert secret not in cmdline and b"--encrypt" in cmdline
    assert secret not in raw and PASSPHRASE not in output


def test_info_needs_the_right_passphrase(encrypted):
    path, _, _ = encrypted
    with SessionReader(path, writable=False, passphrase=PASSPHRASE) as reader:
        counts = reader.summary().counts
    assert counts["capture"] == 5 and counts["marker"] >= 2
    info = run("info", str(path), "--json", stdin=PASSPHRASE + "\n")
    assert info.returncode == 0, info.stderr
    assert json.loads(info.stdout)["counts"] == counts
    for stdin, why in (("", "is encrypted: give its passphrase"), ("not it\n", "wrong passphrase for")):
        bad = run("info", str(path), stdin=stdin)
        assert bad.returncode != 0 and bad.stdout == ""
        lines = bad.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and "corrupt" not in lines[0] and "damaged" not in lines[0], lines


def test_report_with_the_passphrase(encrypted, tmp_path):
    path, _, _ = encrypted
    out = tmp_path / "r.html"
    result = run("report", str(path), "-o", str(out), stdin=PASSPHRASE + "\n")
    assert result.returncode == 0, result.stderr
    html = out.read_text()
    assert "<html" in html.lower() and len(html) > 10000
    assert PASSPHRASE not in html and PASSPHRASE not in result.stderr
    wrong = run("report", str(path), "-o", str(tmp_path / "w.html"), stdin="nope\n")
    assert wrong.returncode != 0 and "wrong passphrase" in wrong.stderr
    assert not (tmp_path / "w.html").exists()


def test_library_refuses_without_or_with_a_wrong_passphrase(encrypted):
    path, _, _ = encrypted
    with pytest.raises(UserError, match="is encrypted: give its passphrase"):
        SessionReader(path)
    with pytest.raises(UserError, match="wrong passphrase for"):
        SessionReader(path, passphrase="wrong")
    with pytest.raises(UserError, match="wrong passphrase for"):
        NoteStore(path, passphrase="wrong")


def test_notes_are_written_encrypted(encrypted, tmp_path):
    src, _, _ = encrypted
    path = tmp_path / "copy.tds"
    path.write_bytes(src.read_bytes())
    store = NoteStore(path, passphrase=PASSPHRASE)
    store.add(NoteTarget(kind="range", start=time.time(), end=time.time() + 1), "secret remark zq81")
    store.close()
    assert b"zq81" not in _readable(_raw(tmp_path))
    with SessionReader(path, writable=False, passphrase=PASSPHRASE) as reader:
        assert [n.text for n in reader.notes()] == ["secret remark zq81"]
    assert os.path.getsize(path) % 512 == 0


def _plain_session(path):
    from tdescope.app.events import PageCapture
    from tdescope.app.session.file import SessionRecorder
    from tdescope.app.session.meta import SessionMeta

    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(PageCapture(1_700_000_000.0, 1, "sqlcipher_page_cipher", "decrypt", 3, os.urandom(512),
                               b"tdescope-marker-row " * 25, 10.0, "sqlcipher"))
    return path


def test_copies_change_encryption_both_ways_and_keep_every_event(tmp_path):
    from tdescope.app.session.copy import copy_session

    plain = _plain_session(tmp_path / "plain.tds")
    copy_session(plain, tmp_path / "enc.tds", new_passphrase=PASSPHRASE)
    assert is_encrypted(tmp_path / "enc.tds")
    assert b"tdescope-marker-row" not in _readable((tmp_path / "enc.tds").read_bytes())
    with pytest.raises(UserError, match="wrong passphrase"):
        copy_session(tmp_path / "enc.tds", tmp_path / "nope.tds", passphrase="guess")
    assert not (tmp_path / "nope.tds").exists() and not (tmp_path / "nope.tds.part").exists()
    copy_session(tmp_path / "enc.tds", tmp_path / "back.tds", passphrase=PASSPHRASE)
    assert not is_encrypted(tmp_path / "back.tds")
    for path, passphrase in ((tmp_path / "enc.tds", PASSPHRASE), (tmp_path / "back.tds", None)):
        with SessionReader(path, passphrase=passphrase) as reader:
            [capture] = list(reader.events())
            assert capture.after == b"tdescope-marker-row " * 25


def test_a_recording_encrypted_in_place_keeps_recording(tmp_path):
    from tdescope.app.events import Marker
    from tdescope.app.session.file import SessionRecorder
    from tdescope.app.session.meta import SessionMeta

    path = tmp_path / "live.tds"
    rec = SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)"))
    rec.record(Marker(1.0, "before", "phase"))
    rec.flush()
    rec.encrypt(PASSPHRASE)
    rec.record(Marker(2.0, "after", "phase"))
    rec.close()
    assert rec.encrypted and is_encrypted(path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["live.tds"]  # no plain WAL left behind
    with SessionReader(path, passphrase=PASSPHRASE) as reader:
        assert [m.label for m in reader.events()] == ["before", "after"]
