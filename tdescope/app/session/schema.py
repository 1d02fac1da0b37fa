"""The .tds schema: tables, version checks, and turning SQLite failures into one clear line.

A session can be encrypted with a passphrase: the file is then written and read
through SQLCipher (``sqlcipher3``, the same DB-API as :mod:`sqlite3`, SQLCipher 4
defaults), because captures hold the plaintext this tool is there to reveal.
The passphrase only ever lives in memory.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import sqlcipher3.dbapi2 as sqlcipher

from tdescope.app.errors import UserError
from tdescope.app.system.private_files import create_private

__all__ = ["SCHEMA_VERSION", "APPLICATION_ID", "DB_ERRORS", "DB_DATABASE_ERRORS", "create", "connect_existing",
           "damaged", "is_encrypted"]

#: What either driver raises; sqlcipher3's classes are not subclasses of sqlite3's.
DB_ERRORS = (sqlite3.Error, sqlcipher.Error)
#: The file-level failures (damaged, not a database, wrong key) of either driver.
DB_DATABASE_ERRORS = (sqlite3.DatabaseError, sqlcipher.DatabaseError)
_SQLITE_MAGIC = b"SQLite format 3\x00"

#: Bumped on any incompatible change; a file with a higher number is refused.
SCHEMA_VERSION = 1
#: PRAGMA application_id of .tds files ("TDS1"), so `file` and we can tell them apart.
APPLICATION_ID = 0x54445331

_DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # payload: JSON text, or zlib'd JSON as a BLOB when long (see _event_codec)
    "CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY, ts REAL NOT NULL, kind TEXT NOT NULL, payload)",
    "CREATE INDEX IF NOT EXISTS events_kind_ts ON events (kind, ts)",
    "CREATE INDEX IF NOT EXISTS events_ts ON events (ts)",
    "CREATE TABLE IF NOT EXISTS blobs (event_id INTEGER NOT NULL, field TEXT NOT NULL, data BLOB NOT NULL,"
    " compressed INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (event_id, field)) WITHOUT ROWID",
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY, created REAL NOT NULL, edited REAL NOT NULL,"
    " target_kind TEXT NOT NULL, target TEXT NOT NULL, ts REAL, text TEXT NOT NULL)",
)


def damaged(path: str | os.PathLike, exc: Exception | None = None) -> UserError:
    """The one line for a file SQLite cannot read."""
    why = f" ({exc})" if exc is not None else ""
    return UserError(f"{path} is not a readable tdescope session file: it is damaged, truncated or not a .tds{why}")


def _tune(conn: sqlite3.Connection) -> None:
    conn.execute("PRAGMA busy_timeout = 5000")
    # WAL + synchronous=NORMAL: a commit survives kill -9 of this process (the WAL is
    # in the page cache of the OS); only a power loss can drop the last commits.
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")


def _quote(passphrase: str) -> str:
    if not passphrase:
        raise UserError("the passphrase is empty")
    if "\x00" in passphrase:
        raise UserError("the passphrase holds a NUL character")
    return "'" + passphrase.replace("'", "''") + "'"


def _connect(target: str, passphrase: str | None, uri: bool = False) -> sqlite3.Connection:
    """A connection through sqlite3, or through SQLCipher keyed with ``passphrase``."""
    if passphrase is None:
        return sqlite3.connect(target, uri=uri, check_same_thread=False, isolation_level=None)
    key = _quote(passphrase)
    conn = sqlcipher.connect(target, uri=uri, check_same_thread=False, isolation_level=None)
    # SQLCipher logs a wrong key to stderr by default; the one-line UserError says it instead
    conn.execute("PRAGMA cipher_log_level = NONE")
    conn.execute(f"PRAGMA key = {key}")  # must come before anything reads the file
    return conn


def connect_cipher(target: str, passphrase: str | None) -> sqlite3.Connection:
    """A connection through SQLCipher even for a plain file (``passphrase`` None):
    what ``sqlcipher_export`` between plain and encrypted files needs."""
    if passphrase is not None:
        return _connect(target, passphrase)
    return sqlcipher.connect(target, check_same_thread=False, isolation_level=None)


def is_encrypted(path: str | os.PathLike) -> bool:
    """True when ``path`` looks like an SQLCipher file: no SQLite header, whole pages.

    An encrypted file starts with a random salt, so this cannot be told apart from
    page-sized random bytes; opening it with the passphrase settles it.
    """
    p = Path(path)
    try:
        if not p.is_file():
            return False
        size = p.stat().st_size
        with p.open("rb") as fh:
            head = fh.read(16)
    except OSError:
        return False
    return size >= 512 and size % 512 == 0 and head != _SQLITE_MAGIC


def create(path: str | os.PathLike, passphrase: str | None = None) -> sqlite3.Connection:
    """Create a new, empty session file (replacing nothing: the file must not exist).

    With ``passphrase`` the file is encrypted (SQLCipher 4 defaults, 4 KiB pages).
    """
    p = Path(path)
    if p.exists() and p.stat().st_size > 0:
        raise UserError(f"{p} already exists; choose another name")
    try:
        create_private(p)  # 0600 (folders 0700 when new) before SQLite writes a byte
        conn = _connect(str(p), passphrase)
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
        if passphrase is None:
            # SQLCipher keeps its default page size, so the file opens with default settings
            conn.execute("PRAGMA page_size = 8192")
        _tune(conn)
        conn.execute("BEGIN")
        for stmt in _DDL:
            conn.execute(stmt)
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        conn.execute("COMMIT")
    except OSError as exc:
        raise UserError(f"cannot create {p}: {exc.strerror}") from None
    except DB_ERRORS as exc:
        raise UserError(f"cannot create {p}: {exc}") from None
    return conn


def _check_header(p: Path, passphrase: str | None) -> bool:
    """Refuse a file that is no SQLite file or is truncated; True when it is encrypted."""
    # SQLite reads a truncated file happily until it reaches a missing page; the header
    # says how many pages there should be, so check that up front for a clear message.
    size = p.stat().st_size
    with p.open("rb") as fh:
        head = fh.read(100)
    if is_encrypted(p):
        if passphrase is None:
            raise UserError(f"{p} is encrypted: give its passphrase")
        return True
    if len(head) < 100 or not head.startswith(_SQLITE_MAGIC):
        raise UserError(f"{p} is not a tdescope session file (not an SQLite database)")
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(head[28:32], "big")
    # the in-header size is valid only when its version stamp matches the change counter;
    # with a WAL beside it, a checkpoint cut short by a full disk leaves the file short of
    # its header while the WAL still holds every committed page: SQLite reads them there
    wal = p.with_name(p.name + "-wal")
    wal_holds_pages = wal.exists() and wal.stat().st_size > 32
    if head[92:96] == head[24:28] and pages and size < pages * page_size and not wal_holds_pages:
        raise UserError(
            f"{p} is truncated: {size} bytes where its header promises {pages * page_size}; "
            "it was cut short while copying or the disk filled up"
        )
    return False


def connect_existing(path: str | os.PathLike, writable: bool = True,
                     passphrase: str | None = None) -> sqlite3.Connection:
    """Open an existing session file after checking it is one and that we can read its version.

    ``passphrase`` opens an encrypted file; it is ignored for a plain one.
    """
    p = Path(path)
    if not p.exists():
        raise UserError(f"no such session file: {p}")
    if p.is_dir():
        raise UserError(f"{p} is a folder, not a session file")
    encrypted = _check_header(p, passphrase)
    writable = writable and os.access(p, os.W_OK) and os.access(p.parent, os.W_OK)
    uri = f"file:{p.resolve()}?mode={'rw' if writable else 'ro'}"
    try:
        conn = _connect(uri, passphrase if encrypted else None, uri=True)
        conn.execute("PRAGMA busy_timeout = 5000")
        if encrypted:
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except DB_DATABASE_ERRORS:
                conn.close()
                raise UserError(f"wrong passphrase for {p}") from None
        app_id = conn.execute("PRAGMA application_id").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        if app_id != APPLICATION_ID:
            conn.close()
            raise UserError(f"{p} is an SQLite database but not a tdescope session file")
        if version > SCHEMA_VERSION:
            conn.close()
            raise UserError(
                f"{p} was written by a newer tdescope (session format {version}; this version reads "
                f"up to {SCHEMA_VERSION}): upgrade tdescope to open it"
            )
        if writable:
            # a file from an older version gains any new table here
            for stmt in _DDL:
                conn.execute(stmt)
    except DB_DATABASE_ERRORS as exc:
        raise damaged(p, exc) from None
    return conn
