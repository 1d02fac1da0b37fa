"""``tdescope ab``: what encryption costs, as a median over interleaved rounds with its interval."""

from __future__ import annotations

import json
import math
import sys

from tdescope.app.ab.result_table import interval_text
from tdescope.app.errors import UserError
from tdescope.app.events import AB_SIDES, is_ab
from tdescope.commands._args import engine_named, positive_int, recipe_named
from tdescope.commands._dsn import add_dsn_arguments
from tdescope.commands._ssh import add_ssh_arguments, agent_windows, lost_line, ssh_host
from tdescope.commands._target import resolve_target, run_to_end

HELP = "time a workload encrypted vs plain over interleaved rounds: median ratio and its 95 % interval"


def add_arguments(ab) -> None:
    where = ab.add_mutually_exclusive_group(required=True)
    where.add_argument("--lab", metavar="ENGINE", help="start ENGINE's lab (sqlcipher, postgres, mariadb) and time it")
    where.add_argument("--dsn", help="connect to this server (with --engine) and time a workload there")
    ab.add_argument("--engine", default="sqlcipher", help="the engine behind --dsn (default sqlcipher)")
    add_dsn_arguments(ab)
    ab.add_argument("--rounds", type=positive_int, default=5, help="timed rounds, ABBA order (default 5)")
    ab.add_argument("--warmup", type=int, default=1, choices=range(0, 11), metavar="N",
                    help="untimed warm-up rounds first (default 1)")
    ab.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a workload parameter, e.g. --set groups=10 (repeatable)")
    ab.add_argument("--captures", type=int, default=0, metavar="N",
                    help="first capture N pairs in a separate, untimed round (no probe in a timed round; default 0)")
    ab.add_argument("--recipe", default="decrypt", help="with --captures: decrypt (default), encrypt or a recipe key")
    ab.add_argument("--json", action="store_true", help="one JSON object: per phase and total ratio_median, "
                    "ratio_ci_low, ratio_ci_high, rounds, and the raw per-round times")
    add_ssh_arguments(ab)


def _params(defaults: dict, settings: list[str]) -> dict:
    params = dict(defaults)
    for item in settings:
        name, sep, value = item.partition("=")
        if not sep or name not in params:
            raise UserError(f"--set {item}: parameters are {', '.join(params) or '(none)'}, as NAME=VALUE")
        try:
            params[name] = type(params[name])(value) if not isinstance(params[name], bool) else value == "1"
        except ValueError:
            kind = type(params[name]).__name__
            raise UserError(f"--set {item}: {name} takes {'an' if kind[0] in 'aeiou' else 'a'} {kind}") from None
    return params


def run(args) -> int:
    from tdescope.app.engines.capabilities import Ability, has_ability
    from tdescope.app.events import ABResult, PageCapture, Problem, WorkloadProgress
    from tdescope.app.experiment import ABRun, CaptureSpec, Experiment
    from tdescope.app.probe.window import CaptureLimits, stop_budget

    ssh_host(args)  # a bad --ssh DEST, or ssh options without it: one line before anything starts
    if args.captures < 0:
        raise UserError("--captures must be 0 or more")
    engine = engine_named(args.lab or args.engine)
    recipe = recipe_named(engine, args.recipe) if args.captures else None
    progress_line = [""]
    captured = [0]

    def sink(event) -> None:
        if isinstance(event, PageCapture):
            captured[0] += 1
        elif isinstance(event, WorkloadProgress) and event.run_fraction is not None and sys.stderr.isatty():
            line = f"{event.run_fraction * 100:5.1f} %  {event.message}"[:100]
            print("\r" + line.ljust(len(progress_line[0])), end="", file=sys.stderr, flush=True)
            progress_line[0] = line
        elif isinstance(event, Problem):
            pass  # raised once, below

    def first_ab(workloads):
        return next((w for w in workloads if is_ab(w.sides)), None)

    from tdescope.commands._ssh import connect

    agent = connect(args) if args.ssh else None  # the server on the host, its connection through ssh
    interrupted = False
    try:
        target = resolve_target(args, engine, default_workload=first_ab, remote=agent)
        try:
            params = _params(dict(target.params), args.set)
            if recipe is not None and recipe.requires and has_ability(target.session, Ability.REQUIRE_EXTENSIONS):
                target.session.require_extension(recipe.requires)  # loaded before the probe goes in
            limits = CaptureLimits(max_captures=max(args.captures, 1), max_seconds=30.0, first_hit_timeout=30.0,
                                   stops=stop_budget(target.own_target))
            capture = CaptureSpec(recipe=recipe, limits=limits, backend=_backend(recipe, agent),
                                  windows=agent_windows(agent, {}) if agent is not None else None) \
                if recipe is not None else None
            rounds = ABRun(workload=target.workload, params=params, rounds=args.rounds, warmup=args.warmup,
                           local_server=agent is None) if target.workload is not None else None
            exp = Experiment(target.session, engine.name, sink, capture=capture, run=rounds)
            if agent is not None:
                print(f"timing on {agent.label} (the server's CPU per round is not read over ssh)", file=sys.stderr)
            try:
                run_to_end(exp, 60)
            except KeyboardInterrupt:
                interrupted = True  # Ctrl+C: the rounds that completed are still a (wider) answer
        finally:
            if progress_line[0]:
                print("\r" + " " * len(progress_line[0]) + "\r", end="", file=sys.stderr, flush=True)
            target.close()
    finally:
        if agent is not None:
            agent.close()
    if agent is not None:
        exp.error = lost_line(agent, exp.error)
    result: ABResult | None = exp.ab_result
    if interrupted and (result is None or result.total() is None):
        raise KeyboardInterrupt("interrupted before a timed round completed: nothing to compare")
    if exp.error and not interrupted:
        raise UserError(exp.error)
    if result is None or result.total() is None:
        raise UserError("no round completed: nothing to compare")
    where = f"{engine.name} lab" if args.lab else f"{engine.name} at {args.dsn}"
    where += f" on {agent.label}" if agent is not None else ""
    if recipe is not None:
        print(f"{captured[0]} pairs captured in the untimed capture round", file=sys.stderr)
    if args.json:
        print(json.dumps(to_json(result, engine.name)), flush=True)
    else:
        print(text_report(result, where))
    if interrupted:
        sides = [{t.round for t in result.times if t.round > 0 and t.side == side} for side in AB_SIDES]
        done = len(sides[0] & sides[1])  # rounds with both sides timed: the ones that give a ratio
        raise KeyboardInterrupt(f"interrupted after {done} of {args.rounds} timed rounds: the figures above are "
                                "from those")
    return 0


def _backend(recipe, agent):
    """What places the capture round's probe here (auto: eBPF where it loads); over ssh the agent's."""
    if recipe is None or agent is not None:
        return None
    from tdescope.app.probe.selection import ProbeOptions, choose_backend

    backend, note = choose_backend(ProbeOptions("auto"), recipe)
    if note:
        print(note, file=sys.stderr, flush=True)
    return backend


def _num(value: float | None, digits: int = 4):
    return None if value is None or not math.isfinite(value) else round(value, digits)


def to_json(result, engine: str) -> dict:
    """The ``ab --json`` object (also what tests and scripts read)."""
    total = result.total()
    return {
        "engine": engine, "workload": result.workload, "params": result.params,
        "rounds": result.completed_rounds(), "rounds_asked": result.rounds, "warmup": result.warmup,
        "ratio_median": _num(total.ratio_median), "ratio_ci_low": _num(total.ratio_ci_low),
        "ratio_ci_high": _num(total.ratio_ci_high), "interval": result.interval, "capture": result.capture,
        "phases": [{"phase": p.phase, "encrypted_median_s": _num(p.encrypted_median_s, 6),
                    "plain_median_s": _num(p.plain_median_s, 6), "ratio_median": _num(p.ratio_median),
                    "ratio_ci_low": _num(p.ratio_ci_low), "ratio_ci_high": _num(p.ratio_ci_high),
                    "ratios": list(p.ratios)} for p in result.phases],
        "raw": [{"round": t.round, "side": t.side, "warmup": t.round == 0,
                 "phases": {k: _num(v, 6) for k, v in t.phases.items()}, "server_cpu_s": _num(t.server_cpu_s, 6)}
                for t in result.times],
        "machine_busy": _num(result.machine_busy, 3), "other_busy": _num(result.other_busy, 3),
        "load1": _num(result.load1, 2), "cancelled": result.cancelled, "warnings": result.warnings(),
    }


def text_report(result, where: str) -> str:
    """The human form: a phase table, the server's CPU, the machine's load, warnings."""
    lines = [f"{result.label} · {where} · {result.completed_rounds()} timed rounds (ABBA…, "
             f"{result.warmup} warm-up) · captures {result.capture}",
             f"{'phase':<10} {'encrypted s':>11} {'plain s':>9} {'ratio':>7}  {'95 % interval':<15} per-round ratios"]
    for p in result.phases:
        lines.append(f"{p.phase:<10} {p.encrypted_median_s:>11.3f} {p.plain_median_s:>9.3f} {p.ratio_median:>6.2f}×"
                     f"  {interval_text(p.ratio_ci_low, p.ratio_ci_high, '×'):<15} "
                     + " ".join(f"{r:.2f}" for r in p.ratios))
    cpu = {side: [t.server_cpu_s for t in result.times if t.round > 0 and t.side == side and t.server_cpu_s]
           for side in AB_SIDES}
    if cpu["encrypted"] and cpu["plain"]:
        enc, plain = sorted(cpu["encrypted"]), sorted(cpu["plain"])
        lines.append(f"server CPU per round (median): encrypted {enc[len(enc) // 2]:.3f} s, "
                     f"plain {plain[len(plain) // 2]:.3f} s")
    if result.machine_busy is not None:
        lines.append(f"machine during the timed rounds: {result.machine_busy * 100:.0f} % of the CPUs busy, "
                     f"{(result.other_busy or 0) * 100:.0f} % by other processes; load {result.load1:.2f}")
    lines.append(f"interval: {result.interval}")
    lines.extend(f"warning: {w}" for w in result.warnings())
    if result.cancelled:
        lines.append("cancelled: the figures cover the rounds that completed")
    return "\n".join(lines)
