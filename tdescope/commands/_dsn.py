"""Opening an engine session from ``--dsn`` (server engines such as postgres); see ``_target.resolve_target``."""

from __future__ import annotations

import getpass
import re
import sys

from tdescope.app.errors import UserError

__all__ = ["add_dsn_arguments", "open_dsn_session", "prompt_password", "refuse_password_in_dsn"]

# "password=..." in a libpq keyword DSN, or "scheme://user:password@host" in a URI
_PASSWORD_IN_DSN = re.compile(r"(?i)(?:^|\s)password\s*=|^\w+(?:\+\w+)?://[^/@\s:]*:[^/@\s]+@")


#: Where each engine's connection code looks for a password besides the prompt (see the plugins' connection.py).
_PASSWORD_WAYS = {
    "postgres": "the OS keyring (service tdescope-postgres), PGPASSWORD or ~/.pgpass",
    "mariadb": "the OS keyring (service tdescope-mariadb) or MYSQL_PWD",
    "oracle": "the OS keyring (service tdescope-oracle)",
}


def refuse_password_in_dsn(dsn: str | None, engine: str | None = None) -> None:
    """UserError when ``dsn`` holds a password: a command line is visible to everyone in ``ps``.

    The hint names the ways ``engine`` (a name; postgres when None, as ``--dsn`` defaults to it)
    takes a password instead."""
    if dsn and _PASSWORD_IN_DSN.search(dsn):
        ways = _PASSWORD_WAYS.get(engine or "postgres", "the OS keyring")
        raise UserError("put no password in --dsn (every user on this machine sees it in ps): "
                        f"tdescope asks for it, or reads {ways}")


def add_dsn_arguments(parser) -> None:
    """--sql, --workload, --target-pid, --allow-critical (``--dsn`` itself is added by the command)."""
    parser.add_argument("--sql", help="with --dsn: run this SQL on tdescope's connection (the probed backend)")
    parser.add_argument("--workload", help="with --dsn: run this engine workload instead (e.g. matrix, ab_dml)")
    parser.add_argument("--cleanup", action="store_true",
                        help="with --dsn: drop what the workload created on the server (tables, a scratch database)")
    parser.add_argument("--target-pid", type=int, help="with --dsn: probe this backend (from pg_stat_activity) "
                        "instead of tdescope's own")
    parser.add_argument("--allow-critical", action="store_true",
                        help="allow the postmaster and background processes as targets (dangerous)")


def prompt_password(where: str) -> str | None:
    """Ask on the terminal; None without one (then PGPASSWORD or the keyring must provide it)."""
    if not sys.stdin.isatty():
        return None
    return getpass.getpass(f"password for {where}: ")


def open_dsn_session(engine, args, remote=None):
    """The engine's session on the DSN, with a password prompt and the target options.

    ``remote`` (a :class:`~tdescope.app.remote.over_ssh.RemoteAgent`): the DSN is the server as the ``--ssh``
    host sees it; the engine connects through a forward on that ssh connection and checks the server's
    processes there (:class:`~tdescope.app.engines.capabilities.ConnectsThrough`)."""
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.engines.capabilities import Ability, has_ability
    from tdescope.app.engines.registry import open_session

    refuse_password_in_dsn(args.dsn, engine.name)
    params = ConnectParams(dsn=args.dsn, prompt=prompt_password, pid=getattr(args, "target_pid", None),
                           allow_critical=bool(getattr(args, "allow_critical", False)))
    if remote is not None:
        if not has_ability(engine, Ability.CONNECT_THROUGH):
            raise UserError(f"the {engine.name} engine's --dsn is not carried over --ssh: give --pid PID of its "
                            "server process on the host")
        from tdescope.app.remote.over_ssh import HostProcesses

        params = engine.through(params, remote.host.forward, HostProcesses(remote))
    return open_session(engine, params)
