"""The live session hub: recorder and subscribers, failures contained, run markers, recorders swapped."""

import threading

import pytest

from tdescope.app.events import Marker, Problem, WaitSample
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.live import LiveSession
from tdescope.app.session.meta import SessionMeta


def _wait(i: int) -> WaitSample:
    return WaitSample(1_700_000_000.0 + i, 100, 100, "os", "CPU", "running")


def _recorder(path) -> SessionRecorder:
    return SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher"))


def _kinds(path) -> dict:
    with SessionReader(path) as reader:
        return reader.counts()


def test_publish_reaches_the_recorder_and_every_subscriber(tmp_path):
    live, seen_a, seen_b = LiveSession(), [], []
    live.subscribe(seen_a.append)
    unsubscribe = live.subscribe(seen_b.append)
    rec = _recorder(tmp_path / "a.tds")
    assert live.attach(rec) is None
    live.publish(_wait(0))
    unsubscribe()
    live.publish(_wait(1))
    assert live.detach() is rec
    live.publish(_wait(2))  # nothing records it now
    rec.close()
    assert [e.ts for e in seen_a] == [_wait(i).ts for i in range(3)]
    assert seen_b == [_wait(0)]
    assert _kinds(tmp_path / "a.tds") == {"WaitSample": 2}


def test_a_failing_subscriber_is_reported_once_and_never_reaches_the_producer(tmp_path):
    live, seen = LiveSession(), []

    def broken(event):
        raise ValueError("bad view")

    live.subscribe(broken)
    live.subscribe(seen.append)
    rec = _recorder(tmp_path / "a.tds")
    live.attach(rec)
    for i in range(3):
        live.publish(_wait(i))  # does not raise
    rec.close()
    problems = [e for e in seen if isinstance(e, Problem)]
    assert len(problems) == 1 and "ValueError: bad view" in problems[0].message
    assert sum(isinstance(e, WaitSample) for e in seen) == 3  # later subscribers still get every event
    assert _kinds(tmp_path / "a.tds") == {"WaitSample": 3, "Problem": 1}


def test_run_markers_frame_each_run():
    live, seen = LiveSession(), []
    live.subscribe(seen.append)
    first = live.run_started("ab_dml")
    live.run_ended(first)
    second = live.run_started("ab_dml")
    live.run_ended(second)
    live.run_ended(live.run_started(None))
    assert all(isinstance(e, Marker) and e.kind == "phase" for e in seen)
    assert [e.label for e in seen] == ["ab_dml run 1 start", "ab_dml run 1 end", "ab_dml run 2 start",
                                       "ab_dml run 2 end", "watching start", "watching end"]


def test_replacing_the_recorder_splits_the_events_between_files(tmp_path):
    live = LiveSession()
    one, two = _recorder(tmp_path / "one.tds"), _recorder(tmp_path / "two.tds")
    live.attach(one)
    live.publish(_wait(0))
    assert live.attach(two) is one
    one.close()
    live.publish(_wait(1))
    live.publish(_wait(2))
    live.detach().close()
    assert _kinds(tmp_path / "one.tds") == {"WaitSample": 1}
    assert _kinds(tmp_path / "two.tds") == {"WaitSample": 2}


@pytest.mark.parametrize("opens", [True, False])
def test_a_recorder_opened_on_demand_is_opened_once_whatever_the_race(tmp_path, opens):
    live, opened = LiveSession(), []

    def open_recorder():
        opened.append(1)
        return _recorder(tmp_path / f"auto{len(opened)}.tds") if opens else None

    live.record_on_demand(open_recorder)
    start = threading.Barrier(8)

    def produce(k):
        start.wait()
        for i in range(50):
            live.publish(_wait(k * 100 + i))

    threads = [threading.Thread(target=produce, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rec = live.detach()
    if opens:
        rec.close()
        assert len(opened) == 1 and _kinds(rec.path) == {"WaitSample": 400}
    else:
        assert rec is None and len(opened) == 400  # asked again for each event, never attached


def test_captures_are_numbered_on_across_the_session_windows():
    """The hub numbers captures (issue #25 item 4): a window starts after every number an earlier one used,
    those a storm counted but did not send included."""
    from tdescope.app.events import CaptureWindowState, PageCapture, WindowState

    def capture(seq: int) -> PageCapture:
        return PageCapture(1.0 + seq, seq, "decrypt", "decrypt", seq, bytes(16), bytes(16), 1.0, "sqlcipher")

    live = LiveSession()
    assert live.first_capture_seq() == 1
    for seq in (1, 2, 3):
        live.publish(capture(seq))
    live.publish(CaptureWindowState(ts=5.0, state=WindowState.DISARMED, captures=3))
    first = live.first_capture_seq()
    assert first == 4
    live.publish(capture(first))  # a storm: one of 40 sent, the window's last state counts them all
    live.publish(CaptureWindowState(ts=6.0, state=WindowState.ARMED, captures=40))
    live.publish(CaptureWindowState(ts=7.0, state=WindowState.DISARMED, captures=40))
    assert live.first_capture_seq() == first + 40
