"""What ``tdescope top`` and ``tdescope waits`` share: pick the target, observe it for a while.

With ``--lab`` the engine's lab starts and its first workload runs again and
again until the seconds are up (then it is cancelled), so there is something
to observe; with ``--pid`` the process is observed as it is.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass

from tdescope.app.errors import UserError
from tdescope.app.hotspots.perf_record import DEFAULT_HZ
from tdescope.app.system.procstat import cpu_seconds
from tdescope.commands._args import engine_named, positive_int, seconds
from tdescope.commands._dsn import add_dsn_arguments
from tdescope.commands._ssh import add_ssh_arguments, observe_over_ssh, ssh_host
from tdescope.commands._target import resolve_target

__all__ = ["Observed", "add_target_arguments", "interrupted_line", "observe"]


@dataclass(frozen=True, slots=True)
class Observed:
    """What :func:`observe` saw.

    Attributes
    ----------
    events : list of Event
        Every event the samplers sent.
    problems : list of str
        The messages of the Problem events among them.
    engine : Engine or None
        The engine of ``--lab`` or ``--dsn``.
    pid : int
        The process observed.
    seconds : float
        How long it was observed.
    cpu_s : float or None
        CPU time the process used meanwhile (all threads, from /proc); None when it is gone.
    interrupted : bool
        Ctrl+C ended the observation early: ``seconds`` is how long it ran, and the command shows what
        it saw, then ends as every command ends on Ctrl+C (130).
    """

    events: list
    problems: list
    engine: object
    pid: int
    seconds: float
    cpu_s: float | None = None
    interrupted: bool = False
    os_source: str = "proc"


def add_target_arguments(parser) -> None:
    """--pid / --lab ENGINE, --seconds, --limit, --json."""
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--pid", type=positive_int, help="observe this process")
    where.add_argument("--lab", metavar="ENGINE", help="start ENGINE's lab and observe it running its workload")
    # server engines (postgres): connect, and observe the backend serving tdescope's connection
    where.add_argument("--dsn", help="connect to this server (--engine, default postgres) and observe its backend")
    add_dsn_arguments(parser)
    add_ssh_arguments(parser)
    parser.add_argument("--seconds", type=seconds, default=5.0, help="how long to observe (default 5)")
    parser.add_argument("--limit", type=positive_int, default=20, help="rows to print (default 20)")
    parser.add_argument("--json", action="store_true", help="one JSON object per row")


def _repeat_workload(workload, params, control) -> None:
    while not control.cancelled:
        try:
            result = workload.run(params, control)
        except UserError:
            return
        if result.cancelled:
            return


#: How long the last hotspot window may lag behind the end of a run. The wait ends when the window comes
#: (~1.7 s for an idle target here); with 3 s, a perf script starved on a loaded machine made ``top`` say
#: "perf recorded no samples" about samples it had not printed yet (tests/test_cli_observe.py makes the lag).
PERF_LAG_S = 30.0


def _await_window_after(events: list, lock, epoch: float, grace_s: float) -> None:
    """Wait for the hotspot window that covers ``epoch`` (perf script lags a window behind)."""
    from tdescope.app.events import HotspotWindow, Problem

    end = time.monotonic() + grace_s
    while time.monotonic() < end:
        with lock:
            if any(isinstance(e, HotspotWindow) and e.ts >= epoch - 0.05 for e in events):
                return
            if any(isinstance(e, Problem) for e in events):
                return
        time.sleep(0.05)


def _await_client(target, deadline_s: float) -> int:
    """Wait for the workload's busy client backend, make it the session's target, say so; its pid."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        pid = target.workload.clients(target.session.targets())
        if pid is not None:
            target.session.choose_target(pid)
            print(f"watching {target.workload.name}'s client backend pid {pid} (the work runs on its own "
                  "connections, not tdescope's)", file=sys.stderr)
            return pid
        time.sleep(0.2)
    raise UserError(f"no {target.workload.name} client backend became busy within {deadline_s:g} s")


def observe(args, hotspots: bool, waits: bool, exact_waits: str = "proc") -> Observed:
    """Observe the target of ``args`` for ``args.seconds``.

    ``exact_waits`` (``auto``, ``ebpf``, ``proc``) says whether the eBPF wait tracer runs too; with
    ``ebpf`` a tracer that cannot load ends the command in one line.
    """
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.events import Problem
    from tdescope.app.observe.sampling import ENGINE_WAIT_HZ, Observation, engine_poll_text
    if ssh_host(args) is not None:  # a bad DEST, or ssh options without --ssh: one line first
        return _observe_over_ssh(args, hotspots, waits, exact_waits)
    events: list = []
    lock = threading.Lock()
    window_s = min(1.0, max(0.25, args.seconds / 4))

    def sink(ev) -> None:
        with lock:
            events.append(ev)

    engine = engine_named(args.lab) if args.lab else engine_named(args.engine or "postgres") if args.dsn else None
    target = resolve_target(args, engine)
    runner = None
    control = WorkloadControl()
    try:
        if target.workload is not None and target.workload.clients is not None and target.session is not None:
            # the work happens on the workload's own client connections (pgbench): watch one of them
            runner = threading.Thread(target=_repeat_workload, args=(target.workload, target.params, control),
                                      daemon=True)
            runner.start()
            target.pid = _await_client(target, deadline_s=60.0)
        source = target.session.wait_source() if waits and target.session is not None else None
        # Short runs get shorter windows (above), so a 2 s run still yields several.
        engine_hz = getattr(args, "engine_wait_hz", ENGINE_WAIT_HZ)
        if source is not None:
            print(f"tdescope: {engine_poll_text(source, engine_hz)}", file=sys.stderr)
        obs = Observation(target.pid, sink, hotspots=hotspots, waits=waits, wait_source=source, window_s=window_s,
                          frequency=getattr(args, "perf_hz", DEFAULT_HZ), engine_hz=engine_hz,
                          exact_waits=exact_waits if waits else "proc")
        obs.start_blocking()
        os_source = obs.exact_source
        if exact_waits == "ebpf" and waits and os_source != "ebpf":
            obs.stop()
            raise UserError(obs.exact_problem.split("; OS waits from")[0])
        if hotspots and not obs.hotspots_on:
            problem = next((e.message for e in events if isinstance(e, Problem)), "perf did not start")
            obs.stop()
            raise UserError(problem)
        if target.workload is not None and runner is None:
            runner = threading.Thread(target=_repeat_workload, args=(target.workload, target.params, control),
                                      daemon=True)
            runner.start()
        cpu0 = cpu_seconds(target.pid)
        started = time.monotonic()
        interrupted = False
        try:
            deadline = started + args.seconds
            try:
                while time.monotonic() < deadline:
                    time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
            except KeyboardInterrupt:
                interrupted = True  # Ctrl+C: keep what the finished windows saw
            cpu1 = cpu_seconds(target.pid)
            if hotspots and not interrupted:  # at once, unless perf script lags (on a loaded machine, seconds)
                _await_window_after(events, lock, time.time(), grace_s=window_s + PERF_LAG_S)
        finally:
            obs.stop()
            control.cancel()
            if runner is not None:
                runner.join(30)
    finally:
        target.close()
    problems = [e.message for e in events if isinstance(e, Problem)]
    used = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    seconds_seen = round(time.monotonic() - started, 1) if interrupted else args.seconds
    return Observed(events, problems, engine, target.pid, seconds_seen, used, interrupted, os_source)


def _observe_over_ssh(args, hotspots: bool, waits: bool, exact_waits: str) -> Observed:
    """:func:`observe` on the ``--ssh`` host: the agent samples there, a ``--dsn`` goes through the connection."""
    from tdescope.commands._ssh import connect

    import dataclasses

    from tdescope.app.engines.api import WorkloadControl

    engine = engine_named(args.engine or "postgres") if args.dsn else None
    agent = connect(args)
    control, runner = WorkloadControl(), None
    try:
        target = resolve_target(args, engine, remote=agent)
        try:
            if target.workload is not None and target.workload.clients is not None and target.session is not None:
                # pgbench's clients do the work: watch one of them, checked on the host like any target
                runner = threading.Thread(target=_repeat_workload, args=(target.workload, target.params, control),
                                          daemon=True)
                runner.start()
                target = dataclasses.replace(target, pid=_await_client(target, deadline_s=60.0), workload=None)
            return Observed(*observe_over_ssh(args, agent, target, hotspots, waits, exact_waits,
                                              _await_window_after, _repeat_workload))
        finally:
            control.cancel()
            if runner is not None:
                runner.join(30)
            target.close()
    finally:
        agent.close()


def interrupted_line(seen: Observed, what: str) -> KeyboardInterrupt:
    """The Ctrl+C ending of ``top``/``waits``: one line saying what the rows above (if any) hold."""
    if not what:
        return KeyboardInterrupt(f"interrupted after {seen.seconds:g} s: nothing observed yet")
    return KeyboardInterrupt(f"interrupted after {seen.seconds:g} s: the rows above are {what}")
