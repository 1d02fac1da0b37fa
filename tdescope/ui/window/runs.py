"""The window's one run at a time, and the one path that starts it: a workload's experiment or a lesson.

:meth:`RunSlot.start` marks the run in the live session (its start and end markers, so a recording
made from the window frames it as ``tdescope record`` does), runs its blocking ``work`` on a worker
thread, and queues the finish on the event pump behind every event the run produced: the views
have shown all of it when ``on_running(False)`` and the run's own ``then`` are called.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tdescope.app.session.live import LiveSession
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.gui_thread.tasks import TaskRunner

__all__ = ["RunFinished", "RunSlot"]


class Cancellable(Protocol):
    """What runs in the slot: an :class:`~tdescope.app.experiment.Experiment` or a
    :class:`~tdescope.app.lessons.LessonRun`."""

    def cancel(self) -> None:
        """Stop at the next safe point."""


@dataclass(frozen=True, slots=True)
class RunFinished:
    """The run in the slot ended; queued on the pump behind every event it produced."""

    result: Any
    error: str
    then: Callable[[Any, str], None]


class RunSlot:
    """Holds the running experiment or lesson; at most one at a time.

    Parameters
    ----------
    live : LiveSession
        Gets the run's start and end markers.
    tasks : TaskRunner
        Runs the blocking work.
    pump : EventPump
        Delivers the finish after the run's events.
    on_running : callable
        Called with True when a run starts and False once it ended (the docks' Run and Cancel buttons).
    """

    def __init__(self, live: LiveSession, tasks: TaskRunner, pump: EventPump,
                 on_running: Callable[[bool], None]) -> None:
        self._live = live
        self._tasks = tasks
        self._pump = pump
        self._on_running = on_running
        self.current: Cancellable | None = None
        pump.subscribe(RunFinished, self._on_finished)

    def busy(self) -> bool:
        """A run is going (its finish not yet delivered)."""
        return self.current is not None

    def start(self, run: Cancellable, workload: str | None, work: Callable[[], Any], name: str,
              then: Callable[[Any, str], None] = lambda result, error: None) -> bool:
        """Start ``run``: ``work()`` blocks on a worker until it ended; ``then(result, error)`` follows on the
        GUI thread after the run's events. ``workload`` names the run's markers (None: watching). False
        when another run is going."""
        if self.current is not None:
            return False
        self.current = run
        self._on_running(True)
        label = self._live.run_started(workload)

        def body(_state) -> Any:
            try:
                return work()
            finally:
                self._live.run_ended(label)

        self._tasks.run(body, name=name, on_done=lambda result: self._pump.put(RunFinished(result, "", then)),
                        on_exception=lambda exc: self._pump.put(RunFinished(None, str(exc), then)))
        return True

    def cancel(self) -> bool:
        """Cancel the running run at its next safe point; False when nothing runs."""
        if self.current is None:
            return False
        self.current.cancel()
        return True

    def _on_finished(self, batch: list[RunFinished]) -> None:
        for finished in batch:
            self.current = None
            self._on_running(False)
            finished.then(finished.result, finished.error)
