"""The privacy default: decrypted bytes of a target tdescope did not start stay out of unencrypted files."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

import pytest

from tdescope.app.events import PageCapture
from tdescope.app.report.model import build_report, render_html
from tdescope.app.session.codec import unpack_blob
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import PLAINTEXT_WITHHELD, SessionMeta

TDESCOPE = [sys.executable, "-m", "tdescope"]
#: The rows tests/clients/sqlcipher_app.py writes.
APP_ROW = b"tdescope-marker-row"
PLAIN = b"\x0d\x00\x00\x00\x01" + b"customer-row-4111-1111-1111-1111" * 100


def _stored_bytes(path) -> bytes:
    """The raw file plus every blob, decompressed: where plaintext could hide."""
    raw = path.read_bytes()
    with sqlite3.connect(path) as db:
        blobs = [unpack_blob(data, z) for data, z in db.execute("SELECT data, compressed FROM blobs")]
    db.close()
    return raw + b"".join(blobs)


@pytest.mark.parametrize("keep, passphrase, kept", [
    (False, None, False),
    (True, None, True),
    (False, "pass phrase", True),  # an encrypted file may keep it
])
def test_recorder_withholds_plaintext_unless_kept_or_encrypted(tmp_path, keep, passphrase, kept):
    path = tmp_path / "s.tds"
    cipher = os.urandom(len(PLAIN))
    cap = PageCapture(time.time(), 1, "sqlcipher_page_cipher", "decrypt", 2, cipher, PLAIN, 900.0, "sqlcipher",
                      "after")
    with SessionRecorder(path, SessionMeta.collect("sqlcipher"), passphrase=passphrase, keep_plaintext=keep) as rec:
        rec.record(cap)
        rec.update_meta(SessionMeta.collect("sqlcipher", title="later"))  # the flag survives meta updates
    with SessionReader(path, passphrase=passphrase) as reader:
        (back,) = reader.events(kinds=[PageCapture])
        assert reader.meta.plaintext_withheld is not kept and reader.meta.title == "later"
        page = render_html(build_report(reader, include_plaintext=True))
    assert back.ciphertext == cipher and back.side.value == "after"
    assert back.plaintext == (PLAIN if kept else b"")
    assert (PLAINTEXT_WITHHELD in page) is not kept
    if passphrase is None:
        assert (b"customer-row-4111" in _stored_bytes(path)) is kept


@pytest.mark.parametrize("flag", [(), ("--keep-plaintext",)], ids=["default", "keep-plaintext"])
def test_record_pid_of_someone_elses_app_keeps_plaintext_only_when_asked(sqlcipher_app, tmp_path, flag):
    app = sqlcipher_app()
    app.go()  # reads every row, over and over: pages get decrypted all the time
    out = tmp_path / "s.tds"
    result = subprocess.run([*TDESCOPE, "record", "--pid", str(app.pid), "--engine", "sqlcipher", "--captures", "6",
                             "--seconds", "6", "--no-hotspots", "--no-waits", "-o", str(out), *flag],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    with SessionReader(out) as reader:
        caps = list(reader.events(kinds=[PageCapture]))
        withheld = reader.meta.plaintext_withheld
    assert caps and all(len(c.ciphertext) > 0 for c in caps)
    assert withheld is not bool(flag)
    assert (PLAINTEXT_WITHHELD in result.stderr) is not bool(flag)
    assert (APP_ROW in _stored_bytes(out)) is bool(flag)
