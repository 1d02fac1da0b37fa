"""Lessons: the experiments of the source documents, runnable in one go, published figure beside ours.

The catalogue is data (:mod:`tdescope.app.lessons.catalogue`, one TOML file per
lesson); :func:`run_lesson` runs one on an open session and returns its result card
(:class:`~tdescope.app.events.LessonCard`), also sent to the sink last.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from tdescope.app.errors import UserError
from tdescope.app.events import LessonCard, LessonVerdict
from tdescope.app.lessons.analyses import ANALYSES
from tdescope.app.lessons.catalogue import Binding, Lesson, Published, lesson_named, load_lessons
from tdescope.app.lessons.run import LessonRun, _Cancelled

__all__ = ["Binding", "Lesson", "LessonRun", "Published", "cannot_run_card", "lesson_named", "load_lessons",
           "run_lesson", "start_lesson"]


def cannot_run_card(lesson: Lesson, engine: str, why: str = "") -> LessonCard:
    """The card of a lesson that cannot run on ``engine``: its published figures and the reason."""
    reason = why or lesson.why_not(engine) or "cannot run here"
    return LessonCard(time.time(), lesson.id, lesson.title, engine, lesson.question, lesson.source(),
                      tuple(f"{p.label}: {p.text}" for p in lesson.published), (), LessonVerdict.CANNOT_RUN, reason)


def run_lesson(run: LessonRun) -> LessonCard:
    """Run ``run``'s lesson to its card (blocking; call :meth:`LessonRun.cancel` from another thread).

    Never raises for what the user can meet: a missing extension or a failed workload is a
    ``cannot run``/``failed`` card with its one line, a cancel a ``cancelled`` card.
    """
    analysis = ANALYSES.get(run.lesson.analysis)
    if analysis is None:
        card = cannot_run_card(run.lesson, run.engine.name, f"unknown analysis {run.lesson.analysis!r}")
    else:
        try:
            card = analysis(run)
        except _Cancelled:
            card = run.card([], LessonVerdict.CANCELLED, "cancelled before the lesson finished")
        except UserError as exc:
            text = str(exc)
            verdict = LessonVerdict.CANNOT_RUN if text.startswith("needs ") else LessonVerdict.FAILED
            card = run.card([], verdict, text)
    run.sink(card)
    return card


def start_lesson(run: LessonRun, done: Callable[[LessonCard], None]) -> None:
    """Run ``run`` on a worker thread; ``done(card)`` is called there when it ends."""
    import threading

    threading.Thread(target=lambda: done(run_lesson(run)), name=f"lesson-{run.lesson.id}", daemon=True).start()
