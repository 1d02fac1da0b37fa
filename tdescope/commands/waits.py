"""``tdescope waits``: what a process waits on (syscalls, memory operations, CPU), headless."""

from __future__ import annotations

import json
import sys

from tdescope.app.errors import UserError
from tdescope.commands._observe import add_target_arguments, observe

HELP = "what a process waits on: OS wait classes from /proc (and the engine's own waits)"


def add_arguments(parser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--engine", default=None, help="engine for --dsn (default postgres)")
    parser.add_argument("--idle", action="store_true", help="keep the Idle class in the ranking")


def run(args) -> int:
    from tdescope.app.events import WaitSample
    from tdescope.app.waits.counter import WaitCounter

    events, problems, _ = observe(args, hotspots=False, waits=True)
    waits = WaitCounter()
    waits.add(e for e in events if isinstance(e, WaitSample))
    if waits.samples == 0:
        raise UserError(problems[0] if problems else f"no wait samples in {args.seconds:g} s")
    rows = waits.top(args.limit, exclude=() if args.idle else ("Idle",))
    for r in rows:
        record = {"class": r.wait_class, "event": r.event, "samples": r.samples, "pct": round(r.pct, 2),
                  "source": r.source}
        if args.json:
            print(json.dumps(record))
        else:
            print(f"{r.pct:6.1f}% {r.samples:6d}  {r.wait_class:17s} {r.event}  ({r.source})")
    for p in problems:
        print(f"tdescope: note: {p}", file=sys.stderr)
    if not args.json:
        shown = "" if args.idle else " (Idle left out; --idle keeps it)"
        print(f"{waits.samples} samples{shown}", file=sys.stderr)
    return 0
