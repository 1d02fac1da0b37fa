"""``--ssh DEST`` and its ssh options, shared by the commands that can work on another host.

The user's own OpenSSH carries everything (:class:`~tdescope.app.remote.ssh.SshHost`): an alias from
``~/.ssh/config``, jump hosts, ssh-agent keys. ``--ssh-option KEY=VALUE`` passes ``-o KEY=VALUE`` to
ssh, ``--ssh-config FILE`` passes ``-F FILE``; ``--ssh-prompt`` lets ssh ask for a password or a
passphrase on the terminal (by default ``BatchMode=yes``: it never waits on a prompt).
"""

from __future__ import annotations

import re

from tdescope.app.errors import UserError

__all__ = ["add_ssh_arguments", "ssh_host"]

_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9]*[= ].*")


def add_ssh_arguments(parser) -> None:
    """``--ssh DEST``, ``--ssh-option KEY=VALUE`` (repeatable), ``--ssh-config FILE``, ``--ssh-prompt``."""
    group = parser.add_argument_group("remote host (ssh)")
    group.add_argument("--ssh", metavar="DEST",
                       help="work on this host over ssh: [user@]host or an alias from your ssh config; the agent is "
                            "copied there once and runs with the host's python3 (sudo -n unless you log in as root)")
    group.add_argument("--ssh-option", action="append", default=[], metavar="KEY=VALUE",
                       help="passed to ssh as -o KEY=VALUE (repeatable), e.g. ProxyJump=bastion or Compression=yes")
    group.add_argument("--ssh-config", metavar="FILE", help="passed to ssh as -F FILE")
    group.add_argument("--ssh-prompt", action="store_true",
                       help="let ssh ask for a password or passphrase on this terminal (default: BatchMode=yes)")


def ssh_options(args) -> tuple[str, ...]:
    """The ssh words ``args`` ask for (``-F FILE``, ``-o KEY=VALUE`` …)."""
    words: list[str] = []
    if getattr(args, "ssh_config", None):
        words += ["-F", args.ssh_config]
    for opt in getattr(args, "ssh_option", None) or ():
        if not _OPTION.fullmatch(opt):
            raise UserError(f"--ssh-option: not an ssh option: {opt!r} (give KEY=VALUE, e.g. Port=2222)")
        words += ["-o", opt]
    return tuple(words)


def ssh_host(args):
    """The :class:`~tdescope.app.remote.ssh.SshHost` for ``--ssh`` (not yet connected), or None without it."""
    if not getattr(args, "ssh", None):
        if getattr(args, "ssh_option", None) or getattr(args, "ssh_config", None):
            raise UserError("--ssh-option and --ssh-config need --ssh DEST")
        return None
    from tdescope.app.remote.ssh import SshHost

    return SshHost(args.ssh, ssh_options(args), allow_prompts=bool(getattr(args, "ssh_prompt", False)))


#: Said for ``--lab`` with ``--ssh``: a lab's worker needs Python packages (sqlcipher3, a MariaDB build) that a
#: database host does not have, and would be started by tdescope there; the agent only probes.
LAB_NOT_CARRIED = ("--ssh does not start a lab on the host (the agent only probes; a lab needs tdescope installed "
                   "there): start the lab on the host with `tdescope capture --lab ...` there, or probe a process "
                   "there with --ssh DEST --pid PID or a server with --ssh DEST --dsn DSN")


def refuse_not_carried(args) -> None:
    """One line for what ``--ssh`` does not carry: a lab on the host."""
    if getattr(args, "lab", None):
        raise UserError(LAB_NOT_CARRIED)


def remote_backend(args, recipe, dest: str, welcome: dict) -> tuple[tuple[str, dict], str | None]:
    """The probe backend the agent on ``dest`` runs for ``--backend`` (its name and options, as ``ARM`` takes
    them), and a line when ``auto`` chose gdb. ``auto`` is eBPF where the host has libbpf and eBPF can read
    the recipe, else gdb (read-only, the agent's watchdog); what the host lacks is one line."""
    from tdescope.app.probe.ebpf.program import unsupported

    tools = welcome.get("tools") or {}
    choice = getattr(args, "backend", "auto") or "auto"
    why = unsupported(recipe) if recipe is not None else None
    note = None
    if choice == "auto":
        choice = "ebpf" if tools.get("libbpf") and not why else "gdb"
        if choice == "gdb":
            note = f"probing with gdb on {dest}: {why or 'it has no libbpf'}"
    if choice == "ebpf":
        if not tools.get("libbpf"):
            raise UserError(f"{dest} has no libbpf: install libbpf1 there, or probe with --backend gdb")
        if why:
            raise UserError(f"eBPF: {why}")
        return ("ebpf", ebpf_options(args)), None
    if not tools.get("gdb"):
        raise UserError(f"{dest} has no gdb: install gdb there, or probe with --backend ebpf")
    return ("gdb", {}), note


def gui_host(args) -> tuple[str, tuple[str, ...], int | None, bool] | None:
    """``gui --ssh DEST [--pid PID] [--dsn DSN]``: ``(dest, ssh words, pid, prompts allowed)`` for the window,
    or None. Without ``--dsn`` the window's engine (``--lab``/``--engine`` name it) only gives the recipes and
    the decoder there; with it, the engine's session connects through the ssh connection (``--pid``: one of
    its backends on the host)."""
    host = ssh_host(args)
    if host is None:
        if getattr(args, "pid", None) is not None:
            raise UserError("gui --pid PID needs --ssh DEST (a process on that host); locally use Change target…")
        return None
    return host.dest, host.options, getattr(args, "pid", None), host.allow_prompts


def ebpf_options(args) -> dict:
    """The eBPF window's bounds (``--sample``, ``--max-mb-per-s``, ``--ring-mb``) as the agent takes them."""
    ebpf = {"sample_every": args.sample, "max_bytes_per_s": args.max_mb_per_s * 1e6}
    if args.ring_mb:
        ebpf["ring_mb"] = args.ring_mb
    return ebpf


def connect(args):
    """The agent on the ``--ssh`` host, connected and greeted (:func:`~tdescope.app.remote.over_ssh.connect_agent`)."""
    from tdescope.app.remote.over_ssh import connect_agent

    refuse_not_carried(args)
    return connect_agent(ssh_host(args))


def agent_windows(agent, ebpf: dict, backend: tuple[str, dict] | None = None):
    """What :class:`~tdescope.app.experiment.Experiment` takes as ``windows``: its capture windows run by the
    agent on the ``--ssh`` host (``backend`` from :func:`remote_backend`; default eBPF with ``ebpf``'s bounds),
    I/O-worker followers included."""
    chosen = backend

    def window(pid, recipe, limits, engine, on_capture, on_state=None, allow_critical=False, backend=None,
               followers=()):
        return agent.client.window(pid, recipe, limits, engine, on_capture, on_state, allow_critical=allow_critical,
                                   ebpf=ebpf, followers=followers, backend=chosen)

    return window


def lost_line(agent, error: str | None) -> str | None:
    """``error`` as the user reads it: once the ssh connection is gone, that is the news (the frame or the
    statement it broke off in is not)."""
    if error and not agent.host.alive():
        return f"connection to {agent.host.dest} lost (the ssh connection ended)"
    return error


def start_exact_waits(agent, pid: int, exact_waits: str, sink, error) -> str:
    """Start the eBPF wait tracer in the agent for ``--os-waits`` (``auto``, ``ebpf``, ``proc``): its totals
    reach ``sink`` as :class:`~tdescope.app.events.WaitFigures` and its long calls as ``WaitSpans``, as the
    local tracer's do. Returns where the exact OS figures come from (``ebpf`` or ``proc``); a tracer that cannot
    load there is one line with ``ebpf``, a note (``error``) with ``auto``."""
    import time

    from tdescope.app.waits.exact import FiguresSince, spans_event

    if exact_waits == "proc":
        return "proc"
    try:
        agent.client.start_exact_waits(pid, 1.0, on_totals=FiguresSince(pid, sink),
                                       on_spans=lambda spans: sink(spans_event(pid, spans, time.time())),
                                       on_error=error)
    except UserError as exc:
        if exact_waits == "ebpf":
            raise UserError(f"exact waits on {agent.host.dest}: {exc}") from None
        error(f"exact waits on {agent.host.dest}: {exc}; OS waits from /proc samples only")
        return "proc"
    return "ebpf"


def poll_engine_waits(source, hz: float, sink, problem):
    """Sample the engine's own waits (pg_stat_activity...) through the forwarded connection at ``hz`` on a
    thread, as the local Observation does; a failure is one ``problem`` line. Returns the stop function."""
    import threading
    import time

    stop = threading.Event()

    def loop() -> None:
        next_tick = time.monotonic()
        while not stop.is_set():
            try:
                for ev in source.sample():
                    sink(ev)
            except Exception as exc:  # noqa: BLE001 - a broken connection: one line, the recording goes on
                problem(f"engine waits stopped: {(str(exc).strip().splitlines() or [type(exc).__name__])[0]}")
                return
            next_tick = max(next_tick + 1.0 / hz, time.monotonic())
            stop.wait(next_tick - time.monotonic())

    thread = threading.Thread(target=loop, name="engine-waits", daemon=True)
    thread.start()

    def stop_it() -> None:
        stop.set()
        thread.join(5)

    return stop_it


def observe_over_ssh(args, agent, target, hotspots: bool, waits: bool, exact_waits: str, await_window,
                     repeat_workload) -> tuple:
    """``top`` / ``waits`` on the ``--ssh`` host's ``target`` (a ``--pid`` there, or the backend of a ``--dsn``
    reached through the ssh connection): perf and the /proc wait sampler run in the agent there, the
    engine's waits and the workload (``--sql``), if any, through the forwarded connection here. Returns
    the fields of :class:`~tdescope.commands._observe.Observed`, as a local run (no CPU figure: the host's
    /proc is not this machine's). ``await_window(events, lock, epoch, grace_s)`` waits for the hotspot
    window covering the end; ``repeat_workload(workload, params, control)`` runs the workload until cancelled."""
    import threading
    import time

    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.events import Problem

    events: list = []
    lock = threading.Lock()
    problems: list[str] = []
    window_s = min(1.0, max(0.25, args.seconds / 4))

    def sink(ev) -> None:
        with lock:
            events.append(ev)

    def error(message: str) -> None:
        with lock:
            problems.append(message)
            events.append(Problem(time.time(), "ssh", message))

    pid = target.pid
    started = time.monotonic()
    interrupted = False
    stops: list = []
    control = WorkloadControl()
    runner = None
    os_source = "proc"
    try:
        if waits and target.session is not None and (source := target.session.wait_source()) is not None:
            stops.append(poll_engine_waits(source, getattr(args, "engine_wait_hz", 10.0), sink, error))
        if target.workload is not None:
            runner = threading.Thread(target=repeat_workload, args=(target.workload, target.params, control),
                                      daemon=True)
            runner.start()
        if hotspots:
            agent.client.start_hotspots(pid, getattr(args, "perf_hz", 99), window_s, on_window=sink,
                                        on_error=error)
        if waits:
            agent.client.start_waits(pid, on_sample=sink, on_error=error)
            os_source = start_exact_waits(agent, pid, exact_waits, sink, error)
        deadline = started + args.seconds
        try:
            while time.monotonic() < deadline and agent.host.alive():
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            interrupted = True
        if not agent.host.alive():
            raise UserError(f"connection to {agent.host.dest} lost (the ssh connection ended)")
        if hotspots and not interrupted:
            await_window(events, lock, time.time(), window_s + 30.0)  # at once, unless perf script lags
        for stop in ((agent.client.stop_hotspots,) if hotspots else ()) + ((agent.client.stop_waits,) if waits else ()):
            try:
                stop()
            except UserError as exc:
                error(str(exc))
    finally:
        for stop in stops:
            stop()
        control.cancel()
        if runner is not None:
            runner.join(30)
    seconds_seen = round(time.monotonic() - started, 1) if interrupted else args.seconds
    return events, problems, target.engine, pid, seconds_seen, None, interrupted, os_source
