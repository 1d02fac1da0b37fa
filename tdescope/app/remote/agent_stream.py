"""The agent's stream: frames out on stdout, batched, and the watch on the workbench's heartbeat.

:class:`Out` is stdout shared by the request loop and the window's thread; :class:`Silence` ends
the agent when a workbench that promised heartbeats (``PING``) stops sending anything.
"""

from __future__ import annotations

import contextlib
import threading
import time

from tdescope.app.remote import wire
from tdescope.app.remote.protocol import Kind, encode_parts, pack_fields

__all__ = ["BATCH_BYTES", "BATCH_MAX", "FLUSH_S", "SILENCE_S", "Out", "Silence"]

#: How long captures may wait in the agent before they are sent and flushed.
FLUSH_S = 0.02
#: A batch of captures leaves at this many captures, or this many page bytes.
BATCH_MAX, BATCH_BYTES = 128, 1 << 20
#: The agent disarms and exits after this long without a frame from a workbench that sends heartbeats
#: (``PING`` every ``client.HEARTBEAT_S``): three heartbeats and more lost, which one slow link or busy
#: machine does not do, while a frozen workbench or a dead link whose TCP has not given up yet (hours) does.
SILENCE_S = 10.0


class Out:
    """stdout, shared by the request loop and the window's thread.

    Captures go out in batches (one ``CAPTURES`` frame per :data:`BATCH_MAX` captures or
    :data:`FLUSH_S`, whichever comes first); any other frame first sends the batch, so order holds."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self._dirty = False
        self._batch: list = []
        self._batch_bytes = 0
        self.closed = False
        threading.Thread(target=self._flusher, name="flush", daemon=True).start()

    def capture(self, capture) -> None:
        with self._lock:
            if self._batch and wire.batch_key(self._batch[0]) != wire.batch_key(capture):
                self._send_batch()
            self._batch.append(capture)
            self._batch_bytes += len(capture.before) + len(capture.after)
            if len(self._batch) >= BATCH_MAX or self._batch_bytes >= BATCH_BYTES:
                self._send_batch()

    def send(self, kind: Kind, header: dict | None = None, payload: bytes = b"") -> None:
        if not payload and header:  # a perf window, a process list: may outgrow an inline header
            header, payload = pack_fields(header)
        with self._lock:
            self._send_batch()
            self._write(kind, header, (payload,), flush=True)

    def _send_batch(self) -> None:  # the lock held
        if self._batch:
            head, parts = wire.captures_frame(self._batch)
            self._batch, self._batch_bytes = [], 0
            self._write(Kind.CAPTURES, head, parts, flush=False)

    def _write(self, kind: Kind, header, parts, flush: bool) -> None:  # the lock held
        if self.closed:
            return
        try:
            self._stream.write(encode_parts(kind, header, parts))
            if flush:
                self._stream.flush()
            self._dirty = not flush
        except (BrokenPipeError, OSError, ValueError):
            self.closed = True  # the workbench is gone; stdin's end says so too

    def _flusher(self) -> None:
        while not self.closed:
            time.sleep(FLUSH_S)
            with self._lock:
                self._send_batch()
                if self._dirty and not self.closed:
                    try:
                        self._stream.flush()
                    except (BrokenPipeError, OSError, ValueError):
                        self.closed = True
                    self._dirty = False


class Silence:
    """Calls ``on_silence`` (once, on its own thread) when no frame came for :data:`SILENCE_S` after the
    workbench's first ``PING`` said it sends heartbeats. A workbench without heartbeats is left to stdin's end.

    While the agent answers a request (:meth:`answering`) it reads nothing, so the heartbeats wait in the
    pipe unread: that time is not the workbench's silence. A search of every process's mapped ELF files
    took over 10 s on a loaded machine, and the agent left in the middle of it."""

    def __init__(self, on_silence) -> None:
        self._on_silence = on_silence
        self._last = time.monotonic()
        self._answering = False
        self._thread: threading.Thread | None = None

    def heard(self) -> None:
        self._last = time.monotonic()

    @contextlib.contextmanager
    def answering(self):
        """The request loop answers a request: no silence counts until it reads again."""
        self._answering = True
        try:
            yield
        finally:
            self._last = time.monotonic()
            self._answering = False

    def arm(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._watch, name="silence", daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        while self._answering or time.monotonic() - self._last < SILENCE_S:
            time.sleep(0.25)
        self._on_silence()
