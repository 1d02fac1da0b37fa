"""Session files (.tds): one SQLite file in WAL mode holding a whole recorded run.

Tables: ``meta`` (the run's :class:`~tdescope.app.session.meta.SessionMeta`,
one JSON value per key), ``events`` (ts, kind, payload), ``blobs`` (the bytes of
captures, zlib'd when it helps), ``notes`` (see :mod:`tdescope.app.session.notes`).
The schema is versioned with ``PRAGMA user_version``; a newer, damaged or
truncated file is refused with one clear line.

:class:`SessionRecorder` appends events from any thread through one writer
thread that commits at least every :data:`COMMIT_EVERY_S` seconds, so a kill -9
loses only the events of the last half second and nothing committed.
:class:`SessionReader` loads them back by kind and time range; copying a file
(into or out of encryption) is :mod:`tdescope.app.session.copy`.
"""

from __future__ import annotations

import dataclasses
import json
import os
import queue
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tdescope.app.session import codec as codec
from tdescope.app.session.copy import copy_session
from tdescope.app.session.schema import (DB_DATABASE_ERRORS, DB_ERRORS, SCHEMA_VERSION, _tune,
                                          connect_existing, create, damaged, is_encrypted)
from tdescope.app.errors import UserError
from tdescope.app.events import Event, PageCapture
from tdescope.app.session.notes import Note, read_notes
from tdescope.app.session.meta import SessionMeta

__all__ = ["COMMIT_EVERY_S", "SCHEMA_VERSION", "SessionRecorder", "SessionReader", "SessionSummary", "is_encrypted"]

#: Longest time an event waits in memory before it is committed to the file.
COMMIT_EVERY_S = 0.25
_STOP = object()


def _write_meta(conn: sqlite3.Connection, meta: SessionMeta) -> None:
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        [(k, json.dumps(v, default=str)) for k, v in meta.to_rows().items()],
    )


class SessionRecorder:
    """Append events to a new session file from any thread.

    Parameters
    ----------
    path : str or Path
        The file to create; it must not exist yet.
    meta : SessionMeta
        The run's metadata; secrets are scrubbed before writing.
    passphrase : str, optional
        Encrypt the file with SQLCipher under this passphrase (never stored).
    keep_plaintext : bool
        Store captures whole. When False, captures written while the file is
        not encrypted lose every buffer that may hold plaintext
        (:meth:`PageCapture.without_plaintext`: the ciphertext, sizes, page
        number and timing stay) and the meta says ``plaintext_withheld``.
        Callers decide it with :func:`~tdescope.app.session.meta.keeps_plaintext`.

    Notes
    -----
    :meth:`record` only queues; a writer thread serialises, batches and commits.
    A failure to write (disk full) is kept in :attr:`error` and further events
    are dropped rather than raising on producer threads.
    """

    def __init__(self, path: str | os.PathLike, meta: SessionMeta, passphrase: str | None = None,
                 keep_plaintext: bool = True) -> None:
        self.path = Path(path)
        self.encrypted = passphrase is not None
        self.keep_plaintext = keep_plaintext
        self.meta = meta = self._policy(meta)
        self._conn = create(self.path, passphrase)
        self._conn.execute("BEGIN")
        _write_meta(self._conn, meta)
        self._conn.execute("COMMIT")
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self.error: str | None = None
        self.written = 0
        self._closed = False
        self._thread = threading.Thread(target=self._loop, name="session-writer", daemon=True)
        self._thread.start()

    def record(self, event: Event) -> None:
        """Queue ``event`` for writing; safe from any thread, never blocks on disk."""
        if not self._closed:
            self._queue.put(event)

    def update_meta(self, meta: SessionMeta) -> None:
        """Replace the stored metadata (e.g. once the engine's inventory is known)."""
        self.meta = meta = self._policy(meta, self.meta.plaintext_withheld)
        self._queue.put(meta)

    def _policy(self, meta: SessionMeta, withheld_before: bool = False) -> SessionMeta:
        """``meta`` saying whether this file lacks plaintext (once withheld, always: older captures)."""
        withheld = withheld_before or not (self.keep_plaintext or self.encrypted)
        return dataclasses.replace(meta, plaintext_withheld=withheld)

    def flush(self, timeout: float = 5.0) -> None:
        """Block until every event queued so far is committed."""
        done = threading.Event()
        self._queue.put(done)
        done.wait(timeout)

    def encrypt(self, passphrase: str, timeout: float = 60.0) -> None:
        """Encrypt the file being recorded, in place, and go on recording into it.

        The writer thread commits what is queued, exports the file into an
        SQLCipher copy, replaces the plain file (and its WAL) with it, and reopens.
        Raises UserError when that fails; recording then goes on, unencrypted.
        """
        if self.encrypted:
            return
        done = _Rekey(passphrase)
        self._queue.put(done)
        if not done.wait(timeout):
            raise UserError(f"encrypting {self.path} took too long")
        if done.error:
            raise UserError(done.error)

    def close(self) -> None:
        """Commit what is queued and close the file. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(30)
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except DB_ERRORS:
            pass
        self._conn.close()

    def __enter__(self) -> "SessionRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- writer thread ---------------------------------------------------------
    def _write(self, items: list) -> None:
        conn = self._conn
        conn.execute("BEGIN")
        for item in items:
            if isinstance(item, SessionMeta):
                _write_meta(conn, item)
                continue
            if isinstance(item, PageCapture) and not (self.keep_plaintext or self.encrypted):
                item = item.without_plaintext()
            enc = codec.encode(item)
            cur = conn.execute("INSERT INTO events (ts, kind, payload) VALUES (?, ?, ?)", (enc.ts, enc.kind, enc.payload))
            if enc.blobs:
                conn.executemany(
                    "INSERT INTO blobs (event_id, field, data, compressed) VALUES (?, ?, ?, ?)",
                    [(cur.lastrowid, f, data, z) for f, data, z in enc.blobs],
                )
            self.written += 1
        conn.execute("COMMIT")

    def _rekey(self, passphrase: str) -> None:
        """Writer thread: swap the plain file for an encrypted copy and reopen it."""
        tmp = self.path.with_name(self.path.name + ".enc")
        tmp.unlink(missing_ok=True)
        self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        self._conn.close()
        try:
            copy_session(self.path, tmp, new_passphrase=passphrase)
            os.replace(tmp, self.path)
            for suffix in ("-wal", "-shm"):
                Path(f"{self.path}{suffix}").unlink(missing_ok=True)
            self.encrypted = True
        finally:
            self._conn = connect_existing(self.path, passphrase=passphrase if self.encrypted else None)
            _tune(self._conn)

    def _loop(self) -> None:
        stop = False
        while not stop:
            first = self._queue.get()
            items, waiters = [], []
            rekey = None
            deadline = time.monotonic() + COMMIT_EVERY_S
            item = first
            while True:
                if item is _STOP:
                    stop = True
                elif isinstance(item, _Rekey):
                    waiters.append(item)
                    rekey = item
                    deadline = time.monotonic()
                elif isinstance(item, threading.Event):
                    waiters.append(item)
                    deadline = time.monotonic()  # someone is waiting: commit now
                else:
                    items.append(item)
                remaining = deadline - time.monotonic()
                if stop or remaining <= 0 or len(items) >= 20000:
                    break
                try:
                    item = self._queue.get(timeout=remaining)
                except queue.Empty:
                    break
            if items and self.error is None:
                try:
                    self._write(items)
                except (*DB_ERRORS, OSError, TypeError, ValueError) as exc:
                    self.error = f"recording to {self.path} stopped: {exc}"
                    try:
                        self._conn.execute("ROLLBACK")
                    except DB_ERRORS:
                        pass
            if rekey is not None:
                try:
                    self._rekey(rekey.passphrase)
                except UserError as exc:
                    rekey.error = str(exc)
            for w in waiters:
                w.set()


class _Rekey(threading.Event):
    """Writer-thread request: encrypt the file in place (see :meth:`SessionRecorder.encrypt`)."""

    def __init__(self, passphrase: str) -> None:
        super().__init__()
        self.passphrase = passphrase
        self.error: str | None = None


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
                       "CaptureWindowState", "Problem"})


def _empty_bytes(kind: str, with_bytes: bool) -> dict[str, bytes]:
    if with_bytes:
        return {}
    cls = codec.event_class(kind)
    if cls is None:
        return {}
    return {f.name: b"" for f in dataclasses.fields(cls) if f.type in ("bytes", bytes)}
