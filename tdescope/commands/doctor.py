"""``tdescope doctor``: can this machine probe a database process?"""

from __future__ import annotations

import json

from tdescope.commands._stdout import emit

HELP = "check gdb, eBPF, ptrace, perf, AES-NI and the engine plugins (and, with --dsn, what a server encrypts)"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--dsn", help="also connect here and list what the server encrypts (its inventory: "
                                      "catalogs and settings only), e.g. pg_tde's tables, key providers and WAL")
    parser.add_argument("--engine", default="postgres", help="the engine behind --dsn (default postgres)")


def _server_checks(args) -> list:
    """The inventory of the server at ``--dsn`` as informational lines (no pass/fail)."""
    from tdescope.app.doctor import Check
    from tdescope.commands._args import engine_named
    from tdescope.commands._dsn import open_dsn_session

    session = open_dsn_session(engine_named(args.engine), args)
    try:
        inventory = session.inventory()
    finally:
        session.close()
    return [Check(f"{section}: {name}", None, value) for section, name, value in inventory.rows]


def run(args) -> int:
    from tdescope.app.doctor import run_checks

    checks = run_checks()
    if args.dsn:
        checks += _server_checks(args)
    if args.json:
        emit(json.dumps([c.to_json() for c in checks], indent=2))
    else:
        for c in checks:
            if c.name == "install":  # the one line for everything missing (tdescope.app.doctor.install_advice)
                emit(f"to install what is missing: {c.value}")
                continue
            mark = {True: "ok  ", False: "FAIL", None: "    "}[c.ok]
            emit(f"{mark} {c.name:<20} {c.value}" + (f"  -> {c.fix}" if c.fix else ""))
    return 0 if all(c.ok is not False for c in checks if not c.name.startswith("engine ")) else 1
