"""Bring events from worker threads to the GUI thread in batches.

The window's :class:`~tdescope.app.session.live.LiveSession` hands every event to
:meth:`EventPump.put` on the producer's thread (the window's own messages are put
directly); a QTimer on the GUI thread drains the queue at ~15 Hz and hands each
batch to the subscribers of each event type, so a storm of captures costs one model
update and one repaint per tick, never one per event.
"""

from __future__ import annotations

import queue
import time
from collections import defaultdict
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

__all__ = ["EventPump"]


class EventPump(QObject):
    """Thread-safe event queue drained on the GUI thread.

    Parameters
    ----------
    interval_ms : int
        Drain period; 66 ms is ~15 Hz.
    budget_ms : float
        Stop draining a tick after this much work, leaving the rest for the next
        tick, so the event loop never stalls.
    """

    def __init__(self, interval_ms: int = 66, budget_ms: float = 30.0, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._subscribers: dict[type, list[Callable[[list], None]]] = defaultdict(list)
        self._budget = budget_ms / 1000.0
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.drain)
        self._timer.start()

    def put(self, event: object) -> None:
        """Queue ``event``; safe from any thread."""
        self._queue.put(event)

    def subscribe(self, kind: type, handler: Callable[[list], None]) -> None:
        """Call ``handler(batch)`` on the GUI thread with the queued events of type ``kind``."""
        self._subscribers[kind].append(handler)

    def unsubscribe(self, kind: type, handler: Callable[[list], None]) -> None:
        """Undo :meth:`subscribe`."""
        if handler in self._subscribers.get(kind, []):
            self._subscribers[kind].remove(handler)

    def drain(self) -> int:
        """Deliver what is queued (up to the time budget); returns the number of events."""
        start = time.perf_counter()
        batches: dict[type, list] = defaultdict(list)
        n = 0
        while time.perf_counter() - start < self._budget:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            batches[type(event)].append(event)
            n += 1
            if n >= 5000:
                break
        for kind, batch in batches.items():
            for handler in list(self._subscribers.get(kind, [])):
                handler(batch)
        return n

    def stop(self) -> None:
        """Stop the timer (on window close)."""
        self._timer.stop()
