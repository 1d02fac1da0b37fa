"""Passwords from the desktop keyring, looked up without handing the environment to a child.

keyring picks its backend by importing every backend it knows; the macOS one calls
``ctypes.util.find_library``, which on Linux runs gcc and ld with the workbench's whole
environment, PGPASSWORD and MYSQL_PWD included. The first lookup therefore detects the
backend with the environment reduced to the children's allowlist
(:func:`~tdescope.app.system.child_env.child_env`), then puts it back; later lookups
start nothing.
"""

from __future__ import annotations

import os
import threading

from tdescope.app.system.child_env import child_env

__all__ = ["keyring_password"]

_lock = threading.Lock()
_detected = False


def _detect_backend() -> None:
    global _detected
    import keyring

    with _lock:
        if _detected:
            return
        saved = dict(os.environ)
        os.environ.clear()
        os.environ.update(child_env())
        try:
            keyring.get_keyring()
        finally:
            os.environ.clear()
            os.environ.update(saved)
            _detected = True


def keyring_password(service: str, username: str) -> str | None:
    """The password stored for ``username`` under ``service``, or None (none stored, no keyring backend)."""
    try:
        import keyring

        _detect_backend()
        return keyring.get_password(service, username)
    except Exception:  # noqa: BLE001 - no keyring backend (a headless server) is normal
        return None
