"""Files that hold captured bytes or their decoding: 0600, in folders created 0700, whatever the umask.

Sessions, their copies and autosaves, ``--dump`` pages and reports (HTML and PDF)
all go through here, so no writer depends on the umask or on a chmod after the
fact (a file created 0644 and narrowed later was readable in between). A file is
created with mode 0600 and ``O_EXCL``; a file that replaces another is written to
a new 0600 file beside it and renamed over it, so a reader never sees a wider mode
or half a report. Folders tdescope creates, parents included, are 0700; folders
that exist are left as they are, and :func:`shared_folder_note` says in one line
when others can read one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

__all__ = ["create_private", "make_private_folder", "open_new_private", "shared_folder_note", "write_private"]

_FILE_MODE = 0o600
_FOLDER_MODE = 0o700


def make_private_folder(folder: str | os.PathLike) -> Path:
    """Create ``folder`` and its missing parents, each 0700; an existing folder is left as it is."""
    folder = Path(folder)
    missing = []
    probe = folder
    while not os.path.lexists(probe):
        missing.append(probe)
        probe = probe.parent
    for new in reversed(missing):
        try:
            os.mkdir(new, _FOLDER_MODE)
        except FileExistsError:
            continue  # made meanwhile by someone else: not ours to change
        os.chmod(new, _FOLDER_MODE)  # the umask may have taken the owner's bits too
    return folder


def create_private(path: str | os.PathLike) -> None:
    """Create ``path`` empty and 0600 (its folder 0700 when new); an existing file there is narrowed to 0600
    (its callers refuse a file that holds anything).

    For files another library then opens by name (SQLite): it finds the mode already set,
    and SQLite gives the ``-wal`` and ``-shm`` files the main file's mode."""
    path = Path(path)
    make_private_folder(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, _FILE_MODE)
    try:
        os.fchmod(fd, _FILE_MODE)  # an existing empty file keeps no wider mode
    finally:
        os.close(fd)


def open_new_private(path: str | os.PathLike):
    """A binary file object on a new 0600 file at ``path``; FileExistsError if anything is there."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, _FILE_MODE)
    os.fchmod(fd, _FILE_MODE)  # O_CREAT's mode passes through the umask, which cannot widen it: say it anyway
    return os.fdopen(fd, "wb")


def write_private(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` as a 0600 file (its folder 0700 when new), replacing any file there.

    The bytes go to a new file beside ``path`` (created 0600 by :mod:`tempfile`) that is
    then renamed over it: an earlier file's wider mode, or a link at ``path``, is not
    followed or kept."""
    path = Path(path)
    make_private_folder(path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".part", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _FILE_MODE)
            fh.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def shared_folder_note(folder: str | os.PathLike) -> str | None:
    """One line when users other than the owner can list ``folder`` (group or other read), else None.

    The files stay 0600 either way; the names, sizes and times of files there are what others see."""
    try:
        mode = stat.S_IMODE(os.stat(folder).st_mode)
    except OSError:
        return None
    if not mode & (stat.S_IRGRP | stat.S_IROTH):
        return None
    return (f"{folder} can be read by others (mode {mode:04o}): they see the names of the files there, "
            "not their contents (those are 0600)")
