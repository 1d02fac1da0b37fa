"""Asking for a session passphrase: getpass on a terminal, one line of stdin otherwise.

Never from argv or the environment: both are readable by other users of the host
(``/proc/<pid>/cmdline``, ``/proc/<pid>/environ`` for the same user, shell history).
"""

from __future__ import annotations

import getpass
import sys

from tdescope.app.errors import UserError

__all__ = ["ask_passphrase", "passphrase_for"]


def ask_passphrase(prompt: str = "Passphrase", confirm: bool = False, missing: str = "no passphrase given") -> str:
    """Read a passphrase: twice (when ``confirm``) with getpass on a TTY, else one stdin line.

    Raises
    ------
    UserError
        When nothing was given (with ``missing`` as its line), or the two entries differ.
    """
    if sys.stdin is not None and sys.stdin.isatty():
        try:
            first = getpass.getpass(f"{prompt}: ")
            if confirm and getpass.getpass(f"{prompt} (again): ") != first:
                raise UserError("the two passphrases differ")
        except (EOFError, KeyboardInterrupt):
            raise UserError(missing) from None
    else:
        # scripts pipe it: exactly one line, without its line ending
        line = sys.stdin.readline() if sys.stdin is not None else ""
        first = line.rstrip("\r\n")
    if not first:
        raise UserError(f"{missing} (type it, or pipe it as one line on stdin)")
    return first


def passphrase_for(path: str) -> str | None:
    """The passphrase of ``path`` when it is encrypted (asked for), else None."""
    from tdescope.app.session.file import is_encrypted

    if not is_encrypted(path):
        return None
    return ask_passphrase(f"Passphrase of {path}", missing=f"{path} is encrypted: give its passphrase")
