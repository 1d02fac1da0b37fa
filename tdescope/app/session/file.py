"""Session files (.tds): one SQLite file in WAL mode holding a whole recorded run.

Tables: ``meta`` (the run's :class:`~tdescope.app.session.meta.SessionMeta`,
one JSON value per key), ``events`` (ts, kind, payload), ``blobs`` (the bytes of
captures, zlib'd when it helps), ``notes`` (see :mod:`tdescope.app.session.notes`).
The schema is versioned with ``PRAGMA user_version``; a newer, damaged or
truncated file is refused with one clear line.

:class:`SessionRecorder` appends events from any thread through one writer
thread that commits at least every :data:`COMMIT_EVERY_S` seconds, so a kill -9
loses only the events of the last half second and nothing committed.
:class:`~tdescope.app.session.reader.SessionReader` loads them back by kind and time range; copying a file
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
from pathlib import Path

from tdescope.app.session import codec as codec
from tdescope.app.session.copy import copy_session
from tdescope.app.session.schema import (DB_ERRORS, SCHEMA_VERSION, _tune,
                                          connect_existing, create, is_encrypted)
from tdescope.app.errors import UserError
from tdescope.app.events import Event, PageCapture
from tdescope.app.session.meta import SessionMeta

__all__ = ["COMMIT_EVERY_S", "SCHEMA_VERSION", "SessionRecorder", "is_encrypted"]

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

    def close(self, timeout: float = 30.0) -> None:
        """Commit what is queued and close the file; safe to call twice.

        The writer thread checkpoints and closes its connection itself: a writer still busy after
        ``timeout`` s goes on and closes the file when done (the connection is never closed under it).
        """
        if self._closed:
            return
        self._closed = True
        self._queue.put(_STOP)
        self._thread.join(timeout)

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
        try:
            self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except DB_ERRORS:
            pass
        self._conn.close()


class _Rekey(threading.Event):
    """Writer-thread request: encrypt the file in place (see :meth:`SessionRecorder.encrypt`)."""

    def __init__(self, passphrase: str) -> None:
        super().__init__()
        self.passphrase = passphrase
        self.error: str | None = None
