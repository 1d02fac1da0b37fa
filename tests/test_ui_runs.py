"""The window's one run slot (issue #25 item 4): one path starts a workload or a lesson, and the Lessons
controller is built from what it needs, without a window."""

from __future__ import annotations

import threading
import time

from PySide6.QtWidgets import QWidget

from tdescope.app.engines import discover_engines
from tdescope.app.events import Marker, WorkloadProgress
from tdescope.app.session.live import LiveSession
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.gui_thread.tasks import TaskRunner
from tdescope.ui.window.lessons import LessonsController, LessonViews
from tdescope.ui.window.runs import RunSlot


class _Blocking:
    """A run that publishes a progress event and waits until cancelled."""

    def __init__(self, live: LiveSession) -> None:
        self.live = live
        self.stop = threading.Event()

    def cancel(self) -> None:
        self.stop.set()

    def work(self) -> str:
        self.live.publish(WorkloadProgress(time.time(), "w", "encrypted", 1, 1))
        self.stop.wait(30)
        return "ended"


def _views(said: list[str], session=None) -> LessonViews:
    return LessonViews(session=lambda: session, replaying=lambda: False, backend_choice=lambda: "auto",
                       say=said.append, workload_status=said.append, lesson_done=lambda title, verdict: None,
                       show_range=lambda start, end: None, select_capture=lambda seq: None,
                       add_note=lambda target, text: True)


def test_one_slot_runs_one_thing_and_finishes_after_its_events(qtbot):
    live, pump, tasks = LiveSession(), EventPump(), TaskRunner()
    seen: list = []
    live.subscribe(pump.put)
    pump.subscribe(WorkloadProgress, lambda batch: seen.extend(batch))
    pump.subscribe(Marker, lambda batch: seen.extend(m.label for m in batch))
    running: list[bool] = []
    slot = RunSlot(live, tasks, pump, running.append)
    said: list[str] = []
    parent = QWidget()
    qtbot.addWidget(parent)
    lessons = LessonsController(discover_engines()[0]["sqlcipher"], live, pump, slot, _views(said, session=object()),
                                parent)
    run, finished = _Blocking(live), []
    assert slot.start(run, "w", run.work, "test-run", then=lambda result, error: finished.append((result, list(seen))))
    assert running == [True] and slot.busy()
    assert not slot.start(_Blocking(live), "w", lambda: None, "second")  # one at a time
    lessons.update_gate()
    assert lessons.dock._blocked == "a workload is running"
    lessons.start("block-before-after")  # refused: the slot is taken, nothing else started
    assert said == ["Connect first, and let the running workload finish"] and lessons.run is None
    assert slot.cancel()
    qtbot.waitUntil(lambda: bool(finished), timeout=10000)
    result, delivered = finished[0]
    assert result == "ended" and running == [True, False] and not slot.busy()
    # the finish came after every event of the run, its end marker included (the pump groups a batch by kind)
    assert [e for e in delivered if isinstance(e, str)] == ["w run 1 start", "w run 1 end"]
    assert [type(e) for e in delivered if not isinstance(e, str)] == [WorkloadProgress]
    lessons.update_gate()
    assert lessons.dock._blocked == ""
    pump.stop()
    tasks.shutdown()


def test_a_failed_run_reports_its_error_line(qtbot):
    live, pump, tasks = LiveSession(), EventPump(), TaskRunner()
    running, finished = [], []
    slot = RunSlot(live, tasks, pump, running.append)

    def fail() -> None:
        raise RuntimeError("no such table: t")

    slot.start(_Blocking(live), None, fail, "failing", then=lambda result, error: finished.append((result, error)))
    qtbot.waitUntil(lambda: bool(finished), timeout=10000)
    assert finished == [(None, "no such table: t")] and running == [True, False] and not slot.busy()
    pump.stop()
    tasks.shutdown()
