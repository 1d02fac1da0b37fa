"""The out-of-band channel of a probe: frames that gdb's helper appends to a spool file.

The gdb-side helper (``app/gdb/_probe_helper.py``) writes each frame as a
``<BIiiIdd`` header (kind, seq, pgno, mode, length, ts, busy_us) followed by
``length`` bytes: kind 0 is the buffer at entry, 1 the buffer at return, 2 a
notice (UTF-8 JSON). :class:`FramePairs` turns them back into page captures.
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Iterator

from tdescope.app.events import PageCapture

__all__ = ["FramePairs", "SpoolReader"]

_HEADER = struct.Struct("<BIiiIdd")
BEFORE, AFTER, NOTICE = 0, 1, 2


class SpoolReader:
    """Reads complete frames appended to a spool file, leaving partial ones for later."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._fh = open(path, "rb")
        self._buf = b""

    def frames(self) -> Iterator[tuple]:
        """Yield ``(kind, seq, pgno, mode, ts, busy_us, data)`` for each complete new frame."""
        self._buf += self._fh.read()
        pos = 0
        while len(self._buf) - pos >= _HEADER.size:
            kind, seq, pgno, mode, length, ts, busy = _HEADER.unpack_from(self._buf, pos)
            end = pos + _HEADER.size + length
            if end > len(self._buf):
                break
            yield kind, seq, pgno, mode, ts, busy, self._buf[pos + _HEADER.size : end]
            pos = end
        self._buf = self._buf[pos:]

    def close(self) -> None:
        self._fh.close()


class FramePairs:
    """Pairs "before" and "after" frames by sequence number into :class:`PageCapture` events.

    Parameters
    ----------
    reader : SpoolReader
        Where the frames come from.
    make : callable
        ``make(seq, ts, pgno, before, after, stop_us) -> PageCapture``.
    entry_only : bool
        The recipe copies nothing at return: a "before" frame is a whole capture.
    """

    def __init__(self, reader: SpoolReader, make: Callable[..., PageCapture], entry_only: bool) -> None:
        self._reader = reader
        self._make = make
        self._entry_only = entry_only
        self.pending: dict[int, tuple] = {}
        self.captures = 0
        self.stopped_s = 0.0
        self.closed_reason: str | None = None
        #: Seconds until the probe may re-arm, set when the helper paused it (stop budget).
        self.paused_for: float | None = None
        #: Return addresses the helper planted after-breakpoints at (for the guard).
        self.return_sites: set[int] = set()
        #: The helper's running total of stopped time, uncaptured hits included.
        self.helper_busy_s = 0.0

    @property
    def stopped_total_s(self) -> float:
        """Stopped time so far: the helper's total when it has said one (it counts
        uncaptured hits too), else the sum over the captured frames."""
        return max(self.stopped_s, self.helper_busy_s)

    def drain(self, limit: int) -> Iterator[PageCapture]:
        """Yield the captures completed by the new frames, up to ``limit`` in all."""
        for kind, seq, pgno, _mode, ts, busy, data in self._reader.frames():
            self.stopped_s += busy / 1e6
            if kind == NOTICE:
                note = json.loads(data or b"{}")
                event = note.get("event")
                if event == "window-closed":
                    self.closed_reason = f"limit: {note.get('reason')}"
                elif event == "paused":
                    self.paused_for = float(note.get("resume_in") or 0.0)
                elif event == "return-site":
                    self.return_sites.add(int(note["address"]))
                if "busy_s" in note:
                    self.helper_busy_s = max(self.helper_busy_s, float(note["busy_s"]))
                continue
            if self.captures >= limit:
                continue
            if kind == BEFORE and self._entry_only:
                self.captures += 1
                yield self._make(seq, ts, pgno, data, b"", busy)
            elif kind == BEFORE:
                self.pending[seq] = (ts, pgno, data, busy)
            elif kind == AFTER and seq in self.pending:
                t0, pg, before, busy0 = self.pending.pop(seq)
                self.captures += 1
                yield self._make(seq, t0, pg, before, data, busy0 + busy)
