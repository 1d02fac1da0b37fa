"""``tdescope doctor``: can this machine probe a database process?"""

from __future__ import annotations

import json

from tdescope.commands._stdout import emit

HELP = "check gdb, eBPF, ptrace, perf, AES-NI and the engine plugins"


def add_arguments(parser) -> None:
    parser.add_argument("--json", action="store_true")


def run(args) -> int:
    from tdescope.app.doctor import run_checks

    checks = run_checks()
    if args.json:
        emit(json.dumps([c.to_json() for c in checks], indent=2))
    else:
        for c in checks:
            mark = {True: "ok  ", False: "FAIL", None: "    "}[c.ok]
            emit(f"{mark} {c.name:<20} {c.value}" + (f"  -> {c.fix}" if c.fix else ""))
    return 0 if all(c.ok is not False for c in checks if not c.name.startswith("engine ")) else 1
