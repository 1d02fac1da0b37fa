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


def refuse_not_carried(args) -> None:
    """One line for what ``--ssh`` does not carry yet: a lab or ``--dsn`` on the host, gdb."""
    if getattr(args, "lab", None) or getattr(args, "dsn", None):
        raise UserError("--ssh works with --pid PID (a process on the host) for now; --lab and --dsn are not "
                        "carried over ssh yet")
    if getattr(args, "backend", "auto") == "gdb":
        raise UserError("over --ssh the agent probes with eBPF only; leave out --backend gdb")


def gui_host(args) -> tuple[str, tuple[str, ...], int | None, bool] | None:
    """``gui --ssh DEST [--pid PID]``: ``(dest, ssh words, pid, prompts allowed)`` for the window, or None.
    The window's engine (``--lab``/``--engine`` name it) only gives the recipes and the decoder there."""
    host = ssh_host(args)
    if host is None:
        if getattr(args, "pid", None) is not None:
            raise UserError("gui --pid PID needs --ssh DEST (a process on that host); locally use Change target…")
        return None
    if getattr(args, "dsn", None):
        raise UserError("gui --ssh watches a process on the host (--pid PID, or the one running the engine's "
                        "code); --dsn is not carried over ssh yet")
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


class RemoteCapture:
    """A capture window run by the agent on the ``--ssh`` host, with the Experiment's face the commands use:
    ``start``/``wait``/``cancel``, then ``error`` and ``capture_summary``. Events go to ``sink`` (on the
    window's thread), states too."""

    def __init__(self, agent, pid: int, recipe, limits, engine: str, sink, allow_critical: bool = False,
                 ebpf: dict | None = None) -> None:
        import threading

        self.agent = agent
        self.label = agent.label
        self.error: str | None = None
        self.capture_summary = None
        self._done = threading.Event()
        self._window = agent.client.window(pid, recipe, limits, engine, sink, sink, allow_critical=allow_critical,
                                           ebpf=ebpf or {})
        self._thread = threading.Thread(target=self._run, name="ssh-capture", daemon=True)

    def _run(self) -> None:
        try:
            summary = self._window.run()
            self.capture_summary = summary
            self.error = summary.error
            if self.error and not self.agent.host.alive():  # the frame it broke off in is no news
                self.error = f"connection to {self.agent.host.dest} lost (the ssh connection ended)"
        finally:
            self._done.set()

    def start(self) -> RemoteCapture:
        self._thread.start()
        return self

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def cancel(self, reason: str = "cancelled") -> None:
        self._window.cancel(reason)


def observe_over_ssh(args, hotspots: bool, waits: bool, exact_waits: str, await_window) -> tuple:
    """``top`` / ``waits`` on a ``--pid`` of the ``--ssh`` host: perf and the /proc wait sampler run in the
    agent there. Returns the fields of :class:`~tdescope.commands._observe.Observed`, as a local run (no CPU
    figure: the host's /proc is not this machine's). ``await_window(events, lock, epoch, grace_s)`` waits
    for the hotspot window covering the end."""
    import threading
    import time

    from tdescope.app.events import Problem

    if exact_waits == "ebpf" and waits:
        raise UserError("over --ssh the agent samples OS waits from /proc only; leave out --os-waits ebpf")
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

    agent = connect(args)
    started = time.monotonic()
    interrupted = False
    try:
        if hotspots:
            agent.client.start_hotspots(args.pid, getattr(args, "perf_hz", 99), window_s, on_window=sink,
                                        on_error=error)
        if waits:
            agent.client.start_waits(args.pid, on_sample=sink, on_error=error)
        deadline = started + args.seconds
        try:
            while time.monotonic() < deadline and agent.host.alive():
                time.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
        except KeyboardInterrupt:
            interrupted = True
        if not agent.host.alive():
            raise UserError(f"connection to {agent.host.dest} lost (the ssh connection ended)")
        if hotspots and not interrupted:
            await_window(events, lock, time.time(), window_s + 3.0)
        for stop in ((agent.client.stop_hotspots,) if hotspots else ()) + ((agent.client.stop_waits,) if waits else ()):
            try:
                stop()
            except UserError as exc:
                error(str(exc))
    finally:
        agent.close()
    seconds_seen = round(time.monotonic() - started, 1) if interrupted else args.seconds
    return events, problems, None, args.pid, seconds_seen, None, interrupted, "proc"
