"""Opening MariaDB connections with PyMySQL: the DSN forms, the password, one-line errors.

PyMySQL is pure Python (no client library to match the server's), well kept,
and speaks to MariaDB over TCP or a unix socket; MariaDB Connector/Python needs
the C connector installed. ``--dsn`` takes the same ``key=value`` form as
PostgreSQL (``host= port= user= dbname= socket=``) or a ``mariadb://user@host:port/db``
URL. The password is never in argv: it comes from a prompt, the OS keyring
(service ``tdescope-mariadb``, user ``USER@HOST:PORT``) or ``MYSQL_PWD``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass, replace
from urllib.parse import unquote, urlsplit

from tdescope.app.errors import UserError
from tdescope.app.system.keyring_lookup import keyring_password

__all__ = ["KEYRING_SERVICE", "ConnectionSpec", "open_connection", "parse_dsn"]

KEYRING_SERVICE = "tdescope-mariadb"
#: PyMySQL error codes that mean "wrong password" and "cannot reach the server".
_ACCESS_DENIED, _CANT_CONNECT = 1045, (2002, 2003, 2006, 2013)


@dataclass(frozen=True)
class ConnectionSpec:
    """Where a MariaDB server is. ``socket`` wins over host/port when set."""

    host: str = "127.0.0.1"
    port: int = 3306
    user: str = "root"
    dbname: str = ""
    socket: str = ""
    password: str | None = None
    via: str = ""  #: where the server is when the connection is forwarded ("/run/mysqld/mysqld.sock on db1 via ssh")

    def where(self) -> str:
        place = self.via or self.socket or f"{self.host}:{self.port}"
        return f"{self.user}@{place}/{self.dbname}" if self.dbname else f"{self.user}@{place}"


def parse_dsn(dsn: str) -> ConnectionSpec:
    """A spec from ``host=… port=… user=… dbname=…`` or ``mariadb://user@host:port/db``."""
    dsn = (dsn or "").strip()
    if "://" in dsn:
        url = urlsplit(dsn)
        if url.scheme not in ("mariadb", "mysql"):
            raise UserError(f"not a MariaDB URL: {url.scheme}:// (use mariadb://user@host:port/db)")
        try:
            port = url.port or 3306
        except ValueError:
            raise UserError(f"bad port in {dsn!r}") from None
        return ConnectionSpec(host=url.hostname or "127.0.0.1", port=port, user=unquote(url.username or "root"),
                              dbname=url.path.lstrip("/"))
    fields: dict[str, str] = {}
    for part in shlex.split(dsn):
        key, sep, value = part.partition("=")
        if not sep:
            raise UserError(f"--dsn wants key=value pairs or a mariadb:// URL, not {part!r}")
        fields[key.strip().lower()] = value
    unknown = set(fields) - {"host", "port", "user", "dbname", "database", "socket"}
    if unknown:
        raise UserError(f"unknown --dsn key {sorted(unknown)[0]!r} (host, port, user, dbname, socket)")
    try:
        port = int(fields.get("port", 3306))
    except ValueError:
        raise UserError(f"port must be a number, not {fields['port']!r}") from None
    return ConnectionSpec(host=fields.get("host", "127.0.0.1"), port=port, user=fields.get("user", "root"),
                          dbname=fields.get("dbname", fields.get("database", "")), socket=fields.get("socket", ""))


def _keyring_password(spec: ConnectionSpec) -> str | None:
    return keyring_password(KEYRING_SERVICE, f"{spec.user}@{spec.host}:{spec.port}")


def _connect(spec: ConnectionSpec, password: str | None):
    import pymysql

    kwargs = dict(user=spec.user, password=password or "", database=spec.dbname or None, connect_timeout=10,
                  autocommit=True, charset="utf8mb4")
    if spec.socket:
        kwargs["unix_socket"] = spec.socket
    else:
        kwargs.update(host=spec.host, port=spec.port)
    return pymysql.connect(**kwargs)


def open_connection(spec: ConnectionSpec, prompt: Callable[[str], str | None] | None = None):
    """A PyMySQL connection (autocommit), and the spec with the password that worked.

    The password: the spec's, else ``MYSQL_PWD``, the keyring, or none; on "access
    denied" without one, ``prompt`` is asked once. Errors are one line."""
    import pymysql

    password = spec.password
    if password is None:
        password = os.environ.get("MYSQL_PWD") or _keyring_password(spec)
    try:
        return _connect(spec, password), replace(spec, password=password)
    except pymysql.err.OperationalError as exc:
        code = exc.args[0] if exc.args else 0
        if code == _ACCESS_DENIED and password is None and prompt is not None:
            asked = prompt(spec.where())
            if asked:
                return open_connection(replace(spec, password=asked), None)
        raise _one_line(exc, spec) from None
    except pymysql.err.MySQLError as exc:
        raise _one_line(exc, spec) from None


def _one_line(exc, spec: ConnectionSpec) -> UserError:
    code = exc.args[0] if exc.args else 0
    if code == _ACCESS_DENIED:
        return UserError(f"wrong password for {spec.where()} (or the user may not connect from here)")
    if code in _CANT_CONNECT:
        return UserError(f"cannot reach MariaDB at {spec.via or spec.socket or f'{spec.host}:{spec.port}'}: "
                         "is the server up?")
    text = str(exc.args[1] if len(exc.args) > 1 else exc).strip().splitlines()[0]
    return UserError(f"MariaDB {spec.where()}: {text}")
