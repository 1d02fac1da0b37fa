"""The replay's feeder: a recorded file's events, decoded in a process of their own, in order, in batches."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from conftest import wait_for
from tdescope.app.events import WaitSample
from tdescope.app.session import codec, feed_worker
from tdescope.app.session.feeder import SessionFeeder
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta

N = 2000


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "s.tds"
    with SessionRecorder(path, SessionMeta()) as rec:
        for i in range(N):
            rec.record(WaitSample(1000.0 + i, 1, 1, "os", "CPU", "running", "x" * 50))
    return path


def _unpacking(seen: list, threads: set | None = None):
    def feed(pack):
        events = pack.events()
        assert len(events) == pack.count <= feed_worker.BATCH
        seen.extend(ev.ts for ev in events)
        if threads is not None:
            threads.add(threading.current_thread().name)
    return feed


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_events_come_in_order_decoded_by_another_process_up_to_what_was_asked(recorded, monkeypatch):
    # this process decodes nothing: were it asked to, the feed would fail
    monkeypatch.setattr(codec, "decode", lambda *a, **k: pytest.fail("decoded in the window's process"))
    seen, threads = [], set()
    feeder = SessionFeeder(recorded, _unpacking(seen, threads))
    try:
        feeder.extend(1500.0)
        wait_for(lambda: feeder.caught_up, what="fed up to 1500")
        assert seen == [1000.0 + i for i in range(500)] and threads == {"session-feeder"}
        assert feeder._proc.pid != os.getpid() and _alive(feeder._proc.pid)
        feeder.extend(1200.0)  # below what was asked: nothing changes
        feeder.extend(1000.0 + N)
        wait_for(lambda: feeder.caught_up and len(seen) == N, what="fed to the end")
        assert seen == sorted(seen) and len(set(seen)) == N
    finally:
        feeder.close()


def test_a_restart_resets_between_two_batches_and_feeds_from_the_start(recorded):
    go = threading.Event()
    seen, resets = [], []
    unpack = _unpacking(seen)

    def feed(pack):
        unpack(pack)
        if len(seen) == feed_worker.BATCH:
            assert go.wait(10)  # hold the feeder inside its first batch while the restart comes

    feeder = SessionFeeder(recorded, feed)
    try:
        feeder.extend(1000.0 + N)
        wait_for(lambda: len(seen) == feed_worker.BATCH, what="the feeder held in its first batch")

        def reset():
            resets.append(len(seen))
            seen.clear()

        threading.Timer(0.2, go.set).start()  # the restart must wait for the batch under way
        feeder.restart(1010.0, reset)
        assert resets == [feed_worker.BATCH]  # after the first batch was handed over, before the second
        wait_for(lambda: feeder.caught_up, what="fed again up to 1010")
        # the process was still sending the abandoned range's batches: none of them reached the feed
        assert seen == [1000.0 + i for i in range(10)]
    finally:
        feeder.close()


def test_a_file_that_cannot_be_read_is_one_line_and_the_feeder_stops(tmp_path):
    bad = tmp_path / "bad.tds"
    bad.write_bytes(b"not a session" * 100)
    errors = []
    feeder = SessionFeeder(bad, lambda pack: None, on_error=errors.append)
    feeder.extend(1.0)
    wait_for(lambda: errors, what="the error")
    assert len(errors) == 1 and errors[0].startswith("replay stopped: ") and "\n" not in errors[0]
    assert errors[0].endswith("is not a tdescope session file (not an SQLite database)")
    assert feeder.caught_up  # nothing more will come: callers waiting on it do not hang
    feeder.close()


def test_a_reading_process_that_dies_is_one_line(recorded):
    errors = []
    feeder = SessionFeeder(recorded, lambda pack: None, on_error=errors.append)
    feeder.extend(1001.0)
    wait_for(lambda: feeder.caught_up, what="fed")
    os.kill(feeder._proc.pid, signal.SIGKILL)
    feeder.extend(1000.0 + N)
    wait_for(lambda: errors, what="the error")
    assert errors == ["replay stopped: the reading process ended (exit code -9)"]
    assert feeder.caught_up
    feeder.close()


def test_close_ends_the_thread_and_the_process(recorded):
    feeder = SessionFeeder(recorded, lambda pack: None)
    feeder.extend(1000.0 + N)
    wait_for(lambda: feeder.caught_up, what="fed")
    pid = feeder._proc.pid
    feeder.close()
    assert not feeder._thread.is_alive() and feeder._proc.poll() is not None and not _alive(pid)
    feeder.close()  # twice is fine


def test_a_feeder_waits_while_the_consumer_has_no_room_and_a_restart_wakes_it(recorded):
    room = threading.Event()
    seen, busy_at_reset = [], []
    feeder = SessionFeeder(recorded, _unpacking(seen), ready=room.is_set)
    try:
        feeder.extend(1000.0 + N)
        wait_for(lambda: feeder._busy, what="the feeder at work")
        time.sleep(0.2)  # the process has sent its first batches by now: none may be handed over
        assert seen == [] and not feeder.caught_up  # no room: not one event fed
        # the restart wakes the waiting feeder: it is no longer busy when the views reset
        feeder.restart(1010.0, lambda: (busy_at_reset.append(feeder._busy), seen.clear()))
        assert busy_at_reset == [False]
        room.set()
        wait_for(lambda: feeder.caught_up, what="fed up to 1010 once there is room")
        assert seen == [1000.0 + i for i in range(10)]
        feeder.extend(1000.0 + N)
        wait_for(lambda: feeder.caught_up and len(seen) == N, what="fed to the end")
    finally:
        feeder.close()


def test_the_passphrase_never_reaches_the_reading_process_command_line(tmp_path, monkeypatch):
    from tdescope.app.session.schema import is_encrypted

    monkeypatch.setenv("PGPASSWORD", "pg-secret-77")  # the window's own secrets stay out of the child too
    monkeypatch.setenv("MYSQL_PWD", "my-secret-77")

    path = tmp_path / "locked.tds"
    with SessionRecorder(path, SessionMeta(), passphrase="correct horse 42") as rec:
        for i in range(10):
            rec.record(WaitSample(1000.0 + i, 1, 1, "os", "CPU", "running", ""))
    assert is_encrypted(path)
    seen = []
    feeder = SessionFeeder(path, _unpacking(seen), passphrase="correct horse 42")
    try:
        feeder.extend(2000.0)
        wait_for(lambda: feeder.caught_up and len(seen) == 10, what="the encrypted file fed")
        with open(f"/proc/{feeder._proc.pid}/cmdline", "rb") as fh:
            argv = fh.read()
        with open(f"/proc/{feeder._proc.pid}/environ", "rb") as fh:
            env = fh.read()
        assert b"horse" not in argv and b"horse" not in env and b"feed_worker" in argv
        assert b"secret-77" not in env  # an allowlisted environment (child_env), no password variables
    finally:
        feeder.close()
    errors = []
    wrong = SessionFeeder(path, lambda pack: None, passphrase="wrong", on_error=errors.append)
    wrong.extend(2000.0)
    wait_for(lambda: errors, what="the wrong passphrase's line")
    assert errors == [f"replay stopped: wrong passphrase for {path}"]
    wrong.close()


def test_the_reading_process_ends_when_the_window_is_killed(recorded, tmp_path):
    """kill -9 of the window's process: EOF on the reader's stdin (or a write to a closed pipe) ends it."""
    script = tmp_path / "window.py"
    script.write_text(textwrap.dedent(f"""
        import sys, time
        from tdescope.app.session.feeder import SessionFeeder
        f = SessionFeeder({str(recorded)!r}, lambda pack: time.sleep(3600), ready=lambda: True)
        f.extend({1000.0 + N})  # the process fills the pipe: the feed holds the thread in the first batch
        while f._proc is None:
            time.sleep(0.01)
        print(f._proc.pid, flush=True)
        time.sleep(3600)
    """))
    window = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(window.stdout.readline())
        time.sleep(0.5)  # the reader is blocked on a full pipe by now
        assert _alive(pid)
        window.kill()
        window.wait(5)
        wait_for(lambda: not _alive(pid), timeout=2.0, what="the reading process ended")
    finally:
        window.kill()
