"""``tdescope top``: where a process's CPU goes, by function, headless (perf)."""

from __future__ import annotations

import json
import sys

from tdescope.app.errors import UserError
from tdescope.commands._observe import add_target_arguments, observe

HELP = "the hottest functions of a process (perf), with crypto marked and explained"


def add_arguments(parser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--engine", default=None,
                        help="whose glossary explains the functions (default: the --lab engine, else all)")


def _glossary(args, engine):
    from tdescope.app.hotspots.glossary import load_glossary
    from tdescope.commands._args import engine_named

    if args.engine:
        return engine_named(args.engine).glossary()
    if engine is not None:
        return engine.glossary()
    return load_glossary("sqlite", "openssl", "oracle")


def run(args) -> int:
    from tdescope.app.events import HotspotWindow
    from tdescope.app.hotspots.glossary import describe
    from tdescope.app.hotspots.crypto import is_crypto
    from tdescope.app.hotspots.profile import Profile, crypto_pct

    events, problems, engine = observe(args, hotspots=True, waits=False)
    windows = [e for e in events if isinstance(e, HotspotWindow)]
    prof = Profile.from_windows(windows)
    if prof.samples == 0:
        raise UserError(problems[0] if problems else f"no samples in {args.seconds:g} s (is the process idle?)")
    glossary = _glossary(args, engine)
    rows = prof.top(args.limit)
    for r in rows:
        record = {
            "symbol": r.symbol, "dso": r.dso, "samples": r.self_samples, "self_pct": round(r.self_pct, 2),
            "total_pct": round(r.total_pct, 2), "crypto": is_crypto(r.symbol),
            "glossary": describe(r.symbol, glossary),
        }
        if args.json:
            print(json.dumps(record))
        else:
            mark = "crypto" if record["crypto"] else ""
            about = f"  {record['glossary']}" if record["glossary"] else ""
            print(f"{r.self_pct:6.1f}% {r.total_pct:6.1f}% {r.self_samples:6d}  {mark:6s} "
                  f"{r.symbol}  [{r.dso.rsplit('/', 1)[-1]}]{about}")
    for p in problems:
        print(f"tdescope: note: {p}", file=sys.stderr)
    if not args.json:
        print(f"{prof.samples} samples in {len(windows)} windows; time in crypto {crypto_pct(prof):.1f}%",
              file=sys.stderr)
    return 0
