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

from PySide6.QtCore import QObject

from tdescope.app.errors import UserError
from tdescope.app.events import LessonCard, WorkloadProgress
from tdescope.app.lessons import LessonRun, lesson_named, load_lessons, run_lesson
from tdescope.app.session.notes import NoteTarget
from tdescope.ui.docks.lessons import LessonsDock

__all__ = ["LessonsController"]


class LessonsController(QObject):
    """The Lessons dock's runs. ``window`` is the :class:`~tdescope.ui.window.main_window.MainWindow`."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.dock = LessonsDock(window)
        self.run: LessonRun | None = None
        self._started: dict[str, float] = {}
        try:
            self.dock.set_lessons(load_lessons(), window.engine.name)
        except UserError as exc:
            self.dock.status.setText(str(exc))
        self.dock.runRequested.connect(self.start)
        self.dock.cancelRequested.connect(self.cancel)
        self.dock.addToNotesRequested.connect(self.add_to_notes)
        window.pump.subscribe(LessonCard, self._on_cards)
        window.pump.subscribe(WorkloadProgress, self._on_progress)

    def update_gate(self) -> None:
        """Let Run lesson be pressed only when a lesson can start: connected, live, nothing running."""
        win = self.window
        exp = win.experiment
        why = ("a replay runs nothing" if win.replay.replaying
               else "not connected" if win.session is None
               else "a workload is running" if exp is not None and not exp.done.is_set() and self.run is None
               else "")
        self.dock.set_blocked(why)

    def busy(self) -> bool:
        """A lesson or a workload is running."""
        exp = self.window.experiment
        return self.run is not None or (exp is not None and not exp.done.is_set())

    def start(self, lesson_id: str, quick: bool = True) -> None:
        """Run lesson ``lesson_id`` on the window's session (on a worker thread)."""
        win = self.window
        if win.session is None or self.busy():
            win.statusBar().showMessage("Connect first, and let the running workload finish", 5000)
            return
        lesson = lesson_named(lesson_id)
        backend = win.workload_dock.backend.currentData() or "auto"
        self.run = LessonRun(lesson, win.engine, win.session, win.live.publish, fast=quick, backend_choice=backend,
                             first_seq=lambda: win._next_seq)
        self._started[lesson_id] = time.time()
        self.dock.set_running(True)
        win.workload_dock.set_running(True)
        label = win.live.run_started(f"lesson {lesson_id}")
        lesson_run = self.run

        def work(_state):
            try:
                return run_lesson(lesson_run)
            finally:
                win.live.run_ended(label)

        win.tasks.run(work, name=f"lesson-{lesson_id}", on_done=self._finished,
                      on_exception=lambda exc: self._finished(None, str(exc)))

    def cancel(self) -> None:
        """Cancel the running lesson at its next safe point."""
        if self.run is not None:
            self.run.cancel()
            self.dock.status.setText("Cancelling…")

    def _finished(self, card: LessonCard | None, error: str = "") -> None:
        self.run = None
        self.dock.set_running(False)
        self.window.workload_dock.set_running(False)
        self.window.probe_status.set_armed(False)
        if error:
            self.dock.status.setText(error)
            self.window.workload_dock.status.setText(f"Lesson failed: {error}")

    def _on_progress(self, batch: list[WorkloadProgress]) -> None:
        for ev in batch:
            if ev.workload.startswith("lesson:"):
                self.dock.show_step(ev.done, ev.total, ev.message)

    def _on_cards(self, batch: list[LessonCard]) -> None:
        for card in batch:
            self.dock.show_card(card)
            # after its runs' progress lines (the pump keeps their order): the Workload dock says it ended
            self.window.workload_dock.show_lesson_done(card.title, card.verdict)
            start = self._started.get(card.lesson)
            if start is not None and card.verdict not in ("cannot run", "cancelled") and card.ts > start:
                self.window.observation.timeline_dock.set_range(start, card.ts)
            seq = card.figures.get("seq")
            if isinstance(seq, int):  # the page the card speaks of, in the Captures dock and the page view
                self.window.captures_dock.select_capture(None, seq)

    def add_to_notes(self, card: LessonCard) -> None:
        """Write ``card`` as a note over the lesson's time range."""
        start = self._started.get(card.lesson, card.ts)
        target = NoteTarget(kind="range", ts=start, ts_end=card.ts)
        if self.window.notes.dock.add_note(target, card.text()):
            self.window.statusBar().showMessage(f"Lesson card added to the notes: {card.title}", 6000)
