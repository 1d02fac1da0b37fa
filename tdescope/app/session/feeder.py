"""Feeding a recorded session's events to the views from a thread of its own.

A replay's play head asks for "everything up to t". Reading those events means SQLite reads,
zlib and the decoding of every row: seeking to the end of an hour-long session is the whole
file. :class:`SessionFeeder` does it on its own thread (with its own reader: an SQLite
connection belongs to the thread that opened it) and hands the events, in time order, to
``feed``, which must be safe to call from that thread (the live session's ``publish`` is).
The caller asks with :meth:`extend` (further on) or :meth:`restart` (back: the views are
cleared by the caller's ``reset``, between the feeder's events, never during one).

A feeder reads faster than the views take events in. Given ``ready`` (the consumer has room), it
waits while ``ready()`` is false, checked every :data:`CHECK_EVERY` events: the backlog stays
bounded and the feeder leaves the CPU and the GIL to the thread that draws (the GUI thread), which
is what a seek to the end of an hour waits for. A restart or close wakes it at once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tdescope.app.session.reader import SessionReader

__all__ = ["CHECK_EVERY", "SessionFeeder"]

#: Events fed between two looks at ``ready``.
CHECK_EVERY = 256
#: How often a waiting feeder looks at ``ready`` again (s): the consumer does not signal it.
_RECHECK_S = 0.02


class SessionFeeder:
    """Feeds events with ``ts < end`` for the latest ``end`` asked for; one thread, one reader.

    Parameters
    ----------
    open_reader : callable
        Opens the session (called once, on the feeder's thread).
    feed : callable
        Receives each event, on the feeder's thread.
    on_caught_up : callable, optional
        Called (on the feeder's thread) each time everything asked for has been fed.
    on_error : callable, optional
        Called with one line when reading fails; the feeder then stops.
    ready : callable, optional
        True while the consumer has room for more events (any thread may call it); default: always.
    """

    def __init__(self, open_reader: Callable[[], SessionReader], feed: Callable[[object], None],
                 on_caught_up: Callable[[], None] | None = None,
                 on_error: Callable[[str], None] | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        self._open = open_reader
        self._feed = feed
        self._ready = ready
        self._on_caught_up = on_caught_up
        self._on_error = on_error
        self._cond = threading.Condition()
        self._want: float | None = None  # feed events with ts < want ...
        self._done: float | None = None  # ... those with ts < done have been fed
        self._generation = 0  # bumped by restart: a range under way is abandoned
        self._busy = False
        self._closed = False
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="session-feeder", daemon=True)
        self._thread.start()

    @property
    def caught_up(self) -> bool:
        """True when every event asked for has been fed (or reading failed)."""
        with self._cond:
            return self.error is not None or (not self._busy and self._want == self._done)

    def extend(self, end: float) -> None:
        """Feed on, up to ``end`` (exclusive); an ``end`` below what was asked changes nothing."""
        with self._cond:
            if self._want is None or end > self._want:
                self._want = end
                self._cond.notify_all()

    def restart(self, end: float, reset: Callable[[], None], timeout: float = 5.0) -> None:
        """Stop feeding, call ``reset`` (between two events), then feed from the start up to ``end``."""
        with self._cond:
            self._generation += 1
            self._want = None
            self._cond.notify_all()
            self._cond.wait_for(lambda: not self._busy, timeout)
        reset()
        with self._cond:
            self._done, self._want = None, end
            self._cond.notify_all()

    def close(self, timeout: float = 2.0) -> None:
        """Stop the thread (it closes its reader); safe to call twice."""
        with self._cond:
            self._closed = True
            self._generation += 1
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the feeder's thread -----------------------------------------------------------------
    def _pending(self) -> bool:
        return self._closed or (self._want is not None and (self._done is None or self._want > self._done))

    def _run(self) -> None:
        try:
            reader = self._open()
        except Exception as exc:  # noqa: BLE001 - one line to the caller, whatever the reader says
            self._fail(exc)
            return
        try:
            while True:
                with self._cond:
                    self._cond.wait_for(self._pending)
                    if self._closed:
                        return
                    generation, start, end = self._generation, self._done, self._want
                    self._busy = True
                completed = False
                try:
                    for i, event in enumerate(reader.events(start=start, end=end)):
                        if i % CHECK_EVERY == 0 and self._ready is not None:
                            self._wait_for_room(generation)
                        if self._generation != generation:
                            break
                        self._feed(event)
                    else:
                        completed = True
                except Exception as exc:  # noqa: BLE001 - a file damaged half way: one line, then stop
                    self._fail(exc)
                    return
                finally:
                    with self._cond:
                        self._busy = False
                        if completed and generation == self._generation:
                            self._done = end
                        caught_up = not self._pending()
                        self._cond.notify_all()
                if caught_up and completed and self._on_caught_up is not None:
                    self._on_caught_up()
        finally:
            reader.close()

    def _wait_for_room(self, generation: int) -> None:
        with self._cond:
            while not self._ready() and self._generation == generation and not self._closed:
                self._cond.wait(_RECHECK_S)

    def _fail(self, exc: Exception) -> None:
        with self._cond:
            self.error = f"replay stopped: {exc}"
            self._busy = False
            self._cond.notify_all()
        if self._on_error is not None:
            self._on_error(self.error)
