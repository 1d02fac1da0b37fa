"""Bring events from worker threads to the GUI thread in batches.

The window's :class:`~tdescope.app.session.live.LiveSession` hands every event to
:meth:`EventPump.put` on the producer's thread (the window's own messages are put
directly); a QTimer on the GUI thread drains the queue at ~15 Hz and hands each
batch to the subscribers of each event type, so a storm of captures costs one model
update and one repaint per tick, never one per event.

The time budget covers the subscribers' work, not only the taking: how many events a drain
takes adapts to what the last drains cost, so a replay seeking to the end of an hour (hundreds
of thousands of events queued at once) is delivered over many short ticks, never in one stall.
An item that stands for many events (a replay's batch, unpacked by its subscriber) is put with its
``weight``: the drain's limit and :attr:`EventPump.has_room` count events, not items.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer

__all__ = ["EventPump"]

#: Bounds of the events one drain takes (it adapts between them to the budget).
_MIN_BATCH, _MAX_BATCH = 50, 5000


class EventPump(QObject):
    """Thread-safe event queue drained on the GUI thread.

    Parameters
    ----------
    interval_ms : int
        Drain period; 66 ms is ~15 Hz (a third of it while a backlog waits: a replay's seek).
    budget_ms : float
        A tick's work, the subscribers' included: a drain that overran it takes fewer
        events next time (down to 50), one well under it takes more (up to 5000).
    room : int
        The backlog past which :attr:`has_room` is false.
    """

    def __init__(self, interval_ms: int = 66, budget_ms: float = 30.0, parent: QObject | None = None,
                 room: int = 10000) -> None:
        super().__init__(parent)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._weights: dict[int, int] = {}  # id(item) -> its weight, for the items that weigh more than 1
        self._extra = 0  # what those weigh beyond one each
        self._weigh = threading.Lock()
        self._subscribers: dict[type, list[Callable[[list], None]]] = defaultdict(list)
        self._budget = budget_ms / 1000.0
        self._room = room
        self._limit = _MAX_BATCH  # events the next drain may take
        self._when_idle: list[Callable[[], None]] = []
        self._interval = interval_ms
        self._timer = QTimer(self)
        self._timer.setInterval(interval_ms)
        self._timer.timeout.connect(self.drain)
        self._timer.start()

    def put(self, event: object, weight: int = 1) -> None:
        """Queue ``event``, which stands for ``weight`` events; safe from any thread."""
        if weight > 1:
            with self._weigh:
                self._weights[id(event)] = weight
                self._extra += weight - 1
        self._queue.put(event)

    def _taken(self, item: object) -> int:
        if not self._weights:
            return 1
        with self._weigh:
            weight = self._weights.pop(id(item), 1)
            self._extra -= weight - 1
        return weight

    @property
    def queued(self) -> int:
        """The events queued (an item put with a weight counts as that many)."""
        return self._queue.qsize() + self._extra

    @property
    def has_room(self) -> bool:
        """True while fewer than ``room`` events are queued; a producer that can wait (a replay's
        feeder) waits otherwise. Safe from any thread."""
        return self.queued < self._room

    @property
    def catching_up(self) -> bool:
        """True while a backlog waits: more queued than the smallest drain takes (a replay's seek; a live
        stream is drained as it comes)."""
        return self.queued > _MIN_BATCH

    @property
    def idle(self) -> bool:
        """True when nothing is queued (every event put so far reached its subscribers)."""
        return self._queue.empty()

    def subscribe(self, kind: type, handler: Callable[[list], None]) -> None:
        """Call ``handler(batch)`` on the GUI thread with the queued events of type ``kind``."""
        self._subscribers[kind].append(handler)

    def unsubscribe(self, kind: type, handler: Callable[[list], None]) -> None:
        """Undo :meth:`subscribe`."""
        if handler in self._subscribers.get(kind, []):
            self._subscribers[kind].remove(handler)

    def drain(self) -> int:
        """Deliver what is queued, up to the events the budget allows; returns the number of events."""
        start = time.perf_counter()
        batches: dict[type, list] = defaultdict(list)
        n = 0
        # one event at least: a tick whose thread lost the CPU before its first take (a loaded machine) still
        # moves, and a drain that took nothing means nothing was queued
        while n < self._limit and (not n or time.perf_counter() - start < self._budget):
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                break
            batches[type(event)].append(event)
            n += self._taken(event)
        for kind, batch in batches.items():
            for handler in list(self._subscribers.get(kind, [])):
                handler(batch)
        spent = time.perf_counter() - start
        if spent > self._budget and n:
            self._limit = max(_MIN_BATCH, int(n * self._budget / spent))
        elif n >= self._limit and spent < self._budget / 2:
            self._limit = min(_MAX_BATCH, 2 * self._limit)
        # a backlog (a replay's seek) is taken three times as often, each tick still within its budget
        self._timer.setInterval(self._interval // 3 if self.catching_up else self._interval)
        if self._when_idle and self._queue.empty():
            then, self._when_idle = self._when_idle, []
            for fn in then:
                fn()
        return n

    def when_idle(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the GUI thread once every event queued so far reached its subscribers (at once if
        none is queued): a replay's note selects its capture only when the Captures dock holds it."""
        if self._queue.empty():
            fn()
        else:
            self._when_idle.append(fn)

    def discard(self) -> int:
        """Drop every queued event (a replay seeking back: the views are cleared and fed again); how many."""
        n = 0
        while True:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                return n
            n += self._taken(item)

    def stop(self) -> None:
        """Stop the timer (on window close)."""
        self._timer.stop()
