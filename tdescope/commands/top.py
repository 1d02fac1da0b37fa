"""``tdescope top``: where a process's CPU goes, by function, headless (perf)."""

from __future__ import annotations

import json
import sys

from tdescope.app.errors import NothingObserved, UserError
from tdescope.commands._observe import add_target_arguments, interrupted_line, observe
from tdescope.commands._stdout import emit

HELP = "the hottest functions of a process (perf), with crypto marked and explained"

#: The table's header and row layout: self and total share of the samples, self samples, the crypto
#: mark, then the function, its library and what it does.
HEADER = f"{'self':>7} {'total':>7} {'samples':>7}  {'':6} function  [library]  what it does"


def add_arguments(parser) -> None:
    from tdescope.commands._args import add_perf_hz_argument

    add_target_arguments(parser)
    add_perf_hz_argument(parser)
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
    from tdescope.app.hotspots.symbols import debug_symbols_hint, row_label, unsymbolized

    seen = observe(args, hotspots=True, waits=False)
    windows = [e for e in seen.events if isinstance(e, HotspotWindow)]
    prof = Profile.from_windows(windows)
    if prof.samples == 0:
        if seen.interrupted:
            raise interrupted_line(seen, "")
        if seen.problems:
            raise UserError(seen.problems[0])
        if seen.cpu_s is not None and seen.cpu_s > 0.02 * seen.seconds:
            # not idle: say so rather than blame the process
            raise UserError(f"perf recorded no samples in {seen.seconds:g} s although pid {seen.pid} used "
                            f"{seen.cpu_s:.2f} s of CPU")
        raise NothingObserved(f"no CPU samples in {seen.seconds:g} s: pid {seen.pid} was idle")
    glossary = _glossary(args, seen.engine)
    rows = prof.top(args.limit)
    if not args.json:
        emit(HEADER)
    for r in rows:
        record = {
            "symbol": r.symbol, "dso": r.dso, "samples": r.self_samples, "self_pct": round(r.self_pct, 2),
            "total_pct": round(r.total_pct, 2), "crypto": is_crypto(r.symbol),
            "glossary": describe(r.symbol, glossary),
        }
        if args.json:
            emit(json.dumps(record))
        else:
            mark = "crypto" if record["crypto"] else ""
            about = f"  {record['glossary']}" if record["glossary"] else ""
            emit(f"{r.self_pct:6.1f}% {r.total_pct:6.1f}% {r.self_samples:7d}  {mark:6s} "
                 f"{row_label(r.symbol, r.dso)}{about}")
    if seen.interrupted:
        raise interrupted_line(seen, f"{prof.samples} samples in {len(windows)} windows")
    for p in seen.problems:
        print(f"tdescope: note: {p}", file=sys.stderr)
    for dso, pct in unsymbolized(prof):
        print(f"tdescope: note: {debug_symbols_hint(dso, pct)}", file=sys.stderr)
    if not args.json:
        print(f"{prof.samples} samples in {len(windows)} windows at {args.perf_hz} Hz; "
              f"time in crypto {crypto_pct(prof):.1f}%",
              file=sys.stderr)
    return 0
