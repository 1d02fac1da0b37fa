"""The live session hub: every event of a live session passes through one ``publish``.

Producers (the capture window, the workload, the samplers) call
:meth:`LiveSession.publish` on their own threads. The hub hands each event to
the recorder, if one is attached, and then to every subscriber, on the
producer's thread: the GUI's event pump queues it for the GUI thread, the
recorder queues it for its writer thread. The window and ``tdescope record``
use the same hub, so a run recorded from either holds the same events,
workload-run markers included (:meth:`LiveSession.run_started`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Protocol

from tdescope.app.events import CaptureWindowState, Event, Marker, PageCapture, Problem

__all__ = ["LiveSession", "Recorder"]


class Recorder(Protocol):
    """What the hub needs of a recorder (:class:`~tdescope.app.session.file.SessionRecorder`)."""

    def record(self, event: Event) -> None:
        """Queue ``event`` for writing; quick, thread-safe, never raises."""


class LiveSession:
    """Publish/subscribe hub of one live session, with an optional recorder.

    Notes
    -----
    A subscriber that raises does not reach the producer: its first failure is
    published once as a :class:`~tdescope.app.events.Problem`, later ones are
    dropped, and it stays subscribed.
    """

    def __init__(self) -> None:
        self._open_recorder: Callable[[], Recorder | None] | None = None
        self._recorder: Recorder | None = None
        self._subscribers: tuple[Callable[[Event], None], ...] = ()
        self._failed: set[Callable[[Event], None]] = set()  # subscribers whose failure was reported
        self._lock = threading.Lock()
        self._opening = threading.Lock()  # one recorder, however many producers race for it
        self._runs = 0
        self._next_seq = 1  # captures are numbered on across the session's capture windows
        self._window_first = 1  # the first number of the window opened last

    # -- producers ------------------------------------------------------------------
    def publish(self, event: Event) -> None:
        """Record ``event`` and hand it to every subscriber; safe from any thread."""
        if isinstance(event, (PageCapture, CaptureWindowState)):
            self._number(event)
        recorder = self._recorder or self.ensure_recorder()
        if recorder is not None:
            recorder.record(event)
        for subscriber in self._subscribers:
            try:
                subscriber(event)
            except Exception as exc:  # noqa: BLE001 - a view's bug must not stop a capture
                self._report(subscriber, exc)

    def run_started(self, workload: str | None) -> str:
        """Publish the start marker of the next run of ``workload``; returns the label for :meth:`run_ended`.

        ``workload`` None: no workload runs, the target is only watched.
        """
        with self._lock:
            self._runs += 1
            label = f"{workload} run {self._runs}" if workload else "watching"
        self.publish(Marker(time.time(), f"{label} start", "phase"))
        return label

    def run_ended(self, label: str) -> None:
        """Publish the end marker of the run that :meth:`run_started` labelled ``label``."""
        self.publish(Marker(time.time(), f"{label} end", "phase"))

    def first_capture_seq(self) -> int:
        """The number a capture window about to open gives its first capture (``CaptureLimits.first_seq``).

        Captures are numbered on across the session's windows, so "#3" names one capture of the session:
        on from every capture published, and from every capture a storm counted but did not send.
        """
        with self._lock:
            self._window_first = self._next_seq
            return self._next_seq

    def _number(self, event: PageCapture | CaptureWindowState) -> None:
        with self._lock:
            if isinstance(event, PageCapture):
                self._next_seq = max(self._next_seq, event.seq + 1)
            elif event.state.ended:  # a storm sends a sample: its count says how many numbers it used
                self._next_seq = max(self._next_seq, self._window_first + event.captures)

    # -- consumers ------------------------------------------------------------------
    def subscribe(self, subscriber: Callable[[Event], None]) -> Callable[[], None]:
        """Call ``subscriber(event)`` for every event, on the producer's thread; returns the unsubscribe.

        ``subscriber`` must be quick and thread-safe (queue the event, do the work elsewhere).
        """
        with self._lock:
            self._subscribers = (*self._subscribers, subscriber)

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers = tuple(s for s in self._subscribers if s is not subscriber)

        return unsubscribe

    @property
    def recorder(self) -> Recorder | None:
        """The recorder events go to, if any."""
        return self._recorder

    def attach(self, recorder: Recorder | None) -> Recorder | None:
        """Record into ``recorder`` from the next event on (None: stop recording); returns the previous one.

        The caller closes the previous recorder when it is done with it.
        """
        with self._lock:
            previous, self._recorder = self._recorder, recorder
        return previous

    def detach(self) -> Recorder | None:
        """Stop recording; returns the recorder that was attached, for the caller to close.

        A recorder being opened on demand at that moment is waited for and returned.
        """
        with self._opening:
            return self.attach(None)

    def record_on_demand(self, open_recorder: Callable[[], Recorder | None] | None) -> None:
        """Open a recorder with ``open_recorder()`` when an event arrives and none is attached.

        What it returns is attached and records that event; None records nothing (it is
        asked again on the next event). It runs on the producer's thread, one call at a
        time, and must not publish. The GUI's autosave: a file appears once something happens.
        """
        self._open_recorder = open_recorder

    def ensure_recorder(self) -> Recorder | None:
        """The attached recorder, opened on demand (see :meth:`record_on_demand`) if there is none."""
        open_recorder = self._open_recorder
        if open_recorder is None:
            return self._recorder
        with self._opening:
            if self._recorder is None:
                self.attach(open_recorder())
            return self._recorder

    # -- inside ---------------------------------------------------------------------
    def _report(self, subscriber: Callable[[Event], None], exc: Exception) -> None:
        with self._lock:
            if subscriber in self._failed:
                return
            self._failed.add(subscriber)
        name = getattr(subscriber, "__qualname__", type(subscriber).__name__)
        self.publish(Problem(time.time(), "live session", f"{name} failed: {type(exc).__name__}: {exc}"))
