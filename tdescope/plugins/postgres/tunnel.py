"""``--dsn`` carried over ``--ssh``: the server's socket or port on the database host, forwarded here.

The user writes the DSN as it works on the host itself (``host=/var/run/postgresql``, ``host=localhost
port=5433``, or no host: libpq's default socket folder there). :func:`through` asks the ssh connection
for a forward to that endpoint and rewrites the connection to the local end: always a unix socket named
``.s.PGSQL.PORT`` in the connection's 0700 folder, so libpq finds it as a socket folder and only this
user can use it (a local TCP port would let every user of this machine reach the database as the ssh
account). The session then checks its backends in the host's process table (the agent), not here.
"""

from __future__ import annotations

import itertools
import posixpath
from collections.abc import Callable
from dataclasses import replace

from tdescope.app.engines.api import ConnectParams
from tdescope.app.errors import UserError

__all__ = ["DEFAULT_SOCKET_DIR", "server_endpoint", "through"]

#: libpq's default socket folder on Debian, Ubuntu and the PGDG packages (a DSN without ``host``).
DEFAULT_SOCKET_DIR = "/var/run/postgresql"
_names = itertools.count()


def server_endpoint(dsn: str, options: dict) -> tuple[str | tuple[str, int], int]:
    """Where the server of ``dsn`` (fields in ``options`` win) listens, as its host sees it, and its port:
    ``("/dir/.s.PGSQL.5432", 5432)`` or ``(("localhost", 5432), 5432)``."""
    from psycopg.conninfo import conninfo_to_dict

    fields = {k: str(options[k]) for k in ("host", "port", "hostaddr") if options.get(k) not in (None, "")}
    try:
        info = conninfo_to_dict(dsn, **fields)
    except Exception as exc:  # noqa: BLE001 - psycopg's own words, one line
        raise UserError(f"bad connection string: {(str(exc).strip().splitlines() or [''])[0]}") from None
    if info.get("hostaddr"):
        raise UserError("over --ssh give the server as host=NAME or host=/socket/folder, not hostaddr=")
    host, port = str(info.get("host") or DEFAULT_SOCKET_DIR), str(info.get("port") or "5432")
    if "," in host or "," in port:
        raise UserError("over --ssh --dsn names one server: give one host= and one port=")
    if not port.isdigit():
        raise UserError(f"bad connection string: port {port!r} is not a number")
    if host.startswith("@"):
        raise UserError("over --ssh, an abstract socket (host=@…) cannot be forwarded: give its folder or a port")
    if host.startswith("/"):
        return posixpath.join(host, f".s.PGSQL.{port}"), int(port)
    return (host, int(port)), int(port)


def through(params: ConnectParams, forward: Callable, processes, via: str = "") -> ConnectParams:
    """``params`` connecting through ``forward(remote, local_socket)`` (``SshHost.forward``), with the
    host's ``processes`` for the backend checks; ``via`` names the host in messages ("db1 via ssh")."""
    options = dict(params.options or {})
    remote, port = server_endpoint(params.dsn, options)
    local = forward(remote, f"pg{next(_names)}/.s.PGSQL.{port}")
    shown = remote if isinstance(remote, str) else f"{remote[0]}:{remote[1]}"
    options.update(host=posixpath.dirname(local), port=port, processes=processes,
                   via=f"{shown} on {via}" if via else shown)
    return replace(params, options=options)
