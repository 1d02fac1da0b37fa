"""Lines on standard output for a reader that may leave early (``tdescope capture --json | head -1``).

When the reader closes the pipe, the next write raises ``BrokenPipeError``. Every command that
prints results writes them through :func:`emit`, which turns that into :class:`ReaderGone`: a
command that streams from a live target (``capture``) cancels its window there, so the probe is
disarmed and the target released exactly as on any other end; ``tdescope`` then exits 0 and says
nothing. Exit 0, not death by SIGPIPE (141), follows ripgrep: a reader that has seen enough is
not a failure, and a 141 would fail every ``set -o pipefail`` script that pipes into ``head``.
"""

from __future__ import annotations

import os
import select
import sys

__all__ = ["ReaderGone", "emit", "silence_stdout", "stdout_reader_gone"]


class ReaderGone(Exception):
    """The reader of standard output closed it; nothing more is to be printed."""


def emit(text: str) -> None:
    """Write ``text`` and a newline to standard output, flushed at once.

    Raises
    ------
    ReaderGone
        The reader closed the pipe. Standard output then points at /dev/null, so neither later
        writes nor the interpreter's flush at exit complain.
    """
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        silence_stdout()
        raise ReaderGone from None


def silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null (what is still buffered for it is dropped there)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing to silence
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def stdout_reader_gone() -> bool:
    """True when standard output is a pipe whose reader has closed it.

    The kernel reports a pipe with no reader left as an error condition on its write end
    (``POLLERR``), so a ``BrokenPipeError`` from somewhere else (a child's pipe) is not taken
    for the reader leaving.
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(ev & select.POLLERR for _, ev in poller.poll(0))
