"""Background work for the window: a plain function on a worker thread, its outcome on the GUI thread.

The habit of Orange's ``concurrent`` helpers: long or blocking work (connecting,
a database query, a gdb or perf call, building a report) is a plain function
``fn(state)`` run by :class:`TaskRunner` on a worker thread. ``state`` (a
:class:`TaskState`) carries progress out and a cancel request in; the caller only
implements ``on_done(result)``, ``on_exception(exc)`` and, if it wants,
``on_progress(fraction)``, all called on the GUI thread through queued signals.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot

from tdescope.app.errors import UserError

__all__ = ["TaskRunner", "TaskState", "describe"]


#: Command-line options a message may name, and what a window user does instead.
_GUI_WORDS = {"--allow-critical overrides": "tick “Allow critical processes” in Change target… to override",
              "--accept-stop goes ahead": "the command line's `tdescope capture --accept-stop` goes ahead",
              "--allow-critical": "“Allow critical processes” in Change target…"}


def describe(exc: BaseException) -> str:
    """One line for the status bar: a UserError's own message (in window words, not CLI flags), else the
    exception's type and message."""
    if not isinstance(exc, UserError):
        return f"{type(exc).__name__}: {exc}"
    text = str(exc)
    for flag, words in _GUI_WORDS.items():
        text = text.replace(flag, words)
    return text


class TaskState:
    """What a running task and the GUI share: progress out, a cancel request in.

    The task polls :attr:`cancelled` between steps (cooperative cancel); setting
    progress from the worker thread reaches ``on_progress`` on the GUI thread.
    """

    def __init__(self, report_progress: Callable[[float], None] | None = None) -> None:
        self._cancel = threading.Event()
        self._report = report_progress
        self.progress = 0.0

    def cancel(self) -> None:
        """Ask the task to stop early; its outcome is then not delivered."""
        self._cancel.set()

    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called (or the runner shut down)."""
        return self._cancel.is_set()

    def set_progress(self, fraction: float) -> None:
        """Report progress in [0, 1]; safe from the worker thread."""
        self.progress = fraction
        if self._report is not None and not self.cancelled:
            self._report(fraction)


@dataclass(slots=True)
class _Task:
    state: TaskState
    on_done: Callable[[Any], None] | None
    on_exception: Callable[[BaseException], None] | None
    on_progress: Callable[[float], None] | None


class TaskRunner(QObject):
    """Runs ``fn(state)`` on worker threads; delivers outcomes on the GUI thread.

    One runner per window. Outcomes of cancelled tasks, and of every task once
    :meth:`shutdown` was called, are dropped: a closed window is never called back.
    """

    _finished = Signal(int, bool, object)
    """Internal, queued to the GUI thread: task id, whether it raised, its result or exception."""
    _progressed = Signal(int, float)
    """Internal, queued to the GUI thread: task id, progress fraction."""

    def __init__(self, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._ids = itertools.count(1)
        self._tasks: dict[int, _Task] = {}
        self._closed = False
        self._finished.connect(self._deliver, Qt.ConnectionType.QueuedConnection)
        self._progressed.connect(self._deliver_progress, Qt.ConnectionType.QueuedConnection)

    def run(self, fn: Callable[[TaskState], Any], *, on_done: Callable[[Any], None] | None = None,
            on_exception: Callable[[BaseException], None] | None = None,
            on_progress: Callable[[float], None] | None = None, name: str = "task") -> TaskState:
        """Start ``fn(state)`` on a worker thread named ``name``; returns its state.

        ``on_done(result)`` or ``on_exception(exc)`` follows on the GUI thread; an
        exception with no ``on_exception`` is dropped (the task said nothing to show).
        """
        task_id = next(self._ids)
        state = TaskState(lambda f: self._progressed.emit(task_id, f))
        self._tasks[task_id] = _Task(state, on_done, on_exception, on_progress)
        if self._closed:
            state.cancel()

        def work() -> None:
            try:
                result, raised = fn(state), False
            except BaseException as exc:  # noqa: BLE001 - crosses to the GUI thread as a value
                result, raised = exc, True
            try:
                self._finished.emit(task_id, raised, result)
            except RuntimeError:  # the runner was deleted with its window
                pass

        threading.Thread(target=work, name=name, daemon=True).start()
        return state

    @property
    def running(self) -> int:
        """How many tasks have not delivered their outcome yet."""
        return len(self._tasks)

    def shutdown(self) -> None:
        """Cancel every task and deliver nothing more (window close). Safe to call twice."""
        self._closed = True
        for task in self._tasks.values():
            task.state.cancel()

    @Slot(int, bool, object)
    def _deliver(self, task_id: int, raised: bool, outcome: object) -> None:
        task = self._tasks.pop(task_id, None)
        if task is None or task.state.cancelled:
            return
        if raised:
            if task.on_exception is not None:
                task.on_exception(outcome)
        elif task.on_done is not None:
            task.on_done(outcome)

    @Slot(int, float)
    def _deliver_progress(self, task_id: int, fraction: float) -> None:
        task = self._tasks.get(task_id)
        if task is not None and task.on_progress is not None and not task.state.cancelled:
            task.on_progress(fraction)
