"""The environment tdescope hands to the tools it starts (gdb, the guard, perf): without secrets.

A password may reach tdescope through its environment (libpq's ``PGPASSWORD``).
The tools tdescope starts do not need it, and a child's environment is one more
place to read it from (``ps e``, ``/proc/PID/environ``), so every variable
whose name looks like a password, key, secret or token is left out.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from tdescope.app.session_meta import is_secret_name

__all__ = ["env_without_secrets"]


def env_without_secrets(base: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """A copy of ``base`` (default ``os.environ``) without secret-looking names, plus ``extra``."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if not is_secret_name(k)}
    env.update(extra)
    return env
