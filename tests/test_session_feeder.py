"""The replay's feeder: a recorded file's events, in order, from a thread of its own."""

import threading

import pytest

from conftest import wait_for
from tdescope.app.events import WaitSample
from tdescope.app.session.feeder import SessionFeeder
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta
from tdescope.app.session.reader import SessionReader

N = 2000


@pytest.fixture
def recorded(tmp_path):
    path = tmp_path / "s.tds"
    with SessionRecorder(path, SessionMeta()) as rec:
        for i in range(N):
            rec.record(WaitSample(1000.0 + i, 1, 1, "os", "CPU", "running", "x" * 50))
    return path


def test_events_come_in_order_from_another_thread_up_to_what_was_asked(recorded):
    seen, threads = [], set()

    def feed(ev):
        seen.append(ev.ts)
        threads.add(threading.current_thread().name)

    feeder = SessionFeeder(lambda: SessionReader(recorded, writable=False), feed)
    try:
        feeder.extend(1500.0)
        wait_for(lambda: feeder.caught_up, what="fed up to 1500")
        assert seen == [1000.0 + i for i in range(500)] and threads == {"session-feeder"}
        feeder.extend(1200.0)  # below what was asked: nothing changes
        feeder.extend(1000.0 + N)
        wait_for(lambda: feeder.caught_up and len(seen) == N, what="fed to the end")
        assert seen == sorted(seen) and len(set(seen)) == N
    finally:
        feeder.close()


def test_a_restart_resets_between_two_events_and_feeds_from_the_start(recorded):
    in_feed = threading.Event()
    go = threading.Event()
    seen, resets = [], []

    def feed(ev):
        in_feed.set()
        seen.append(ev.ts)
        if len(seen) == 100:
            assert go.wait(10)  # hold the feeder inside an event while the restart comes

    feeder = SessionFeeder(lambda: SessionReader(recorded, writable=False), feed)
    try:
        feeder.extend(1000.0 + N)
        wait_for(lambda: len(seen) == 100, what="the feeder held in its 100th event")

        def reset():
            resets.append(len(seen))
            seen.clear()

        threading.Timer(0.2, go.set).start()  # the restart must wait for the event under way
        feeder.restart(1010.0, reset)
        assert resets == [100]  # after the 100th event finished, before the 101st
        wait_for(lambda: feeder.caught_up, what="fed again up to 1010")
        assert seen == [1000.0 + i for i in range(10)]
    finally:
        feeder.close()


def test_a_file_that_cannot_be_read_is_one_line_and_the_feeder_stops(tmp_path):
    bad = tmp_path / "bad.tds"
    bad.write_bytes(b"not a session" * 100)
    errors = []
    feeder = SessionFeeder(lambda: SessionReader(bad, writable=False), lambda ev: None, on_error=errors.append)
    feeder.extend(1.0)
    wait_for(lambda: errors, what="the error")
    assert len(errors) == 1 and errors[0].startswith("replay stopped: ") and "\n" not in errors[0]
    assert feeder.caught_up  # nothing more will come: callers waiting on it do not hang
    feeder.close()


def test_close_ends_the_thread_and_closes_its_reader(recorded):
    opened = []

    def open_reader():
        opened.append(SessionReader(recorded, writable=False))
        return opened[-1]

    feeder = SessionFeeder(open_reader, lambda ev: None)
    feeder.extend(1000.0 + N)
    wait_for(lambda: feeder.caught_up, what="fed")
    feeder.close()
    assert not feeder._thread.is_alive()
    feeder.close()  # twice is fine


def test_a_feeder_waits_while_the_consumer_has_no_room_and_a_restart_wakes_it(recorded):
    room = threading.Event()
    seen, busy_at_reset = [], []
    feeder = SessionFeeder(lambda: SessionReader(recorded, writable=False), lambda ev: seen.append(ev.ts),
                           ready=room.is_set)
    try:
        feeder.extend(1000.0 + N)
        wait_for(lambda: feeder._busy, what="the feeder at work")
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
