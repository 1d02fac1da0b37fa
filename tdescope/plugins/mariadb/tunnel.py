"""MariaDB's ``--dsn`` carried over ``--ssh``: the server's socket or port on the host, forwarded here.

The DSN is written as it works on the database host (``socket=/run/mysqld/mysqld.sock``, or ``host=127.0.0.1
port=3306``). :func:`through` forwards that endpoint to a unix socket in the ssh connection's 0700 folder
and points the connection at it. The ``mariadbd`` serving it is then found in the host's process table
(:func:`server_pid_on`): its pid file cannot be read from here, and the agent reads no files.
"""

from __future__ import annotations

import itertools
import posixpath
import re
from collections.abc import Callable
from dataclasses import replace

from tdescope.app.engines.api import ConnectParams
from tdescope.app.errors import UserError

__all__ = ["server_pid_on", "through"]

_SERVER = re.compile(r"^\S*\b(mariadbd|mysqld)\b")
_names = itertools.count()


def through(params: ConnectParams, forward: Callable, processes, via: str = "") -> ConnectParams:
    """``params`` connecting through ``forward(remote, local_socket)`` (``SshHost.forward``), with the host's
    ``processes`` to find the server in."""
    from tdescope.plugins.mariadb.connection import parse_dsn

    spec = parse_dsn(params.dsn)
    remote = spec.socket or (spec.host, spec.port)
    local = forward(remote, f"my{next(_names)}/mysqld.sock")
    shown = remote if isinstance(remote, str) else f"{remote[0]}:{remote[1]}"
    options = {**(params.options or {}), "socket": local, "processes": processes,
               "via": f"{shown} on {via}" if via else shown}
    return replace(params, options=options)


def server_pid_on(pid_file: str, processes, target_pid: int | None = None) -> int:
    """The ``mariadbd`` among ``processes`` that serves the connection whose ``@@pid_file`` is ``pid_file``:
    the only one running, or the only one whose command line names the pid file's folder, or
    ``target_pid`` when it is one of them. UserError (one line) otherwise."""
    servers = [r for r in processes.rows() if _SERVER.match(r.title)]
    if target_pid is not None:
        if any(r.pid == target_pid for r in servers):
            return int(target_pid)
        raise UserError(f"pid {target_pid} is no MariaDB server on {processes.where}")
    folder = posixpath.dirname(pid_file) if pid_file else ""
    named = [r for r in servers if folder and folder in r.title]
    for group in (named, servers):
        if len(group) == 1:
            return group[0].pid
    if not servers:
        raise UserError(f"no mariadbd or mysqld runs on {processes.where}: is --dsn a server on that host?")
    raise UserError(f"{len(servers)} MariaDB servers run on {processes.where} (pids "
                    f"{', '.join(str(r.pid) for r in servers[:6])}): give --target-pid of the one --dsn reaches")
