"""Notes: what a trainer or support engineer wrote about a moment of a session.

A note points at something (:class:`NoteTarget`): a capture, a byte range in
one, a hotspot window or symbol, a wait interval, a time range, or nothing
(free-standing). Notes live in the session file's ``notes`` table and are
listed in time order: by the moment they point at, else by when they were written.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from tdescope.app.events.base import Word
from tdescope.app.session.schema import DB_DATABASE_ERRORS, connect_existing, damaged

__all__ = ["NOTE_KINDS", "Note", "NoteKind", "NoteTarget", "NoteStore", "read_notes"]

class NoteKind(Word):
    """What a note can point at (a note file's word for it)."""

    CAPTURE = "capture"
    BYTES = "bytes"
    HOTSPOT = "hotspot"
    SYMBOL = "symbol"
    WAIT = "wait"
    RANGE = "range"
    FREE = "free"


#: What a note can point at.
NOTE_KINDS = tuple(NoteKind)


@dataclass(frozen=True, slots=True)
class NoteTarget:
    """What a note is about.

    Attributes
    ----------
    kind : NoteKind
        What it points at (a file's word becomes the member; an unknown one makes a free note).
    ts, ts_end : float or None
        The moment (or interval) on the session's clock.
    seq : int or None
        Capture number (with ``ts`` it identifies the capture).
    start, end : int or None
        Byte range ``[start, end)`` in the capture (kind ``bytes``).
    side : str
        ``before`` or ``after`` for byte ranges.
    symbol : str
        Function name (kind ``symbol``/``hotspot``) or wait event (kind ``wait``).
    """

    kind: NoteKind = NoteKind.FREE
    ts: float | None = None
    ts_end: float | None = None
    seq: int | None = None
    start: int | None = None
    end: int | None = None
    side: str = ""
    symbol: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", NoteKind(self.kind))

    def describe(self) -> str:
        """Short human text: ``capture #3, after bytes 0x0010–0x001f`` (offsets in hex, as the hex view)."""
        k = self.kind
        if k is NoteKind.CAPTURE:
            return f"capture #{self.seq}"
        if k is NoteKind.BYTES:
            return f"capture #{self.seq}, {self.side} bytes 0x{self.start or 0:04x}–0x{(self.end or 0) - 1:04x}"
        if k in (NoteKind.HOTSPOT, NoteKind.SYMBOL):
            return f"hotspot {self.symbol}" if self.symbol else "hotspot window"
        if k is NoteKind.WAIT:
            return f"wait {self.symbol}" if self.symbol else "wait interval"
        if k is NoteKind.RANGE:
            span = (self.ts_end or 0) - (self.ts or 0)
            if span <= 0 and self.ts is not None:
                return "moment " + time.strftime("%H:%M:%S", time.localtime(self.ts))
            return f"time range ({span:.1f} s)"
        return "free note"


@dataclass(frozen=True, slots=True)
class Note:
    """One note. ``id`` is None until stored."""

    id: int | None
    created: float
    edited: float
    target: NoteTarget
    text: str

    @property
    def when(self) -> float:
        """The time it sorts by: its target's moment, else when it was written."""
        return self.target.ts if self.target.ts is not None else self.created


class NoteStore:
    """Notes of one session file, on their own connection (the recorder may be writing).

    Parameters
    ----------
    path : str or Path
        An existing session file.
    passphrase : str, optional
        The passphrase of an encrypted session file.
    """

    def __init__(self, path: str | os.PathLike, passphrase: str | None = None) -> None:
        self.path = Path(path)
        self._conn = connect_existing(self.path, writable=True, passphrase=passphrase)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def _exec(self, sql: str, args=()) -> sqlite3.Cursor:
        try:
            with self._lock:
                return self._conn.execute(sql, args)
        except DB_DATABASE_ERRORS as exc:
            raise damaged(self.path, exc) from None

    def all(self) -> list[Note]:
        """Every note in time order."""
        rows = self._exec("SELECT id, created, edited, target, text FROM notes").fetchall()
        notes = [Note(i, c, e, _target(t), text) for i, c, e, t, text in rows]
        return sorted(notes, key=lambda n: (n.when, n.id or 0))

    def add(self, target: NoteTarget, text: str, note_id: int | None = None, created: float | None = None) -> Note:
        """Store a new note (``note_id`` lets undo bring a deleted note back under its id)."""
        now = time.time()
        note = Note(note_id, created or now, now, target, text)
        cur = self._exec(
            "INSERT INTO notes (id, created, edited, target_kind, target, ts, text) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (note_id, note.created, note.edited, target.kind, json.dumps(asdict(target)), note.when, text),
        )
        return replace(note, id=cur.lastrowid)

    def edit(self, note_id: int, text: str) -> Note | None:
        """Change the text of a note; returns it, or None when it is gone."""
        self._exec("UPDATE notes SET text = ?, edited = ? WHERE id = ?", (text, time.time(), note_id))
        return self.get(note_id)

    def get(self, note_id: int) -> Note | None:
        """The note with this id, or None."""
        row = self._exec("SELECT id, created, edited, target, text FROM notes WHERE id = ?", (note_id,)).fetchone()
        return Note(row[0], row[1], row[2], _target(row[3]), row[4]) if row else None

    def delete(self, note_id: int) -> None:
        """Remove a note."""
        self._exec("DELETE FROM notes WHERE id = ?", (note_id,))


def _target(text: str) -> NoteTarget:
    try:
        values = json.loads(text)
        names = set(NoteTarget.__dataclass_fields__)
        return NoteTarget(**{k: v for k, v in values.items() if k in names})
    except (ValueError, TypeError):
        return NoteTarget()


def read_notes(conn: sqlite3.Connection) -> list[Note]:
    """Notes through an already open connection (reports, ``tdescope info``)."""
    rows = conn.execute("SELECT id, created, edited, target, text FROM notes").fetchall()
    return sorted((Note(i, c, e, _target(t), text) for i, c, e, t, text in rows), key=lambda n: (n.when, n.id or 0))
