"""Reading a session file (.tds): metadata, counts, notes, events by kind and time range.

Written by :class:`~tdescope.app.session.file.SessionRecorder`; a newer, damaged or
truncated file is refused with one clear line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tdescope.app.events import Event
from tdescope.app.session import codec
from tdescope.app.session.meta import SessionMeta
from tdescope.app.session.notes import Note, read_notes
from tdescope.app.session.schema import DB_DATABASE_ERRORS, connect_existing, damaged

__all__ = ["SessionReader", "SessionSummary"]


@dataclass(frozen=True, slots=True)
class SessionSummary:
    """What ``tdescope info`` prints: span and counts, without loading events."""

    path: str
    schema_version: int
    meta: SessionMeta
    start: float | None
    end: float | None
    counts: dict  # short kind -> number
    notes: int

    @property
    def duration_s(self) -> float:
        """Seconds from the first to the last event (0 when empty)."""
        return (self.end - self.start) if self.start is not None and self.end is not None else 0.0


class SessionReader:
    """Read a session file: metadata, counts, events by kind and time range.

    Parameters
    ----------
    path : str or Path
    writable : bool
        Open read-write (notes can then be edited through :attr:`conn`).
    passphrase : str, optional
        The passphrase of an encrypted file (see :func:`is_encrypted`); without it
        such a file is refused with one line, as is a wrong one.
    """

    def __init__(self, path: str | os.PathLike, writable: bool = True, passphrase: str | None = None) -> None:
        self.path = Path(path)
        self.conn = connect_existing(self.path, writable=writable, passphrase=passphrase)
        self._lock = threading.Lock()
        #: Rows read but not rebuilt, by stored kind: names outside ``EVENT_TYPES`` or rows
        #: that no longer fit their class.
        self.skipped: Counter[str] = Counter()
        try:
            rows = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
            self.schema_version = self.conn.execute("PRAGMA user_version").fetchone()[0]
        except DB_DATABASE_ERRORS as exc:
            self.conn.close()
            raise damaged(self.path, exc) from None
        try:
            self.meta = SessionMeta.from_rows({k: json.loads(v) for k, v in rows.items()})
        except (ValueError, TypeError) as exc:
            self.conn.close()
            raise damaged(self.path, exc) from None

    def _query(self, sql: str, args: Iterable = ()) -> list:
        try:
            with self._lock:
                return self.conn.execute(sql, tuple(args)).fetchall()
        except DB_DATABASE_ERRORS as exc:
            raise damaged(self.path, exc) from None

    def close(self) -> None:
        """Close the file."""
        self.conn.close()

    def __enter__(self) -> "SessionReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- summaries ---------------------------------------------------------------
    def counts(self) -> dict[str, int]:
        """Stored kind (class name) -> number of events."""
        return dict(self._query("SELECT kind, COUNT(*) FROM events GROUP BY kind"))

    def span(self) -> tuple[float | None, float | None]:
        """First and last event time."""
        lo, hi = self._query("SELECT MIN(ts), MAX(ts) FROM events")[0]
        return lo, hi

    def summary(self) -> SessionSummary:
        """Counts, span and note count (fast: indexes only)."""
        start, end = self.span()
        counts = {codec.short_kind(k): n for k, n in sorted(self.counts().items())}
        notes = self._query("SELECT COUNT(*) FROM notes")[0][0]
        return SessionSummary(str(self.path), self.schema_version, self.meta, start, end, counts, notes)

    def notes(self) -> list[Note]:
        """Every note, in time order."""
        try:
            with self._lock:
                return read_notes(self.conn)
        except DB_DATABASE_ERRORS as exc:
            raise damaged(self.path, exc) from None

    def wait_rows(self) -> list[tuple[float, str, str, str]]:
        """``(ts, source, wait_class, event)`` of the WaitSample events in time order (one JSON parse each)."""
        keys: dict[str, tuple[str, str, str]] = {}  # few distinct (source, class, event): each parsed once
        rows = self._query("SELECT ts, json_extract(payload, '$.source', '$.wait_class', '$.event') FROM events "
                           "WHERE kind = 'WaitSample' AND typeof(payload) = 'text' ORDER BY ts")
        return [(ts, *(keys.get(k) or keys.setdefault(k, tuple(json.loads(k))))) for ts, k in rows]

    # -- events -------------------------------------------------------------------
    def events(
        self,
        kinds: Iterable[type | str] | None = None,
        start: float | None = None,
        end: float | None = None,
        with_bytes: bool = True,
        limit: int | None = None,
    ) -> Iterator[Event]:
        """Events in time order, optionally of some kinds and within ``[start, end)``.

        ``kinds`` takes event classes or their names (``PageCapture``). With
        ``with_bytes=False`` capture bytes are left empty (cheap listings).
        Kinds outside :data:`~tdescope.app.events.EVENT_TYPES` are skipped and counted in
        :attr:`skipped`.
        """
        where, args = [], []
        if kinds is not None:
            names = [k if isinstance(k, str) else k.__name__ for k in kinds]
            if not names:
                return
            where.append(f"kind IN ({','.join('?' * len(names))})")
            args += names
        if start is not None:
            where.append("ts >= ?")
            args.append(start)
        if end is not None:
            where.append("ts < ?")
            args.append(end)
        sql = "SELECT id, ts, kind, payload FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY ts, id"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        rows = self._query(sql, args)
        blob_ids = [r[0] for r in rows if r[2] == "PageCapture" or r[2] not in _NO_BLOBS]
        blobs = self._blobs(blob_ids) if with_bytes and blob_ids else {}
        for eid, ts, kind, payload in rows:
            try:
                ev = codec.decode(kind, ts, payload, blobs.get(eid) or _empty_bytes(kind, with_bytes))
            except (ValueError, TypeError) as exc:
                raise damaged(self.path, exc) from None
            if ev is None:
                self.skipped[kind] += 1
            else:
                yield ev

    def _blobs(self, ids: list[int]) -> dict[int, dict[str, bytes]]:
        out: dict[int, dict[str, bytes]] = {}
        for i in range(0, len(ids), 500):
            chunk = ids[i:i + 500]
            for eid, name, data, z in self._query(
                f"SELECT event_id, field, data, compressed FROM blobs WHERE event_id IN ({','.join('?' * len(chunk))})",
                chunk,
            ):
                out.setdefault(eid, {})[name] = codec.unpack_blob(data, z)
        return out


# kinds known to have no bytes fields: skip the blob lookup for them
_NO_BLOBS = frozenset({"WaitSample", "HotspotWindow", "WorkloadProgress", "WorkloadResult", "Marker",
                       "CaptureWindowState", "Problem", "LostConnection", "WaitFigures", "WaitSpans"})


def _empty_bytes(kind: str, with_bytes: bool) -> dict[str, bytes]:
    if with_bytes:
        return {}
    cls = codec.event_class(kind)
    if cls is None:
        return {}
    return {f.name: b"" for f in dataclasses.fields(cls) if f.type in ("bytes", bytes)}
