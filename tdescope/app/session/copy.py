"""Copying a session file: consistent while it is recorded, and into or out of encryption."""

from __future__ import annotations

import os
import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.app.session.schema import DB_ERRORS, connect_cipher, connect_existing, is_encrypted
from tdescope.app.system.private_files import create_private

__all__ = ["copy_session"]

#: Pages the backup copies per step (progress is reported between steps).
_BACKUP_PAGES = 1024


def copy_session(src: str | os.PathLike, dst: str | os.PathLike, passphrase: str | None = None,
                 new_passphrase: str | None = None, progress: Callable[[float], None] | None = None) -> None:
    """Copy a session file consistently, even while it is being recorded.

    ``passphrase`` opens an encrypted ``src``; ``new_passphrase`` encrypts the copy
    with SQLCipher. A plain copy of a plain file is an SQLite backup; a copy that
    involves encryption goes through ``sqlcipher_export`` (the backup API cannot
    change a file's encryption). ``progress(fraction)`` follows a plain copy page batch by page batch
    (the SQLite backup's own progress); an export reports only its end.
    """
    src, dst = Path(src), Path(dst)
    if src.resolve() == dst.resolve():
        return
    tmp = dst.with_name(dst.name + ".part")
    try:
        tmp.unlink(missing_ok=True)
        create_private(tmp)  # the copy holds what the session holds: 0600 before a byte is written
        source = connect_existing(src, writable=False, passphrase=passphrase)  # checks file and passphrase
        encrypted = is_encrypted(src)
        if not encrypted and new_passphrase is None:
            target = sqlite3.connect(str(tmp))
            step = None if progress is None else (lambda _status, left, total: progress(1 - left / total if total else 1))
            with target:
                source.backup(target, pages=_BACKUP_PAGES, progress=step)
            target.execute("PRAGMA journal_mode = WAL")
            target.close()
            source.close()
        else:
            app_id, version = (source.execute(f"PRAGMA {p}").fetchone()[0] for p in ("application_id", "user_version"))
            source.close()
            _export(src, passphrase if encrypted else None, tmp, new_passphrase)
            target = connect_cipher(str(tmp), new_passphrase)
            target.execute(f"PRAGMA application_id = {int(app_id)}")
            target.execute(f"PRAGMA user_version = {int(version)}")
            target.execute("PRAGMA journal_mode = WAL")
            target.close()
        shutil.move(str(tmp), str(dst))
        if progress is not None:
            progress(1.0)
    except OSError as exc:
        raise UserError(f"cannot save {dst}: {exc.strerror or exc}") from None
    except DB_ERRORS as exc:
        raise UserError(f"cannot save {dst}: {exc}") from None
    finally:
        tmp.unlink(missing_ok=True)  # a copy that failed half way (gone after a successful move)


def _export(src: Path, passphrase: str | None, dst: Path, new_passphrase: str | None) -> None:
    """``sqlcipher_export`` of ``src`` into a new file ``dst`` (plain when ``new_passphrase`` is None)."""
    conn = connect_cipher(str(src), passphrase)
    try:
        conn.execute("PRAGMA busy_timeout = 5000")
        conn.execute("ATTACH DATABASE ? AS copy KEY ?", (str(dst), new_passphrase or ""))
        conn.execute("SELECT sqlcipher_export('copy')")
        conn.execute("DETACH DATABASE copy")
    finally:
        conn.close()
