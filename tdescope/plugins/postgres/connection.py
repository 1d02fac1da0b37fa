"""Opening psycopg 3 connections: DSN or fields, the password from the keyring or a prompt.

The password is never written anywhere: it comes from ``ConnectParams.password``
(a prompt), the OS keyring (service ``tdescope-postgres``, user
``USER@HOST:PORT``), or libpq's own ``PGPASSWORD``/``.pgpass``; it is passed to
libpq as a keyword argument, never on a command line. Server errors become one
clear line.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from tdescope.app.engines.api import ConnectParams
from tdescope.app.errors import UserError
from tdescope.app.system.keyring_lookup import keyring_password

__all__ = ["ConnectionSpec", "KEYRING_SERVICE", "spec_from_params", "open_connection"]

KEYRING_SERVICE = "tdescope-postgres"
_FIELDS = ("host", "port", "dbname", "user", "sslmode")


@dataclass(frozen=True, slots=True)
class ConnectionSpec:
    """Where to connect; the password stays out of repr and out of every file."""

    dsn: str = ""
    fields: tuple[tuple[str, str], ...] = ()
    connect_timeout: int = 10
    password: str | None = field(default=None, repr=False)
    via: str = ""  #: where the server is when the connection is forwarded ("/run/postgresql/.s.PGSQL.5432 on db1 via ssh")

    def kwargs(self, **extra) -> dict:
        out = {k: v for k, v in self.fields}
        out.update(extra)
        out.setdefault("connect_timeout", self.connect_timeout)
        if self.password is not None:
            out["password"] = self.password
        return out

    def with_password(self, password: str | None) -> "ConnectionSpec":
        return ConnectionSpec(self.dsn, self.fields, self.connect_timeout, password, self.via)


def spec_from_params(params: ConnectParams) -> ConnectionSpec:
    """A :class:`ConnectionSpec` from a DSN and/or fields (host, port, dbname, user, sslmode)."""
    opts = params.options or {}
    fields = tuple((k, str(opts[k])) for k in _FIELDS if opts.get(k) not in (None, ""))
    timeout = int(opts.get("connect_timeout", 10))
    return ConnectionSpec(params.dsn or "", fields, timeout, params.password, str(opts.get("via") or ""))


def _keyring_password(info_user: str, host: str, port: str) -> str | None:
    return keyring_password(KEYRING_SERVICE, f"{info_user}@{host}:{port}")  # else libpq's own sources


def _where(spec: ConnectionSpec) -> str:
    try:
        from psycopg.conninfo import conninfo_to_dict

        d = conninfo_to_dict(spec.dsn, **dict(spec.fields))
    except Exception:  # noqa: BLE001 - a malformed DSN is reported by connect itself
        d = dict(spec.fields)
    host = d.get("host") or "local socket"
    if spec.via:
        return f"{d.get('user') or 'default user'}@{spec.via}/{d.get('dbname') or 'default db'}"
    return f"{d.get('user') or 'default user'}@{host}:{d.get('port') or 5432}/{d.get('dbname') or 'default db'}"


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line:
            # libpq prefixes 'connection to server at "...", port N failed: '
            return line.split(" failed: ", 1)[-1]
    return type(exc).__name__


def open_connection(spec: ConnectionSpec, prompt: Callable[[str], str | None] | None = None,
                    application_name: str = "tdescope", autocommit: bool = True):
    """Connect, asking ``prompt(where)`` for a password once if the server wants one.

    Raises
    ------
    UserError
        One line: wrong password, server not reachable, timeout, bad DSN...
    """
    import psycopg

    where = _where(spec)
    # With PGPASSWORD set, libpq has the password already: no keyring lookup, whose backend
    # probing spawns compilers and linkers (ctypes.util) that would inherit PGPASSWORD.
    if spec.password is None and "PGPASSWORD" not in os.environ:
        try:
            from psycopg.conninfo import conninfo_to_dict

            d = conninfo_to_dict(spec.dsn, **dict(spec.fields))
            pw = _keyring_password(str(d.get("user", "")), str(d.get("host", "")), str(d.get("port", "")))
        except Exception:  # noqa: BLE001 - reported by connect below
            pw = None
        if pw is not None:
            spec = spec.with_password(pw)
    for attempt in (1, 2):
        try:
            conn = psycopg.connect(spec.dsn, autocommit=autocommit,
                                   **spec.kwargs(application_name=application_name))
            return conn, spec
        except psycopg.ProgrammingError as exc:
            raise UserError(f"bad connection string: {_first_line(exc)}") from None
        except psycopg.OperationalError as exc:
            msg = _first_line(exc)
            low = msg.lower()
            if "no password supplied" in low:
                if attempt == 1 and prompt is not None:
                    pw = prompt(where)
                    if pw:
                        spec = spec.with_password(pw)
                        continue
                raise UserError(
                    f"{where} asks for a password: set PGPASSWORD, store it in the keyring "
                    f"(service {KEYRING_SERVICE}) or run in a terminal to be asked"
                ) from None
            if "password authentication failed" in low:
                raise UserError(f"wrong password for {where}") from None
            if "timeout expired" in low:
                raise UserError(f"connection to {where} timed out after {spec.connect_timeout} s") from None
            if "connection refused" in low or "no such file or directory" in low:
                raise UserError(f"PostgreSQL server not reachable at {where}: is it running?") from None
            raise UserError(f"cannot connect to {where}: {msg}") from None
    raise AssertionError("unreachable")  # pragma: no cover
