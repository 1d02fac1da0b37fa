"""Argument types and engine lookup shared by the commands."""

from __future__ import annotations

import argparse

from tdescope.app.errors import UserError

__all__ = ["positive_int", "seconds", "percent", "hertz", "add_stop_budget_argument", "add_perf_hz_argument",
           "add_engine_wait_argument", "engine_named", "recipe_named"]


def positive_int(text: str) -> int:
    """argparse type: a whole number >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def seconds(text: str) -> float:
    """argparse type: seconds in (0, 3600]."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 3600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 3600 seconds, not {value:g}")
    return value


def percent(text: str) -> float:
    """argparse type: a percentage in (0, 100], returned as a fraction."""
    try:
        value = float(text.rstrip("%"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a percentage: {text!r}") from None
    if not 0 < value <= 100:
        raise argparse.ArgumentTypeError(f"must be between 0 and 100 %, not {value:g}")
    return value / 100


def hertz(text: str) -> int:
    """argparse type: a sampling rate in whole Hz, 1 to 10000."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of Hz: {text!r}") from None
    if not 1 <= value <= 10_000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 10000 Hz, not {value}")
    return value


def add_perf_hz_argument(parser) -> None:
    """``--perf-hz HZ``, shared by the commands that run perf."""
    from tdescope.app.hotspots.perf_record import DEFAULT_HZ

    parser.add_argument("--perf-hz", type=hertz, default=DEFAULT_HZ, metavar="HZ",
                        help=f"perf samples per second while the process runs (default {DEFAULT_HZ}: a 5 s run of a "
                             f"busy process gives ~{5 * DEFAULT_HZ}); each sample costs the process, so higher "
                             "rates cost more")


def poll_rate(text: str) -> float:
    """argparse type: polls per second, 0.1 to 20."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of polls per second: {text!r}") from None
    if not 0.1 <= value <= 20:
        raise argparse.ArgumentTypeError(f"must be between 0.1 and 20 Hz, not {value:g}")
    return value


def add_engine_wait_argument(parser) -> None:
    """``--engine-wait-hz HZ``, shared by the commands that poll the engine's waits."""
    from tdescope.app.observe.sampling import ENGINE_WAIT_HZ

    parser.add_argument("--engine-wait-hz", type=poll_rate, default=ENGINE_WAIT_HZ, metavar="HZ",
                        help=f"engine-wait polls per second, each one statement on the server (default "
                             f"{ENGINE_WAIT_HZ:g}: every {1000 / ENGINE_WAIT_HZ:.0f} ms PostgreSQL's pg_stat_activity "
                             "row of the one backend, or MariaDB's performance_schema.events_waits_current; with "
                             "pg_wait_sampling installed its history is read once a second instead)")


def add_stop_budget_argument(parser) -> None:
    """``--stop-budget PCT``, shared by the commands that arm probes."""
    parser.add_argument("--stop-budget", type=percent, metavar="PCT",
                        help="the share of wall time the target may spend stopped in probe hits, in %% (default 1; "
                             "50 for a lab the workbench started); over it the probe pauses, then re-arms")
    parser.add_argument("--accept-stop", action="store_true",
                        help="gdb: probe a process with more than one thread anyway; gdb stops all its threads "
                             "together while it attaches and arms (hundreds of ms) and at every hit")


def add_probe_arguments(parser) -> None:
    """``--backend`` and the eBPF window's bounds, shared by the commands that arm probes."""
    parser.add_argument("--backend", choices=("auto", "ebpf", "gdb"), default="auto",
                        help="what places the probe: eBPF uprobes (microseconds per page, nothing stops the target), "
                             "gdb breakpoints, or auto (default: eBPF where it can load, else gdb, saying why)")
    parser.add_argument("--sample", type=positive_int, default=1, metavar="N",
                        help="eBPF: copy one matching call in N (default 1: every one)")
    parser.add_argument("--max-mb-per-s", type=float, default=0.0, metavar="MB",
                        help="eBPF: copy at most this many MB per second; calls over it are counted, not copied")
    parser.add_argument("--ring-mb", type=float, metavar="MB",
                        help="eBPF: ring buffer size (default 64, or half a second of --max-mb-per-s); records it "
                             "has no room for are counted as lost")


def probe_backend(args, recipe, own_target: bool = False):
    """The backend ``args`` ask for (see :func:`add_probe_arguments`), and a line when auto fell back to gdb.

    gdb's presence is checked only when gdb is the one chosen."""
    from tdescope.app.probe.selection import ProbeOptions, choose_backend

    options = ProbeOptions(args.backend, args.sample, args.max_mb_per_s, args.ring_mb)
    backend, note = choose_backend(options, recipe)
    if backend.name == "gdb":
        from tdescope.app.gdb.mi import require_gdb

        require_gdb()  # missing or too old: one line before anything connects
    return backend, note


def engine_named(name: str):
    """The loaded engine called ``name``, or UserError naming the loaded ones (or why it failed)."""
    from tdescope.app.engines import discover_engines

    engines, errors = discover_engines()
    if name not in engines:
        why = next((e.message for e in errors if e.name == name), None)
        known = ", ".join(sorted(engines)) or "none"
        raise UserError(why or f"unknown engine {name!r} (loaded: {known})")
    return engines[name]


def recipe_named(engine, key: str):
    """The engine's probe recipe matching ``key`` (its key, a suffix of it, or its direction)."""
    for recipe in engine.probe_recipes():
        if recipe.key == key or recipe.direction == key or recipe.key.endswith("." + key):
            return recipe
    keys = ", ".join(r.key for r in engine.probe_recipes())
    raise UserError(f"engine {engine.name} has no recipe {key!r} (has: {keys})")
