"""Opening an engine session from ``--dsn`` (server engines such as postgres), shared by capture and waits."""

from __future__ import annotations

import getpass
import re
import sys

from tdescope.app.errors import UserError

__all__ = ["add_dsn_arguments", "open_dsn_session", "prompt_password", "refuse_password_in_dsn"]

# "password=..." in a libpq keyword DSN, or "scheme://user:password@host" in a URI
_PASSWORD_IN_DSN = re.compile(r"(?i)(?:^|\s)password\s*=|^\w+(?:\+\w+)?://[^/@\s:]*:[^/@\s]+@")


def refuse_password_in_dsn(dsn: str | None) -> None:
    """UserError when ``dsn`` holds a password: a command line is visible to everyone in ``ps``."""
    if dsn and _PASSWORD_IN_DSN.search(dsn):
        raise UserError("put no password in --dsn (every user on this machine sees it in ps): "
                        "tdescope asks for it, or reads the OS keyring or PGPASSWORD")


def add_dsn_arguments(parser) -> None:
    """--sql, --workload, --target-pid, --allow-critical (``--dsn`` itself is added by the command)."""
    parser.add_argument("--sql", help="with --dsn: run this SQL on tdescope's connection (the probed backend)")
    parser.add_argument("--workload", help="with --dsn: run this engine workload instead (e.g. matrix, ab_dml)")
    parser.add_argument("--target-pid", type=int, help="with --dsn: probe this backend (from pg_stat_activity) "
                        "instead of tdescope's own")
    parser.add_argument("--allow-critical", action="store_true",
                        help="allow the postmaster and background processes as targets (dangerous)")


def prompt_password(where: str) -> str | None:
    """Ask on the terminal; None without one (then PGPASSWORD or the keyring must provide it)."""
    if not sys.stdin.isatty():
        return None
    return getpass.getpass(f"password for {where}: ")


def open_dsn_session(engine, args):
    """``engine.connect`` with the DSN, a password prompt and the target options."""
    from tdescope.app.engines.api import ConnectParams

    refuse_password_in_dsn(args.dsn)
    options = {"prompt": prompt_password, "pid": getattr(args, "target_pid", None),
               "allow_critical": getattr(args, "allow_critical", False)}
    return engine.connect(ConnectParams(dsn=args.dsn, options=options))


def dsn_workload(session, args):
    """(workload, params) for ``--sql`` or ``--workload NAME``."""
    if getattr(args, "sql", None):
        if not hasattr(session, "sql_workload"):
            raise UserError("this engine cannot run --sql")
        w = session.sql_workload(args.sql)
        return w, w.params
    name = getattr(args, "workload", None)
    if not name:
        raise UserError("--dsn needs --sql SQL or --workload NAME to drive the backend")
    for w in session.workloads():
        if w.name == name:
            return w, w.params
    raise UserError(f"no workload {name!r} (has: {', '.join(w.name for w in session.workloads())})")
