"""Feeding a recorded session's events to the views: decoded in a process, handed over in batches.

A replay's play head asks for "everything up to t". Reading those events means SQLite reads,
zlib and the decoding of every row: seeking to the end of an hour-long session is the whole
file. That decoding is Python work; on a thread of the window's process it holds the GIL the GUI
thread waits for (a seek stalled the window, p99 ~120 ms). So :class:`SessionFeeder` has a process
decode (:mod:`~tdescope.app.session.feed_worker`), and a thread of its own only moves the ready
batches (:class:`PackedEvents`, still pickled) to ``feed``: the consumer unpacks them where it
consumes them, within its budget (the window's event pump, on the GUI thread). The caller asks
with :meth:`extend` (further on) or :meth:`restart` (back: the views are cleared by the caller's
``reset``, between two batches, never during one).

A process reads faster than the views take events in. Given ``ready`` (the consumer has room), the
feeder's thread waits while ``ready()`` is false before handing over a batch; the pipe then fills
and the process waits too: the backlog stays bounded. A restart or close wakes it at once.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tdescope.app.session import feed_worker
from tdescope.app.system.child_env import PYTHON, child_env

__all__ = ["PackedEvents", "SessionFeeder"]

#: How often a waiting feeder looks at ``ready`` again (s): the consumer does not signal it.
_RECHECK_S = 0.02


@dataclass(frozen=True, slots=True)
class PackedEvents:
    """A batch of replayed events as the reading process sent them (time order), unpacked by the
    consumer: :meth:`events` is Python work, done where it may be (the GUI thread's pump, in budget)."""

    data: bytes
    count: int

    def events(self) -> list:
        """The events."""
        return pickle.loads(self.data)


class SessionFeeder:
    """Feeds the events with ``ts < end`` for the latest ``end`` asked for: one process reads, one thread hands over.

    Parameters
    ----------
    path : str or PathLike
        The session file.
    feed : callable
        Receives each :class:`PackedEvents`, in time order, on the feeder's thread.
    passphrase : str, optional
        Of an encrypted file; it goes to the reading process on its stdin, never its command line.
    on_caught_up : callable, optional
        Called (on the feeder's thread) each time everything asked for has been fed.
    on_error : callable, optional
        Called with one line when reading fails; the feeder then stops.
    ready : callable, optional
        True while the consumer has room for more events (any thread may call it); default: always.
    """

    def __init__(self, path: str | os.PathLike, feed: Callable[[PackedEvents], None],
                 passphrase: str | None = None,
                 on_caught_up: Callable[[], None] | None = None,
                 on_error: Callable[[str], None] | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        self._path = os.fspath(path)
        self._passphrase = passphrase
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
        self._proc: subprocess.Popen | None = None
        self._io = threading.Lock()  # the process's stdin: the thread writes, close() closes
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
        """Stop feeding, call ``reset`` (between two batches), then feed from the start up to ``end``."""
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
        """End the reading process and the thread; safe to call twice."""
        with self._cond:
            self._closed = True
            self._generation += 1
            self._cond.notify_all()
        self._close_stdin()  # the process ends at EOF, and the thread at the end of its output
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    # -- the feeder's thread -----------------------------------------------------------------
    def _pending(self) -> bool:
        return self._closed or (self._want is not None and (self._done is None or self._want > self._done))

    def _run(self) -> None:
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", feed_worker.__name__], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL, start_new_session=True, env=child_env(PYTHON))
        except OSError as exc:
            self._fail(f"cannot start the reading process: {exc}")
            return
        rid = 0
        try:
            self._send({"path": self._path, "passphrase": self._passphrase})
            while True:
                with self._cond:
                    self._cond.wait_for(self._pending)
                    if self._closed:
                        return
                    generation, start, end = self._generation, self._done, self._want
                    self._busy = True
                rid += 1
                completed = False
                try:
                    self._send({"rid": rid, "start": start, "end": end})
                    completed = self._hand_over(rid, generation)
                finally:
                    with self._cond:
                        self._busy = False
                        if completed and generation == self._generation:
                            self._done = end
                        caught_up = not self._pending()
                        self._cond.notify_all()
                if caught_up and completed and self._on_caught_up is not None:
                    self._on_caught_up()
        except _Ended as ended:
            if not self._closed:
                self._fail(str(ended))
        finally:
            self._close_stdin()
            try:
                self._proc.wait(2.0)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc.stdout.close()

    def _hand_over(self, rid: int, generation: int) -> bool:
        """Move range ``rid``'s batches to ``feed``; True when it was complete, False when abandoned."""
        while True:
            frame = feed_worker.read_frame(self._proc.stdout)
            if frame is None:
                raise self._ended()
            got, kind, count, body = frame
            if kind == feed_worker.ERROR:
                raise _Ended(body.decode(errors="replace"))
            if got != rid:
                continue  # what was under way when this range was asked for
            if kind == feed_worker.DONE:
                return True
            if self._ready is not None:
                self._wait_for_room(generation)
            if self._generation != generation:
                return False
            self._feed(PackedEvents(body, count))

    def _send(self, message: dict) -> None:
        with self._io:
            try:
                self._proc.stdin.write((json.dumps(message) + "\n").encode())
                self._proc.stdin.flush()
            except (OSError, ValueError):  # closed: the process ended, or close() came first
                raise self._ended() from None

    def _ended(self) -> "_Ended":
        try:
            code = self._proc.wait(2.0)
        except subprocess.TimeoutExpired:  # its output or input closed, itself not (yet) gone
            return _Ended("the reading process stopped answering")
        return _Ended(f"the reading process ended (exit code {code})")

    def _close_stdin(self) -> None:
        with self._io:
            if self._proc is not None and not self._proc.stdin.closed:
                try:
                    self._proc.stdin.close()
                except OSError:
                    pass

    def _wait_for_room(self, generation: int) -> None:
        with self._cond:
            while not self._ready() and self._generation == generation and not self._closed:
                self._cond.wait(_RECHECK_S)

    def _fail(self, why: str) -> None:
        with self._cond:
            self.error = f"replay stopped: {why}"
            self._busy = False
            self._cond.notify_all()
        if self._on_error is not None:
            self._on_error(self.error)


class _Ended(Exception):
    """The reading process ended or said it cannot go on (the message is the one line)."""
