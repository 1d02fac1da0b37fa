"""Names that look like they hold a secret: what the session file's metadata leaves out.

This decides what tdescope *writes* (``session.meta.scrub``: settings and parameters
recorded in a .tds file), where a name is all there is to go by. Children's
environments are not built this way: they get an allowlist (:mod:`.child_env`).
"""

from __future__ import annotations

import re

__all__ = ["is_secret_name"]

_SECRET = re.compile(r"pass(word|wd|phrase)|pwd|secret|key|token|credential", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    """True when ``name`` looks like it holds a password, key, secret or passphrase (``MYSQL_PWD`` too)."""
    return bool(_SECRET.search(str(name)))
