"""Runs lessons from the Lessons dock on the window's session, and shows what they produce in the other docks.

A lesson's experiments publish into the window's live session like any run: the
captures land in the Captures dock, progress and results in the Workload dock, and
the card (a :class:`~tdescope.app.events.LessonCard`) is recorded with the session,
so a replay shows it too. A live lesson's card selects the lesson's time range on the
timeline (so the hotspot and wait docks show that stretch); when a card names a capture
(``seq``) it is selected and shown in the page view; "Add card to notes" writes it as a note over the lesson's time range.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QWidget

from tdescope.app.engines.api import Engine, EngineSession
from tdescope.app.errors import UserError
from tdescope.app.events import LessonCard, LessonVerdict, WorkloadProgress
from tdescope.app.lessons import LessonRun, lesson_named, load_lessons, run_lesson
from tdescope.app.session.live import LiveSession
from tdescope.app.session.notes import NoteKind, NoteTarget
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.docks.lessons import LessonsDock
from tdescope.ui.window.runs import RunSlot

__all__ = ["LessonViews", "LessonsController"]


@dataclass(frozen=True, kw_only=True)
class LessonViews:
    """What a lesson asks of the window's other parts, and nothing more.

    Attributes
    ----------
    session : callable
        The connected engine session, or None.
    replaying : callable
        True while the window replays a file (a replay runs nothing).
    backend_choice : callable
        ``auto``, ``ebpf`` or ``gdb``: what the Workload dock says places probes.
    say : callable
        A line for the status bar.
    workload_status : callable
        A line for the Workload dock's status (a lesson's runs show there).
    lesson_done : callable
        ``(title, verdict)``: the Workload dock says the lesson ended.
    show_range : callable
        ``(start, end)``: select the lesson's time range on the timeline.
    select_capture : callable
        ``(seq)``: select a capture in the Captures dock and the page view.
    add_note : callable
        ``(target, text)``: write a note; True when it was written.
    """

    session: Callable[[], EngineSession | None]
    replaying: Callable[[], bool]
    backend_choice: Callable[[], str]
    say: Callable[[str], None]
    workload_status: Callable[[str], None]
    lesson_done: Callable[[str, LessonVerdict], None]
    show_range: Callable[[float, float], None]
    select_capture: Callable[[int], None]
    add_note: Callable[[NoteTarget, str], bool]


class LessonsController(QObject):
    """The Lessons dock's runs, started in the window's one :class:`RunSlot` (a lesson and a workload never
    run at once), their events published into ``live`` and their cards shown through ``views``."""

    def __init__(self, engine: Engine, live: LiveSession, pump: EventPump, runs: RunSlot, views: LessonViews,
                 parent: QWidget) -> None:
        super().__init__(parent)
        self.engine = engine
        self.live = live
        self.runs = runs
        self.views = views
        self.dock = LessonsDock(parent)
        self.run: LessonRun | None = None
        self._started: dict[str, float] = {}
        try:
            self.dock.set_lessons(load_lessons(), engine.name)
        except UserError as exc:
            self.dock.status.setText(str(exc))
        self.dock.runRequested.connect(self.start)
        self.dock.cancelRequested.connect(self.cancel)
        self.dock.addToNotesRequested.connect(self.add_to_notes)
        pump.subscribe(LessonCard, self._on_cards)
        pump.subscribe(WorkloadProgress, self._on_progress)

    def update_gate(self) -> None:
        """Let Run lesson be pressed only when a lesson can start: connected, live, nothing running."""
        why = ("a replay runs nothing" if self.views.replaying()
               else "not connected" if self.views.session() is None
               else "a workload is running" if self.runs.busy() and self.run is None
               else "")
        self.dock.set_blocked(why)

    def start(self, lesson_id: str, quick: bool = True) -> None:
        """Run lesson ``lesson_id`` on the window's session (on a worker thread)."""
        session = self.views.session()
        if session is None or self.runs.busy():
            self.views.say("Connect first, and let the running workload finish")
            return
        lesson_run = LessonRun(lesson_named(lesson_id), self.engine, session, self.live.publish, fast=quick,
                               backend_choice=self.views.backend_choice(), first_seq=self.live.first_capture_seq)
        self.run = lesson_run
        self._started[lesson_id] = time.time()
        self.dock.set_running(True)
        self.runs.start(lesson_run, f"lesson {lesson_id}", lambda: run_lesson(lesson_run), f"lesson-{lesson_id}",
                        then=self._finished)

    def cancel(self) -> None:
        """Cancel the running lesson at its next safe point."""
        if self.run is not None:
            self.run.cancel()
            self.dock.status.setText("Cancelling…")

    def _finished(self, card: LessonCard | None, error: str = "") -> None:
        self.run = None
        self.dock.set_running(False)
        self.update_gate()
        if error:
            self.dock.status.setText(error)
            self.views.workload_status(f"Lesson failed: {error}")

    def _on_progress(self, batch: list[WorkloadProgress]) -> None:
        for ev in batch:
            if ev.workload.startswith("lesson:"):
                self.dock.show_step(ev.done, ev.total, ev.message)

    def _on_cards(self, batch: list[LessonCard]) -> None:
        for card in batch:
            self.dock.show_card(card)
            # after its runs' progress lines (the pump keeps their order): the Workload dock says it ended
            self.views.lesson_done(card.title, card.verdict)
            start = self._started.get(card.lesson)
            ran = card.verdict not in (LessonVerdict.CANNOT_RUN, LessonVerdict.CANCELLED)
            if start is not None and ran and card.ts > start:
                self.views.show_range(start, card.ts)
            seq = card.figures.get("seq")
            if isinstance(seq, int):  # the page the card speaks of, in the Captures dock and the page view
                self.views.select_capture(seq)

    def add_to_notes(self, card: LessonCard) -> None:
        """Write ``card`` as a note over the lesson's time range."""
        start = self._started.get(card.lesson, card.ts)
        target = NoteTarget(kind=NoteKind.RANGE, ts=start, ts_end=card.ts)
        if self.views.add_note(target, card.text()):
            self.views.say(f"Lesson card added to the notes: {card.title}")
