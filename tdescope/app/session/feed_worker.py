"""The replay's reading process: a session file's events, decoded in a process of their own.

Decoding a recorded event (SQLite, zlib, JSON, the dataclass) is Python work, ~10 µs an event; done on
a thread of the window's process it held the GIL the GUI thread waits for, and a seek through an hour
stalled the window (``bench_seek``: p99 ~120 ms; with the events decoded elsewhere, ~40 ms). This
process decodes; the window's process only unpickles ready batches where it consumes them (the event
pump, on the GUI thread, within its budget).

Run as ``python -m tdescope.app.session.feed_worker`` by :class:`~tdescope.app.session.feeder.SessionFeeder`.
Its stdin carries JSON lines: first ``{"path": ..., "passphrase": ...}`` (never on the command line),
then ranges ``{"rid": N, "start": ts|null, "end": ts}``; a new range abandons the one under way. Its
stdout carries frames (:func:`write_frame`): ``EVENTS`` (a pickled list of at most :data:`BATCH`
events, time order), ``DONE`` when a range is complete, ``ERROR`` (one line) when the file cannot be
read, after which it exits. EOF on stdin (the window closed the replay, or died) ends it; so does a
write to a window that is gone.

The pickles cross only this pipe, from a child this installation started, and hold only what the
codec rebuilt from the closed event map: the session file itself is never unpickled.
"""

from __future__ import annotations

import json
import pickle
import struct
import sys
import threading
from typing import BinaryIO

__all__ = ["BATCH", "DONE", "ERROR", "EVENTS", "SLICE_S", "read_frame", "write_frame"]

#: Frame kinds.
EVENTS, DONE, ERROR = 1, 2, 3
#: Events per EVENTS frame.
BATCH = 256
#: Session seconds read per query: a new range is noticed between two slices.
SLICE_S = 10.0
_HEADER = struct.Struct("<IIBI")  # body length, range id, kind, events in the body


def write_frame(out: BinaryIO, rid: int, kind: int, body: bytes = b"", count: int = 0) -> None:
    """One frame on ``out``, flushed; ``count`` is the number of events in ``body``."""
    out.write(_HEADER.pack(len(body), rid, kind, count) + body)
    out.flush()


def read_frame(inp: BinaryIO) -> tuple[int, int, int, bytes] | None:
    """``(rid, kind, count, body)``, or None at the end of the stream (the process ended)."""
    head = inp.read(_HEADER.size)
    if len(head) < _HEADER.size:
        return None
    size, rid, kind, count = _HEADER.unpack(head)
    body = inp.read(size) if size else b""
    return None if len(body) < size else (rid, kind, count, body)


class _Requests:
    """The latest range asked for on stdin, read by a thread of its own."""

    def __init__(self, inp) -> None:
        self._inp = inp
        self._cond = threading.Condition()
        self.pending: dict | None = None
        self.closed = False
        threading.Thread(target=self._read, name="feed-requests", daemon=True).start()

    def _read(self) -> None:
        for line in self._inp:
            with self._cond:
                self.pending = json.loads(line)
                self._cond.notify_all()
        with self._cond:
            self.closed = True
            self._cond.notify_all()

    def next(self) -> dict | None:
        """The next range, waiting for one; None once stdin is closed."""
        with self._cond:
            self._cond.wait_for(lambda: self.pending is not None or self.closed)
            if self.closed:
                return None
            request, self.pending = self.pending, None
            return request

    @property
    def superseded(self) -> bool:
        """True when a newer range (or the end) came while one is under way."""
        return self.pending is not None or self.closed


def _send_batch(out: BinaryIO, rid: int, batch: list) -> None:
    write_frame(out, rid, EVENTS, pickle.dumps(batch, protocol=pickle.HIGHEST_PROTOCOL), len(batch))


def _feed_range(reader, request: dict, requests: _Requests, out: BinaryIO) -> None:
    rid, end = int(request["rid"]), float(request["end"])
    lo, hi = reader.span()
    if lo is None:
        write_frame(out, rid, DONE)
        return
    start = request["start"]
    a = lo if start is None else max(float(start), lo)
    stop = min(end, hi + SLICE_S)  # nothing lies past the last event
    batch: list = []
    while a < stop:
        b = min(a + SLICE_S, end)
        for event in reader.events(start=a, end=b):
            batch.append(event)
            if len(batch) == BATCH:
                if requests.superseded:
                    return
                _send_batch(out, rid, batch)
                batch = []
        if requests.superseded:
            return
        a = b
    if batch:
        _send_batch(out, rid, batch)
    write_frame(out, rid, DONE)


def main() -> int:
    """Serve ranges of one session file until stdin closes."""
    from tdescope.app.session.reader import SessionReader

    out = sys.stdout.buffer
    opening = json.loads(sys.stdin.readline() or "{}")
    try:
        reader = SessionReader(opening["path"], writable=False, passphrase=opening.get("passphrase"))
    except Exception as exc:  # noqa: BLE001 - one line to the window, whatever the file says
        write_frame(out, 0, ERROR, str(exc).encode())
        return 1
    requests = _Requests(sys.stdin)
    try:
        while (request := requests.next()) is not None:
            try:
                _feed_range(reader, request, requests, out)
            except BrokenPipeError:
                return 0  # the window is gone
            except Exception as exc:  # noqa: BLE001 - a file damaged half way: one line, then stop
                write_frame(out, int(request["rid"]), ERROR, str(exc).encode())
                return 1
    finally:
        reader.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
