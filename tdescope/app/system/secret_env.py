"""The environment tdescope hands to the tools it starts (gdb, the guard, perf): without secrets.

A password may reach tdescope through its environment (libpq's ``PGPASSWORD``).
The tools tdescope starts do not need it, and a child's environment is one more
place to read it from (``ps e``, ``/proc/PID/environ``), so every variable
whose name looks like a password, key, secret or token is left out.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

__all__ = ["env_without_secrets", "is_secret_name"]

_SECRET = re.compile(r"pass(word|wd|phrase)|secret|key|token|credential", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True when ``name`` looks like it holds a password, key, secret or passphrase."""
    return bool(_SECRET.search(str(name)))


def env_without_secrets(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without secret-looking names, plus ``extra``."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret_name(k)}
    env.update(extra)
    return env
