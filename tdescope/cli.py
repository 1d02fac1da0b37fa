"""The ``tdescope`` command: the GUI by default, headless subcommands for servers without a screen.

Every subcommand prints human text, or JSON with ``--json``; exits 0 only on
success; and reports failures as one line on stderr, never a traceback (set
``TDESCOPE_DEBUG=1`` to see one).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from pathlib import Path

from tdescope import __version__
from tdescope.app.errors import UserError

__all__ = ["main"]


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, not {value:g}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and shell completion)."""
    parser = argparse.ArgumentParser(prog="tdescope", description="Look inside database encryption while it happens.")
    parser.add_argument("--version", action="version", version=f"tdescope {__version__}")
    sub = parser.add_subparsers(dest="command")

    gui = sub.add_parser("gui", help="open the workbench (the default)")
    gui.add_argument("--lab", default="sqlcipher", metavar="ENGINE", help="engine lab to open (default: sqlcipher)")
    gui.add_argument("file", nargs="?", help="a recorded session (.tds) to open")

    doctor = sub.add_parser("doctor", help="check gdb, ptrace, perf, AES-NI and the engine plugins")
    doctor.add_argument("--json", action="store_true")

    cap = sub.add_parser("capture", help="capture pages before and after decryption, headless")
    cap.add_argument("--engine", default="sqlcipher")
    where = cap.add_mutually_exclusive_group(required=True)
    where.add_argument("--lab", action="store_true", help="start the engine's lab and run its workload")
    where.add_argument("--pid", type=_positive_int, help="attach to this process")
    cap.add_argument("--recipe", default="decrypt", help="decrypt (default) or encrypt, or a recipe key")
    cap.add_argument("--count", type=_positive_int, default=10, help="page pairs to capture (default 10)")
    cap.add_argument("--timeout", type=_seconds, default=30.0, help="give up after this many seconds (default 30)")
    cap.add_argument("--dump", metavar="DIR", help="write NNNN-before.bin / NNNN-after.bin here")
    cap.add_argument("--json", action="store_true", help="one JSON object per capture")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``tdescope`` command."""
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0].endswith(".tds"):
        argv = ["gui", *argv]
    parser = build_parser()
    args = parser.parse_args(argv)
    command = args.command or "gui"
    try:
        if command == "gui":
            return _gui(args)
        if command == "doctor":
            return _doctor(args)
        if command == "capture":
            return _capture(args)
    except UserError as exc:
        print(f"tdescope: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tdescope: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one line for users, the traceback on request
        if os.environ.get("TDESCOPE_DEBUG"):
            raise
        print(f"tdescope: internal error: {type(exc).__name__}: {exc} (TDESCOPE_DEBUG=1 shows details)", file=sys.stderr)
        return 3
    parser.error(f"unknown command {command}")
    return 2


def _gui(args) -> int:
    from tdescope.ui.app import run_gui

    return run_gui(lab=getattr(args, "lab", "sqlcipher"), session_file=getattr(args, "file", None))


def _doctor(args) -> int:
    from tdescope.app.doctor import run_checks

    checks = run_checks()
    if args.json:
        print(json.dumps([c.to_json() for c in checks], indent=2))
    else:
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "    "}[c.ok]
            print(f"{mark} {c.name:<20} {c.value}" + (f"  -> {c.fix}" if c.fix else ""))
    return 0 if all(c.ok is not False for c in checks if not c.name.startswith("engine ")) else 1


def _engine(name: str):
    from tdescope.app.engines import discover_engines

    engines, errors = discover_engines()
    if name not in engines:
        why = next((e.message for e in errors if e.name == name), None)
        known = ", ".join(sorted(engines)) or "none"
        raise UserError(why or f"unknown engine {name!r} (loaded: {known})")
    return engines[name]


def _recipe(engine, key: str):
    for recipe in engine.probe_recipes():
        if recipe.key == key or recipe.direction == key or recipe.key.endswith("." + key):
            return recipe
    keys = ", ".join(r.key for r in engine.probe_recipes())
    raise UserError(f"engine {engine.name} has no recipe {key!r} (has: {keys})")


def _capture(args) -> int:
    from tdescope.app.capture import CaptureLimits
    from tdescope.app.capture_record import describe_capture
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.events import PageCapture, Problem
    from tdescope.app.experiment import Experiment
    from tdescope.app.gdb.mi import find_gdb

    find_gdb()
    engine = _engine(args.engine)
    recipe = _recipe(engine, args.recipe)
    decoder = engine.page_decoder()
    limits = CaptureLimits(max_captures=args.count, max_seconds=args.timeout, first_hit_timeout=args.timeout)
    dump = Path(args.dump) if args.dump else None
    if dump is not None:
        try:
            dump.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UserError(f"cannot create dump folder {dump}: {exc.strerror}") from None
    lock = threading.Lock()
    written = [0]

    def sink(event) -> None:
        if isinstance(event, PageCapture):
            record, _ = describe_capture(event, decoder)
            with lock:
                if dump is not None:
                    (dump / f"{event.seq:04d}-before.bin").write_bytes(event.before)
                    (dump / f"{event.seq:04d}-after.bin").write_bytes(event.after)
                print(json.dumps(record.to_json()) if args.json else record.line(), flush=True)
                written[0] += 1
        elif isinstance(event, Problem) and not args.json:
            pass  # reported once, below

    session = None
    try:
        if args.lab:
            session = engine.connect(ConnectParams(options={"lab": True}))
            workload = session.workloads()[0]
            exp = Experiment(session, workload, workload.params, recipe, limits, engine.name, sink,
                             repeat_until_captured=True)
        else:
            if not os.path.exists(f"/proc/{args.pid}"):
                raise UserError(f"pid {args.pid} is gone (no such process)")
            exp = Experiment(None, None, {}, recipe, limits, engine.name, sink, pid=args.pid)
        exp.start()
        try:
            while not exp.wait(0.2):
                pass
        except KeyboardInterrupt:
            exp.cancel()
            exp.wait(15)
            raise
    finally:
        if session is not None:
            session.close()
    if exp.error:
        raise UserError(exp.error)
    if written[0] == 0:
        raise UserError(f"no page captured within {args.timeout:g} s")
    if not args.json:
        s = exp.capture_summary
        stopped = f", target stopped {s.stopped_s * 1000:.1f} ms in probes" if s else ""
        print(f"{written[0]} page pairs captured{stopped}", file=sys.stderr)
    return 0
