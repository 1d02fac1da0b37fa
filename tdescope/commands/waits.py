"""``tdescope waits``: what a process waits on (syscalls, memory operations, CPU), headless."""

from __future__ import annotations

import json
import sys

from tdescope.app.errors import NothingObserved, UserError
from tdescope.commands._args import add_engine_wait_argument
from tdescope.commands._observe import add_target_arguments, interrupted_line, observe
from tdescope.commands._stdout import emit

HELP = "what a process waits on: OS wait classes from /proc (and the engine's own waits)"

#: The table's header, in the layout of its rows.
HEADER = f"{'share':>7} {'samples':>7}  {'class':17} event  (source)"


def add_arguments(parser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--engine", default=None, help="engine for --dsn (default postgres)")
    parser.add_argument("--idle", action="store_true", help="keep the Idle class in the ranking")
    add_engine_wait_argument(parser)


def run(args) -> int:
    from tdescope.app.events import WaitSample
    from tdescope.app.waits.counter import WaitCounter

    seen = observe(args, hotspots=False, waits=True)
    waits = WaitCounter()
    waits.add(e for e in seen.events if isinstance(e, WaitSample))
    if waits.samples == 0:
        if seen.interrupted:
            raise interrupted_line(seen, "")
        raise UserError(seen.problems[0] if seen.problems else f"no wait samples in {seen.seconds:g} s")
    rows = waits.top(args.limit, exclude=() if args.idle else ("Idle",))
    if not rows and not seen.interrupted:
        raise NothingObserved(f"no samples but Idle in {seen.seconds:g} s: pid {seen.pid} was idle "
                              "(--idle lists them)")
    if not args.json:
        emit(HEADER)
    for r in rows:
        record = {"class": r.wait_class, "event": r.event, "samples": r.samples, "pct": round(r.pct, 2),
                  "source": r.source}
        if args.json:
            emit(json.dumps(record))
        else:
            emit(f"{r.pct:6.1f}% {r.samples:7d}  {r.wait_class:17s} {r.event}  ({r.source})")
    if seen.interrupted:
        raise interrupted_line(seen, f"{waits.samples} samples" if rows else "")
    for p in seen.problems:
        print(f"tdescope: note: {p}", file=sys.stderr)
    if not args.json:
        shown = "" if args.idle else " (Idle left out; --idle keeps it)"
        print(f"{waits.samples} samples{shown}", file=sys.stderr)
    return 0
