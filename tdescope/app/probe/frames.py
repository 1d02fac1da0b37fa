"""The probe's frame format: the one definition both ends of a spool use.

Stdlib only, on purpose: the gdb-side helper (``app/gdb/_probe_helper.py``)
runs inside gdb's own Python, outside the workbench's environment, and loads
this file by its path; the workbench's spool reader imports it as a module.
So the header layout, the frame kinds and the notice names exist once.

A frame is a ``<BIiqIdd`` header (kind, seq, pgno, context, length, ts, busy_us)
followed by ``length`` bytes: the buffer at entry (:attr:`FrameKind.BEFORE`),
at return (:attr:`FrameKind.AFTER`), or a notice (:attr:`FrameKind.NOTICE`):
UTF-8 JSON ``{"event": <Notice value>, ...fields}``.
"""

import enum
import json
import struct
import time
from typing import NamedTuple

__all__ = ["HEADER", "Frame", "FrameKind", "Notice", "notice_of", "pack", "pack_notice", "unpack"]

HEADER = struct.Struct("<BIiqIdd")


class FrameKind(enum.IntEnum):
    """What a frame carries."""

    BEFORE = 0  #: the input buffer, copied at the probed function's entry
    AFTER = 1  #: the output buffer, copied when the call returns (empty: it never returned)
    NOTICE = 2  #: a notice from the probe: UTF-8 JSON with an ``event`` field


class Notice(str, enum.Enum):
    """What a notice frame says. Replies answer the workbench's calls; the rest arrive unasked."""

    ARMED = "armed"  #: reply to ``arm``: ``armed`` (symbol or None), ``pending``, ``locations``, ``errors``
    DISARMED = "disarmed"  #: reply to ``disarm``: ``captures``, ``completed``, ``busy_s``, ``hits``
    RESUMED = "resumed"  #: a paused probe is back in the target's code
    PAUSED = "paused"  #: stop budget spent: ``resume_in`` seconds until it may re-arm, ``busy_s``
    WINDOW_CLOSED = "window-closed"  #: the probe reached a limit: ``reason``
    BUSY = "busy"  #: running total of stopped time, uncaptured hits included: ``busy_s``, ``hits``
    RETURN_SITE = "return-site"  #: a breakpoint was planted at return ``address`` (for the guard)
    ARMED_ON_LOAD = "armed-on-load"  #: a pending probe found its ``symbol`` in ``objfile``
    READ_FAILED = "read-failed"  #: a buffer could not be read: ``seq``, ``side``, ``message``
    PROBE_ERROR = "probe-error"  #: a hit failed to evaluate the recipe: ``message``
    REINSERTED = "reinserted"  #: the probe was written again after the kernel took it out: ``reinserted`` so far


class Frame(NamedTuple):
    """One decoded frame; ``data`` is the copied buffer or the notice's JSON.

    A named tuple, not a dataclass: an eBPF probe hands over ~100k of these a second."""

    kind: FrameKind
    seq: int
    pgno: int
    context: int  #: what the call belongs to (:attr:`ProbeRecipe.context`); -1: none
    ts: float
    busy_us: float
    data: bytes


def pack(kind, seq, pgno, context, data, busy_us, ts=None):
    """The bytes of one frame (``ts`` defaults to now)."""
    return HEADER.pack(int(kind), seq, pgno, context, len(data), time.time() if ts is None else ts, busy_us) + data


def pack_notice(notice, **fields):
    """The bytes of one notice frame."""
    body = dict(fields, event=Notice(notice).value)
    return pack(FrameKind.NOTICE, 0, -1, -1, json.dumps(body).encode(), 0.0)


def unpack(buf):
    """Decode the complete frames at the start of ``buf``.

    Returns
    -------
    frames : list of Frame
    used : int
        Bytes consumed; a partial frame at the end is left for the next call.
    """
    frames = []
    pos = 0
    size = HEADER.size
    while len(buf) - pos >= size:
        kind, seq, pgno, context, length, ts, busy = HEADER.unpack_from(buf, pos)
        end = pos + size + length
        if end > len(buf):
            break
        frames.append(Frame(FrameKind(kind), seq, pgno, context, ts, busy, bytes(buf[pos + size:end])))
        pos = end
    return frames, pos


def notice_of(frame):
    """``(Notice, fields)`` of a notice frame; ``(None, fields)`` for a notice this version does not know."""
    fields = json.loads(frame.data or b"{}")
    try:
        return Notice(fields.pop("event", None)), fields
    except ValueError:
        return None, fields
