"""``tdescope record``: record a session headless (a database server rarely has a screen).

Runs the workload (lab) or just watches a process (``--pid``) for ``--seconds``,
with a bounded capture window and the OS wait and perf hotspot samplers, all
publishing into one :class:`~tdescope.app.session.live.LiveSession` (the hub the
window records through), which writes every event to a .tds file as it happens:
a kill -9 loses at most the last half second.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import sys
import threading
import time

from tdescope.app.errors import UserError
from tdescope.commands._args import (
    add_engine_wait_argument, add_perf_hz_argument, add_probe_arguments, add_stop_budget_argument, engine_named,
    positive_int, probe_backend,
    recipe_named, seconds,
)
from tdescope.commands._ssh import add_ssh_arguments, lost_line, ssh_host
from tdescope.commands._target import resolve_target

HELP = "record a session (workload, captures, hotspots, waits) to a .tds file, headless"


def add_arguments(parser) -> None:
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--lab", metavar="ENGINE", help="start this engine's lab and run its workload")
    where.add_argument("--pid", type=positive_int, help="watch this process (with --engine)")
    where.add_argument("--dsn", help="connect to this server (with --engine) and watch the backend serving it, or "
                       "--target-pid; the file carries the inventory, server version and engine waits")
    parser.add_argument("--engine", default="sqlcipher", help="engine of --pid or --dsn (default sqlcipher)")
    parser.add_argument("--workload", help="workload to run (lab default: its first; --dsn default: none, watch)")
    parser.add_argument("--sql", help="with --dsn: run this SQL on tdescope's connection, again and again")
    parser.add_argument("--target-pid", type=int, help="with --dsn: watch this backend (from pg_stat_activity) "
                        "instead of tdescope's own")
    parser.add_argument("--cleanup", action="store_true",
                        help="with --dsn: drop what the workload created on the server (tables, a scratch database)")
    parser.add_argument("--captures", type=int, default=50, metavar="N",
                        help="page pairs to capture in the probe window (0: no probe; default 50)")
    parser.add_argument("--recipe", default="decrypt", help="probe recipe: decrypt (default), encrypt or a key")
    add_stop_budget_argument(parser)
    add_probe_arguments(parser)
    parser.add_argument("--seconds", type=seconds, required=True, metavar="S", help="how long to record")
    parser.add_argument("--allow-critical", action="store_true",
                        help="allow probing a postmaster or background process with --pid (dangerous)")
    parser.add_argument("--no-hotspots", action="store_true", help="do not run perf")
    add_perf_hz_argument(parser)
    parser.add_argument("--no-waits", action="store_true", help="do not sample OS waits")
    parser.add_argument("--os-waits", choices=("auto", "ebpf", "proc"), default="auto",
                        help="exact OS waits too: auto traces every syscall with eBPF where it loads, ebpf "
                             "insists, proc records the /proc samples only")
    add_engine_wait_argument(parser)
    parser.add_argument("--sample-columns", action="store_true",
                        help="with --dsn: also sample bytea columns of user tables for pgcrypto messages (reads the "
                             "first 64 bytes of up to 20 rows of each; by default tdescope reads catalogs and "
                             "statistics views only)")
    parser.add_argument("-o", "--output", required=True, metavar="FILE.tds", help="the session file to write")
    parser.add_argument("--keep-plaintext", action="store_true",
                        help="with --pid: keep decrypted page contents in the unencrypted file (by default only a "
                             "lab's, or an --encrypt file, keeps them)")
    parser.add_argument("--encrypt", action="store_true",
                        help="encrypt the session file (SQLCipher); the passphrase is asked for, or read as one "
                             "line from stdin when it is not a terminal")
    add_ssh_arguments(parser)


def _start_samplers(pid: int, args, record, wait_source, notes: list[str]):
    """OS waits (/proc, 20 Hz), engine waits and perf hotspots (1 s windows) on ``pid``.

    The same :class:`~tdescope.app.observe.sampling.Observation` that feeds the live docks,
    so the CLI and the GUI record the same streams. Returns its stop function.
    """
    from tdescope.app.hotspots.profile import check_perf
    from tdescope.app.observe.sampling import Observation, engine_poll_text

    hotspots = not args.no_hotspots
    if hotspots and (why := check_perf(pid)) is not None:
        notes.append(f"hotspots not recorded: {why}")
        hotspots = False
    if wait_source is not None and not args.no_waits:
        print(f"tdescope: {engine_poll_text(wait_source, args.engine_wait_hz)}", file=sys.stderr)
    obs = Observation(pid, record, hotspots=hotspots, waits=not args.no_waits, wait_source=wait_source,
                      frequency=args.perf_hz, engine_hz=args.engine_wait_hz,
                      exact_waits="proc" if args.no_waits else args.os_waits)
    obs.start_blocking()
    if args.os_waits == "ebpf" and not args.no_waits and obs.exact_source != "ebpf":
        obs.stop()
        raise UserError(obs.exact_problem.split("; OS waits from")[0])
    if obs.exact_problem:
        notes.append(obs.exact_problem)
    return [obs.stop]


def _start_remote_samplers(agent, pid: int, args, record, notes: list[str], wait_source=None):
    """perf hotspots, /proc OS waits and exact (eBPF) ones in the agent on the ``--ssh`` host, the engine's waits
    (``--dsn``) through the forwarded connection here; returns their stop functions."""
    from tdescope.commands._ssh import poll_engine_waits

    stops = []
    client = agent.client

    def problem(message: str) -> None:
        if message not in notes:
            notes.append(message)

    if wait_source is not None and not args.no_waits:
        from tdescope.app.observe.sampling import engine_poll_text

        print(f"tdescope: {engine_poll_text(wait_source, args.engine_wait_hz)}", file=sys.stderr)
        stops.append(poll_engine_waits(wait_source, args.engine_wait_hz, record, problem))

    if not args.no_hotspots:
        client.start_hotspots(pid, args.perf_hz, 1.0, on_window=record, on_error=problem)
        stops.append(client.stop_hotspots)
    if not args.no_waits:
        from tdescope.commands._ssh import start_exact_waits

        client.start_waits(pid, on_sample=record, on_error=problem)
        stops.append(client.stop_waits)  # the /proc sampler and the eBPF tracer, if it runs
        start_exact_waits(agent, pid, args.os_waits, record, problem)

    def stop_all() -> None:
        for s in stops:
            try:
                s()
            except UserError as exc:  # the connection is gone: the recording says so otherwise
                problem(str(exc))

    return [stop_all]


def _exit_watch(pid: int, captured: list[int]):
    """A function saying ``pid N exited while armed (K pages captured)`` once ``pid`` is gone (or a zombie, or
    its number reused by another process), else None: a recording notices its target's end (a restart)."""
    from tdescope.app.system.procstat import stat_fields

    first = stat_fields(pid)
    started = first[19] if first else None  # starttime (field 22 of /proc/PID/stat)

    def exited() -> str | None:
        now = stat_fields(pid)
        if now is None or now[0] in ("Z", "X") or now[19] != started:
            return f"pid {pid} exited while armed ({captured[0]} pages captured)"
        return None

    return exited


def _exit_watch_on(agent, pid: int, captured: list[int]):
    """:func:`_exit_watch` for a pid on the ``--ssh`` host: its row in the host's process table gone or
    another process's (another parent), asked of the agent at most twice a second. Not the title: a
    PostgreSQL backend retitles itself with every statement."""
    from tdescope.app.remote.over_ssh import HostProcesses

    table = HostProcesses(agent)
    def who() -> list[tuple[int, int]]:
        return [(r.pid, r.ppid) for r in table.rows([pid])]

    first = who()
    state: dict = {"asked": 0.0, "said": None}

    def exited() -> str | None:
        if state["said"] is None and time.monotonic() - state["asked"] >= 0.5:
            state["asked"] = time.monotonic()
            try:
                now = who()
            except UserError:
                return None  # the connection ended: that is said as such
            if now != first:
                state["said"] = f"pid {pid} exited while armed ({captured[0]} pages captured)"
        return state["said"]

    return exited


def _inventory(session, engine, sample_columns: bool) -> tuple:
    """The session's inventory rows (catalogs only), with user tables sampled when ``--sample-columns`` asks."""
    from tdescope.app.engines.capabilities import Ability, has_ability

    if session is None:
        if sample_columns:
            raise UserError("--sample-columns needs --dsn (a database session)")
        return ()
    if not sample_columns:
        return session.inventory().rows
    if not has_ability(session, Ability.SAMPLE_COLUMNS):
        raise UserError(f"the {engine.name} engine has no columns to sample (--sample-columns)")
    print(f"tdescope: {session.sampling_reads()}", file=sys.stderr, flush=True)
    return session.sample_columns().rows


def run(args) -> int:
    from tdescope.app.probe.keep_rate import KEEP_PER_S
    from tdescope.app.probe.window import CaptureLimits, stop_budget
    from tdescope.app.events import PageCapture, Problem
    from tdescope.app.experiment import CaptureSpec, Experiment, WorkloadRun
    from tdescope.app.session.file import SessionRecorder
    from tdescope.app.session.live import LiveSession
    from tdescope.app.session.meta import PLAINTEXT_WITHHELD, SessionMeta, keeps_plaintext
    from tdescope.app.system.private_files import shared_folder_note

    if args.captures < 0:
        raise UserError("--captures must be 0 or more")
    if not args.output.endswith(".tds"):
        raise UserError(f"name the session file .tds, not {args.output}")
    if os.path.exists(args.output):
        raise UserError(f"{args.output} already exists; choose another name")
    passphrase = None
    if args.encrypt:
        from tdescope.commands._passphrase import ask_passphrase

        passphrase = ask_passphrase("Passphrase for the session file", confirm=True)
    ssh_host(args)  # a bad --ssh DEST, or ssh options without it: one line before anything starts
    engine = engine_named(args.lab or args.engine)
    recipe = recipe_named(engine, args.recipe) if args.captures else None
    backend = None
    if recipe is not None and not args.ssh:  # over ssh: from what the agent on the host has, once connected
        backend, fell_back = probe_backend(args, recipe)
        if fell_back:
            print(fell_back, file=sys.stderr, flush=True)
    stop = threading.Event()
    # SIGTERM ends the recording cleanly, like Ctrl+C
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    target = None
    recorder = None
    stops: list = []
    notes: list[str] = []
    captured = [0]
    failure: str | None = None  # the first probe window or workload that failed: the recording fails
    live = LiveSession()

    def count(event) -> None:
        if isinstance(event, PageCapture):
            captured[0] += 1
        elif isinstance(event, Problem) and event.source == "engine waits" and event.message not in notes:
            notes.append(event.message)  # e.g. performance_schema off, with the fix: said at the end, never silent

    live.subscribe(count)
    interrupted = False
    exp = None
    agent = remote = None
    try:
        if args.ssh:
            from tdescope.commands._ssh import connect

            from tdescope.commands._ssh import remote_backend

            agent = connect(args)  # a --pid is the host's; the agent checks it (deny-list, the function mapped)
            remote, fell_back = remote_backend(args, recipe, agent.host.dest, agent.welcome)  # eBPF or gdb there
            if fell_back:
                print(fell_back, file=sys.stderr, flush=True)
        target = resolve_target(args, engine, probing=recipe is not None,
                                stops_target=backend.stops_target if backend is not None else True, remote=agent)
        session, pid, workload = target.session, target.pid, target.workload
        if recipe is not None and session is None and agent is None:
            # as capture does, before any file exists: a process without the probed function is one line
            from tdescope.app.probe.targets import refuse_unused_target

            refuse_unused_target(pid, recipe, engine.name)
        inventory = _inventory(session, engine, args.sample_columns)
        params = {"seconds": args.seconds, "captures": args.captures, "target_pid": pid,
                  "workload": workload.name if workload else None, **(dict(workload.params) if workload else {})}
        if agent is not None:
            params["host"] = agent.label  # the machine facts in the file are this one's, the target is there
        meta = SessionMeta.collect(engine.name, engine.label, inventory=inventory, params=params,
                                   decoder=_decoder_catalog(session))
        recorder = SessionRecorder(args.output, meta, passphrase=passphrase,
                                   keep_plaintext=keeps_plaintext(session) or args.keep_plaintext)
        live.attach(recorder)
        if agent is None:
            stops = _start_samplers(pid, args, live.publish,
                                    session.wait_source() if session is not None and not args.no_waits else None,
                                    notes)
        else:
            stops = _start_remote_samplers(agent, pid, args, live.publish, notes,
                                           session.wait_source() if session is not None else None)
        deadline = time.monotonic() + args.seconds
        limits = CaptureLimits(max_captures=args.captures or 1, max_seconds=args.seconds, max_kept_per_s=KEEP_PER_S,
                               stops=stop_budget(target.own_target, args.stop_budget, args.accept_stop))
        exited = _exit_watch(pid, captured) if agent is None else _exit_watch_on(agent, pid, captured)
        run_no = 0
        while not stop.is_set() and time.monotonic() < deadline:
            run_no += 1
            want = recipe if captured[0] < args.captures and run_no == 1 else None
            label = live.run_started(workload.name if workload else None)
            capture = CaptureSpec(recipe=want, limits=limits, backend=backend, allow_critical=args.allow_critical,
                                  windows=_agent_windows(agent, args, remote)) if want is not None else None
            exp = Experiment(session, engine.name, live.publish, pid=pid, capture=capture,
                             run=WorkloadRun(workload=workload, params=workload.params) if workload else None)
            exp.start()
            while not exp.wait(0.1):
                if recorder.error:
                    stop.set()  # the disk is full: disarm now, what was committed stays
                if stop.is_set() or time.monotonic() >= deadline or exited() is not None:
                    exp.cancel()
                    exp.wait(15)
                    break
            live.run_ended(label)
            if agent is not None:
                exp.error = lost_line(agent, exp.error)
            failure = failure or exited() or exp.error  # the target's exit explains a workload's broken connection
            if failure:
                break
            if workload is None:
                # watching only: the probe window ended, keep the samplers running to the deadline
                while not stop.is_set() and time.monotonic() < deadline and not recorder.error:
                    if agent is not None and not agent.host.alive():
                        failure = f"connection to {agent.host.dest} lost (the ssh connection ended)"
                        break
                    if (failure := exited()) is not None:
                        break  # a server restart, pg_terminate_backend: the promised line, exit 2
                    stop.wait(0.1)
                if failure:
                    break
    except KeyboardInterrupt:
        interrupted = True  # Ctrl+C: disarm, keep what was recorded, end as every command does (130)
        if exp is not None:
            exp.cancel()
            exp.wait(15)
    finally:
        for s in stops:
            s()
        if recorder is not None:
            live.detach()
            if session is not None and (catalog := _decoder_catalog(session)) != recorder.meta.decoder:
                recorder.update_meta(dataclasses.replace(recorder.meta, decoder=catalog))  # tables made since
            recorder.close()
        if target is not None:
            target.close()
        if agent is not None:
            agent.close()
    if recorder is None:
        if interrupted:
            raise KeyboardInterrupt("interrupted before recording began (no file written)")
        return 1
    if interrupted:
        raise KeyboardInterrupt(f"interrupted: {recorder.written} events ({captured[0]} captures) recorded to "
                                f"{args.output}")
    if recorder.error:
        raise UserError(recorder.error)
    if failure:
        raise UserError(f"{failure}; {recorder.written} events recorded to {args.output}")
    if captured[0] and recorder.meta.plaintext_withheld:
        notes.append(PLAINTEXT_WITHHELD)
    if (shared := shared_folder_note(os.path.dirname(os.path.abspath(args.output)))) is not None:
        notes.append(shared)  # the file itself is 0600; notes come with success only (an error is one line)
    for n in notes:
        print(f"tdescope: {n}", file=sys.stderr)
    print(f"recorded {recorder.written} events ({captured[0]} captures) to {args.output}", file=sys.stderr)
    return 0


def _agent_windows(agent, args, remote):
    """The agent's capture windows over ``--ssh``, with the ``remote`` backend (None: this machine's)."""
    from tdescope.commands._ssh import agent_windows, ebpf_options

    return agent_windows(agent, ebpf_options(args), remote) if agent is not None else None


def _decoder_catalog(session) -> dict:
    """The catalog of the session's decoder (the one the window would use), for the file's metadata."""
    from tdescope.app.engines.capabilities import Ability, has_ability
    from tdescope.app.session.meta import decoder_catalog

    if not has_ability(session, Ability.CATALOG_DECODER):
        return {}
    try:
        return decoder_catalog(session.catalog_decoder())
    except Exception:  # noqa: BLE001 - the server went away: the report decodes without the catalog
        return {}
