"""Session files (.tds): every event type round-trips, secrets stay out, bad files get one clear line."""

import os
import sqlite3
import time

import pytest

from conftest import wait_for

from tdescope.app.errors import UserError
from tdescope.app.events import (CaptureWindowState, HotspotWindow, Marker, PageCapture, PhaseTiming, Problem,
                                 WaitSample, WorkloadProgress, WorkloadResult)
from tdescope.app.session.notes import NoteStore, NoteTarget
from tdescope.app.session.copy import copy_session
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta


def every_kind(t: float) -> list:
    return [
        PageCapture(t, 1, "sqlcipher_page_cipher", "decrypt", 3, os.urandom(4096), b"\x0d" + bytes(4095), 12.5,
                    "sqlcipher"),
        WorkloadProgress(t + 1, "ab_dml", "encrypted", 1, 4, "group 1/4"),
        WorkloadResult(t + 2, "ab_dml", {"groups": 4},
                       (PhaseTiming("encrypted", "total", 1.5), PhaseTiming("plain", "total", 1.0)),
                       {"encrypted": {"Insert": 3}}, False, (("a", "b"), (1, 2.5))),
        CaptureWindowState(t + 3, state="armed", message="sqlcipher_page_cipher"),
        Marker(t + 4, "phase insert", "phase", {"n": 1}),
        HotspotWindow(t + 5, t + 4, 123, {"main;f;aes_encrypt": 30, "main;g": 2}, {"aes_encrypt": "libcrypto.so"}),
        WaitSample(t + 6, 123, 124, "os", "File I/O", "pread64", "wchan=x"),
        Problem(t + 7, "capture", "no hit"),
    ]


def test_every_event_kind_round_trips(tmp_path):
    path = tmp_path / "s.tds"
    events = every_kind(time.time())
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher")) as rec:
        for e in events:
            rec.record(e)
    with SessionReader(path) as reader:
        assert list(reader.events()) == events
        assert [type(e) for e in reader.events(kinds=["WaitSample", PageCapture])] == [PageCapture, WaitSample]
        assert list(reader.events(start=events[2].ts, end=events[4].ts)) == events[2:4]
        listing = next(reader.events(kinds=[PageCapture], with_bytes=False))
        assert listing.before == b"" and listing.seq == 1
        s = reader.summary()
    assert s.counts == {"capture": 1, "workload_progress": 1, "workload_result": 1, "capture_window_state": 1,
                        "marker": 1, "hotspot_window": 1, "wait_sample": 1, "problem": 1}
    assert s.duration_s == pytest.approx(7.0)


def test_secrets_never_reach_the_file(tmp_path):
    path = tmp_path / "s.tds"
    meta = SessionMeta.collect(
        "sqlcipher", inventory=[("Key", "Raw key", "x'00112233445566778899aabbccddeeff'"),
                                ("Cipher", "SQLCipher version", "4.6")],
        params={"password": "hunter2-pw", "db_key": "k3y-material", "passphrase": "open sesame", "groups": 4,
                "nested": {"client_secret": "s3cr3t"}})
    SessionRecorder(path, meta).close()
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    for secret in (b"hunter2-pw", b"k3y-material", b"open sesame", b"s3cr3t", b"00112233445566778899"):
        assert secret not in raw
    with SessionReader(path) as reader:
        assert reader.meta.params == {"groups": 4, "nested": {}}
        assert ("Key", "Raw key", "(not stored)") in reader.meta.inventory
        assert reader.meta.versions["SQLCipher version"] == "4.6"
        assert isinstance(reader.meta.aes_ni, bool)


def test_captures_are_compressed_when_it_helps(tmp_path):
    path = tmp_path / "s.tds"
    with SessionRecorder(path, SessionMeta()) as rec:
        rec.record(PageCapture(1.0, 1, "f", "decrypt", 1, os.urandom(4096), bytes(4096)))
    conn = sqlite3.connect(path)
    rows = dict(conn.execute("SELECT field, compressed FROM blobs").fetchall())
    assert rows == {"before": 0, "after": 1}  # random bytes do not compress, zeros do


def test_commits_while_recording(tmp_path):
    path = tmp_path / "s.tds"
    rec = SessionRecorder(path, SessionMeta())
    for i in range(100):
        rec.record(WaitSample(1000.0 + i, 1, 1, "os", "CPU", "running"))
    def committed():  # another connection sees the rows once a commit period has passed, without close()
        with SessionReader(path) as reader:
            return reader.summary().counts == {"wait_sample": 100}

    wait_for(committed, timeout=10, interval=0.05, what="a commit of the recorded rows")
    rec.close()


def test_a_close_that_times_out_leaves_the_connection_to_the_writer(tmp_path, monkeypatch):
    # close() used to close the connection from the caller's thread after its join timed out, under a writer
    # still inserting: a segfault (seen in bench_seek on a loaded machine). The writer now closes it itself.
    import threading

    path = tmp_path / "s.tds"
    rec = SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher"))
    real_write, writing, go_on = rec._write, threading.Event(), threading.Event()

    def slow_write(items):
        writing.set()
        go_on.wait(10)
        real_write(items)

    monkeypatch.setattr(rec, "_write", slow_write)
    events = every_kind(time.time())
    for e in events:
        rec.record(e)
    assert writing.wait(10)
    rec.close(timeout=0.05)  # returns while the writer is held in the middle of a batch
    assert rec._thread.is_alive()
    go_on.set()
    rec._thread.join(10)
    assert not rec._thread.is_alive()
    with SessionReader(path) as reader:
        assert list(reader.events()) == events


def test_notes_round_trip_in_time_order(tmp_path):
    path = tmp_path / "s.tds"
    SessionRecorder(path, SessionMeta()).close()
    store = NoteStore(path)
    late = store.add(NoteTarget("range", ts=200.0, ts_end=210.0), "later")
    early = store.add(NoteTarget("bytes", ts=100.0, seq=3, start=16, end=32, side="after"), "header")
    store.edit(late.id, "later, edited")
    assert [n.text for n in store.all()] == ["header", "later, edited"]
    assert store.all()[0].target.describe() == "capture #3, after bytes 0x0010–0x001f"
    store.delete(early.id)
    store.close()
    with SessionReader(path) as reader:
        assert [n.text for n in reader.notes()] == ["later, edited"]


def test_save_as_copies_a_file_being_recorded(tmp_path):
    path = tmp_path / "live.tds"
    rec = SessionRecorder(path, SessionMeta(engine="sqlcipher"))
    for e in every_kind(10.0):
        rec.record(e)
    rec.flush()
    copy_session(path, tmp_path / "copy.tds")
    rec.close()
    with SessionReader(tmp_path / "copy.tds") as reader:
        assert sum(reader.counts().values()) == 8 and reader.meta.engine == "sqlcipher"


def test_a_copy_reports_its_progress_step_by_step(tmp_path, monkeypatch):
    import tdescope.app.session.copy as copy_module

    monkeypatch.setattr(copy_module, "_BACKUP_PAGES", 8)  # many steps on a small file
    seen = []
    copy_session(_recorded(tmp_path), tmp_path / "copy.tds", progress=seen.append)
    assert len(seen) > 5 and seen == sorted(seen) and 0 < seen[0] < 1 and seen[-1] == 1.0
    with SessionReader(tmp_path / "copy.tds") as reader:
        assert reader.counts() == {"WaitSample": 3000}


def _recorded(tmp_path, n=3000):
    path = tmp_path / "s.tds"
    with SessionRecorder(path, SessionMeta()) as rec:
        for i in range(n):
            rec.record(WaitSample(1000.0 + i, 1, 1, "os", "CPU", "running", "x" * 200))
    return path


def test_corrupt_file_gets_one_clear_line(tmp_path):
    path = _recorded(tmp_path)
    data = bytearray(path.read_bytes())
    data[8192 * 2: 8192 * 6] = os.urandom(8192 * 4)  # b-tree pages overwritten with noise
    path.write_bytes(bytes(data))
    with pytest.raises(UserError, match="damaged|malformed|not a"):
        with SessionReader(path) as reader:
            reader.summary()
            list(reader.events())


def test_not_a_session_file(tmp_path):
    junk = tmp_path / "junk.tds"
    junk.write_bytes(os.urandom(10000))
    with pytest.raises(UserError, match="not a tdescope session file"):
        SessionReader(junk)
    other = tmp_path / "other.tds"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    with pytest.raises(UserError, match="not a tdescope session file"):
        SessionReader(other)


def test_truncated_file_gets_one_clear_line(tmp_path):
    path = _recorded(tmp_path)
    size = path.stat().st_size
    with open(path, "r+b") as fh:
        fh.truncate(size // 2)
    with pytest.raises(UserError, match="truncated"):
        SessionReader(path)


def test_newer_schema_is_refused(tmp_path):
    path = _recorded(tmp_path, 10)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA user_version = 99")
    conn.commit()
    conn.close()
    with pytest.raises(UserError, match="newer tdescope.*format 99"):
        SessionReader(path)
