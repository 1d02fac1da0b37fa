"""The spool consumer: frames in, page captures and the probe's notices out.

A backend hands over :class:`~tdescope.app.probe.frames.Frame` records (the gdb
backend tails the spool file its helper appends to, see :class:`SpoolReader`);
:class:`FramePairs` pairs "before" and "after" frames into page captures and
keeps what the notices said (closed, paused, stopped time).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable, Iterator

from tdescope.app.events import PageCapture
from tdescope.app.probe.frames import Frame, FrameKind, Notice, notice_of, unpack
from tdescope.app.probe.stats import EbpfStats, GdbStats

__all__ = ["REORDER_S", "FramePairs", "SpoolReader"]


class SpoolReader:
    """Reads complete frames appended to a spool file, leaving partial ones for later."""

    def __init__(self, path: str | os.PathLike) -> None:
        self._fh = open(path, "rb")
        self._buf = b""

    def frames(self) -> list[Frame]:
        """The complete frames appended since the last call."""
        self._buf += self._fh.read()
        frames, used = unpack(self._buf)
        self._buf = self._buf[used:]
        return frames

    def close(self) -> None:
        self._fh.close()


#: How long a capture whose call has not returned holds back later ones: a call that never returns
#: (a thread unwound past it) must not hold the stream forever. Measured in probe time (the latest frame's) and in
#: time here since the call's entry frame arrived: a probe that sends nothing more (its count reached)
#: frees it too.
REORDER_S = 5.0


class FramePairs:
    """Pairs "before" and "after" frames by sequence number into :class:`PageCapture` events.

    Captures come out in sequence order: calls on several threads return in any
    order, so a completed pair waits until every earlier call still out has
    returned (or has been out for :data:`REORDER_S`, or the window ends:
    ``drain(..., final=True)``).

    Parameters
    ----------
    make : callable
        ``make(seq, ts, pgno, before, after, stop_us, context) -> PageCapture``.
    entry_only : bool
        The recipe copies nothing at return: a "before" frame is a whole capture.
    keep : callable, optional
        The keep rate (:class:`~tdescope.app.probe.keep_rate.KeepRate` ``.allow``): asked as each
        pair completes; a pair it refuses counts as a capture, is counted in :attr:`thinned`, and is
        never built into a :class:`PageCapture`.
    """

    def __init__(self, make: Callable[..., PageCapture], entry_only: bool,
                 keep: Callable[[], bool] | None = None) -> None:
        self._make = make
        self._entry_only = entry_only
        self._keep = keep
        #: Captures the keep rate did not keep (part of :attr:`captures`).
        self.thinned = 0
        self.pending: dict[int, tuple] = {}
        self._done: dict[int, tuple] = {}  # completed pairs waiting for an earlier call's return
        self._latest_ts = 0.0
        self.captures = 0
        self.stopped_s = 0.0
        self.closed_reason: str | None = None
        #: Seconds until the probe may re-arm, set when the probe paused itself (stop budget).
        self.paused_for: float | None = None
        #: The probe's own counts, None before the first: gdb's helper's from its notices, eBPF's as the
        #: window reads them (:meth:`count`). Their ``busy_s``: stopped time, uncaptured hits included.
        self.stats: GdbStats | EbpfStats | None = None
        #: Pages that reached the workbench but were not handed over: after the window's deadline,
        #: over its count, or (counted by the window at its end) never paired or never read.
        self.not_kept = 0

    @property
    def stopped_total_s(self) -> float:
        """Stopped time so far: the probe's total when it has said one (it counts
        uncaptured hits too), else the sum over the captured frames."""
        return max(self.stopped_s, self.stats.busy_s if self.stats is not None else 0.0)

    def count(self, stats: EbpfStats | None) -> None:
        """Keep the counts the window read from an in-process probe (eBPF), when it read any."""
        if stats is not None:
            self.stats = stats

    def drain(self, frames: Iterable[Frame], limit: int, until: float | None = None,
              stop: Callable[[], bool] | None = None, final: bool = False) -> Iterator[PageCapture]:
        """Yield the captures ``frames`` complete, in sequence order, up to ``limit`` in all, until
        ``time.monotonic()`` passes ``until`` and while ``stop()`` is false; the pages past any of
        them are counted in :attr:`not_kept`, never built.

        ``final``: no frame will follow (the probe is out), so nothing waits for an earlier call.
        """
        for frame in frames:
            self.stopped_s += frame.busy_us / 1e6
            if frame.kind is FrameKind.NOTICE:
                self._note(*notice_of(frame))
                continue
            self._latest_ts = max(self._latest_ts, frame.ts)
            if (self.captures + len(self._done) >= limit or (until is not None and time.monotonic() > until)
                    or (stop is not None and stop())):
                if frame.kind is FrameKind.BEFORE:
                    self.not_kept += 1
                continue
            if frame.kind is FrameKind.BEFORE and not self._entry_only:
                self.pending[frame.seq] = (frame.ts, frame.pgno, frame.data, frame.busy_us, frame.context,
                                           time.monotonic())
                continue
            if frame.kind is FrameKind.BEFORE:
                self._done[frame.seq] = (frame.seq, frame.ts, frame.pgno, frame.data, b"", frame.busy_us,
                                         frame.context)
            elif frame.seq in self.pending:
                t0, pgno, before, busy0, context, _arrived = self.pending.pop(frame.seq)
                self._done[frame.seq] = (frame.seq, t0, pgno, before, frame.data, busy0 + frame.busy_us, context)
            else:
                continue
            yield from self._release(limit, final)
        yield from self._release(limit, final)

    def _release(self, limit: int, final: bool) -> Iterator[PageCapture]:
        """The completed pairs no call still out comes before (every one when ``final``); a pair the
        keep rate refuses counts as a capture and in :attr:`thinned`, and is never built."""
        now = time.monotonic()
        while self._done:
            first = min(self._done)
            if not final and any(seq < first and self._latest_ts - ts < REORDER_S and now - arrived < REORDER_S
                                 for seq, (ts, *_rest, arrived) in self.pending.items()):
                return
            args = self._done.pop(first)
            if self.captures >= limit:
                self.not_kept += 1
                continue
            self.captures += 1
            if self._keep is not None and not self._keep():
                self.thinned += 1  # a whole pair, so a page is never both thinned and unpaired
                continue
            yield self._make(*args)

    def _note(self, notice: Notice | None, fields: dict) -> None:
        if notice is Notice.WINDOW_CLOSED:
            self.closed_reason = f"limit: {fields.get('reason')}"
        elif notice is Notice.PAUSED:
            self.paused_for = float(fields.get("resume_in") or 0.0)
        if "busy_s" in fields or "hits" in fields or "reinserted" in fields:  # gdb's helper's counts
            was = self.stats if isinstance(self.stats, GdbStats) else GdbStats()
            self.stats = GdbStats(busy_s=max(was.busy_s, float(fields.get("busy_s") or 0.0)),
                                  hits=int(fields.get("hits", was.hits)),
                                  reinserted=int(fields.get("reinserted", was.reinserted)))
