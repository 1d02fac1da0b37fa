"""The ``tdescope`` command: the GUI by default, headless subcommands for servers without a screen.

Every subcommand prints human text, or JSON with ``--json``, and reports
failures as one line on stderr, never a traceback (set ``TDESCOPE_DEBUG=1`` to
see one). Exit status: 0 success (also when a reader such as ``head`` closed
standard output early), 1 ran but found nothing to show (an idle target, a
failed doctor check), 2 a user error, 3 an internal error, 130 interrupted.
Subcommands live in :mod:`tdescope.commands`.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys

from tdescope.app.errors import NothingObserved, UserError
from tdescope.commands import all_commands
from tdescope.commands._ssh import add_ssh_arguments
from tdescope.commands._stdout import ReaderGone, silence_stdout, stdout_reader_gone

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and shell completion)."""
    parser = argparse.ArgumentParser(prog="tdescope", description="Look inside database encryption while it happens.")
    parser.add_argument("--version", action=_Version, help="print the version (and the git commit it runs or was built "
                                                           "from) and exit")
    parser.add_argument("--pg-tde-source", metavar="PATH",
                        help="the pg-tde lab builds Percona pg_tde from this tarball or folder (default: "
                             "../shared/vendor/pg_tde beside the repository, or $TDESCOPE_PG_TDE_SOURCE)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    gui = sub.add_parser("gui", help="open the workbench (the default)")
    gui.add_argument("--lab", default="sqlcipher", metavar="ENGINE", help="engine lab to open (default: sqlcipher)")
    gui.add_argument("--engine", metavar="ENGINE", help="connect to a server instead: postgres or oracle")
    gui.add_argument("--dsn", default="", help="where the server is (a libpq DSN or an Oracle EZConnect string)")
    gui.add_argument("--encrypt", action="store_true",
                     help="encrypt this window's recordings (SQLCipher) from the first event; asks a passphrase")
    gui.add_argument("--backend", choices=("auto", "ebpf", "gdb"), default="auto",
                     help="what places probes: eBPF uprobes, gdb breakpoints (the teaching view), or auto (default)")
    gui.add_argument("file", nargs="?", help="a recorded session (.tds) to open")
    gui.add_argument("--pid", type=int, metavar="PID", help="with --ssh: the process on the host to probe "
                     "(default: the one that maps the engine's probed functions)")
    add_ssh_arguments(gui)
    for name, module_name in all_commands().items():
        module = importlib.import_module(module_name)
        # argparse reads help as a %-format ("95 % interval" was "% i"); a description is read as text.
        module.add_arguments(sub.add_parser(name, help=module.HELP.replace("%", "%%"), description=module.HELP))
    return parser


class _Version(argparse.Action):
    """``--version``: asks git for the commit only when it is given (not on every command)."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None):
        from tdescope.app.system.build_info import version_line

        print(version_line())  # on stdout, as argparse's own version action
        parser.exit()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tdescope`` command."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].endswith(".tds"):
        argv = ["gui", *argv]
    args = build_parser().parse_args(argv)
    command = args.command or "gui"
    if args.pg_tde_source:  # read where the lab builds (plugins/pgtde/build.py), in this process and its workers
        os.environ["TDESCOPE_PG_TDE_SOURCE"] = args.pg_tde_source
    try:
        if command == "gui":
            from tdescope.commands._dsn import refuse_password_in_dsn
            from tdescope.commands._ssh import gui_host

            refuse_password_in_dsn(getattr(args, "dsn", ""), getattr(args, "engine", None))
            _require_window_libraries()
            try:
                from tdescope.ui.app import run_gui
            except ImportError as exc:  # Qt's own libraries load, a system one under them does not
                if "shared object" not in str(exc):
                    raise
                raise UserError(f"the window cannot start: {exc} (`tdescope doctor` names the packages)") from None
            host = gui_host(args)  # --ssh DEST: a process on that host, through the agent
            engine = getattr(args, "engine", None) or ("postgres" if host and getattr(args, "dsn", "") else None)
            return run_gui(lab=getattr(args, "lab", "sqlcipher"), session_file=getattr(args, "file", None),
                           engine=engine, dsn=getattr(args, "dsn", ""),
                           encrypt=getattr(args, "encrypt", False), backend=getattr(args, "backend", "auto"),
                           host=host)
        return importlib.import_module(all_commands()[command]).run(args)
    except ReaderGone:
        return 0  # `| head`: the reader has seen enough (see commands/_stdout.py)
    except UserError as exc:
        _say(f"tdescope: {exc}")
        return 1 if isinstance(exc, NothingObserved) else 2
    except KeyboardInterrupt as exc:
        # every command ends so on Ctrl+C; one that kept something says what, e.g. "interrupted: 12 events ..."
        _say(f"tdescope: {exc.args[0] if exc.args else 'interrupted'}")
        return 130
    except BrokenPipeError:
        if not stdout_reader_gone():
            return _internal_error(sys.exc_info()[1])
        silence_stdout()
        return 0
    except Exception as exc:  # noqa: BLE001 - one line for users, the traceback on request
        return _internal_error(exc)


def _require_window_libraries() -> None:
    from tdescope.app.system.qt_libraries import window_problem

    problem = window_problem()
    if problem:
        raise UserError(problem)


def _internal_error(exc) -> int:
    if os.environ.get("TDESCOPE_DEBUG"):
        raise exc
    _say(f"tdescope: internal error: {type(exc).__name__}: {exc} (TDESCOPE_DEBUG=1 shows details)")
    return 3


def _say(line: str) -> None:
    """One line on stderr, which may itself be a closed pipe (``2>&1 | head``)."""
    try:
        print(line, file=sys.stderr, flush=True)
    except OSError:
        pass
