"""The environment of every process tdescope starts: built from an allowlist, never inherited whole.

A password reaches tdescope through its environment (libpq's ``PGPASSWORD``,
MariaDB's ``MYSQL_PWD``, or a variable of any name a user's scripts set), and a
child's environment is one more place to read it from (``/proc/PID/environ``).
Leaving out names that look secret missed ``MYSQL_PWD``; no pattern can know
every name. So a child gets only what it needs: :data:`BASE` (where programs
are, who and where the user is, language and time zone, where temporary files
go) plus what its kind of program needs (:data:`PYTHON` for tdescope's own
helper processes). A child that needs a password gets it another way: pgbench
from a 0600 passfile (``PGPASSFILE``), named in its environment alone.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

__all__ = ["BASE", "PERF", "PYTHON", "SSH", "child_env"]

#: What every child gets: PATH, the user, language (``LC_*`` too), time zone, temporary files.
BASE = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR")

#: tdescope's own Python helpers (guard, reaper, lab worker, capture worker): how this Python finds
#: tdescope, and the two TDESCOPE_ settings they read. ``LD_LIBRARY_PATH``: libbpf or a client library
#: installed outside the system's folders.
PYTHON = ("PYTHONPATH", "PYTHONHOME", "PYTHONNOUSERSITE", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE",
          "LD_LIBRARY_PATH", "TDESCOPE_DEBUG", "TDESCOPE_LIBBPF")

#: perf: where it keeps and looks for build-id caches and its config.
PERF = ("PERF_BUILDID_DIR", "PERF_CONFIG")

#: ssh (``--ssh``): the user's ssh-agent, where their keys usually are. Deliberately allowed: it is a
#: socket path, not a secret, and without it ssh cannot log in with an agent-held key.
SSH = ("SSH_AUTH_SOCK",)


def child_env(extra: Iterable[str] = (), base: Mapping[str, str] | None = None, **values: str) -> dict[str, str]:
    """The environment for a child: the :data:`BASE` names and ``LC_*`` from ``base`` (default
    ``os.environ``), the names in ``extra`` (e.g. :data:`PYTHON`), then ``values`` set as given.

    Only a child that needs a value (a passfile's path, ``LC_ALL=C`` for gdb) gets it in ``values``."""
    source = os.environ if base is None else base
    names = set(BASE) | set(extra)
    env = {k: v for k, v in source.items() if k in names or k.startswith("LC_")}
    env.update(values)
    return env
