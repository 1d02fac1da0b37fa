"""A process on an ssh host as the window's session: ``tdescope gui --ssh DEST``.

:class:`HostSession` has the :class:`~tdescope.app.engines.api.EngineSession` face the window
works with (``server_pid``, ``inventory``, ``workloads``, ``wait_source``, ``close``, and the
target choice), but its target is a process on the host and everything that touches it goes
through the agent there (:class:`~tdescope.app.remote.over_ssh.RemoteAgent`): the capture window
(:meth:`HostSession.window`), the process list, a function's bytes for disassembly, and the
samplers (:class:`~tdescope.app.remote.host_observation.HostObservation`). No engine connection
is carried (no workloads): the window watches what the host's own clients do; with a DSN the
engine's session comes too (:mod:`~tdescope.app.remote.host_engine`).

:func:`~tdescope.app.remote.host_engine.open_host_session` connects (each failure one line, from
SshHost or connect_agent) and settles the target: ``pid`` when given (it must run there), else the one
process that maps the engine's probed functions.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from tdescope.app.engines.api import Engine, Inventory, TargetChoice, Workload
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, WindowState
from tdescope.app.probe.window import CaptureSummary
from tdescope.app.remote.client import REPLY_S
from tdescope.app.remote.over_ssh import RemoteAgent

__all__ = ["HostSession", "host_label", "running_the_code", "ssh_option_words"]

#: How long the search for the processes that map the probed functions may take (the agent reads each
#: process's mapped ELF files once: 5-20 s on a busy host).
SEARCH_S = 90.0

_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9]*=.+")


def ssh_option_words(options: Sequence[str]) -> tuple[str, ...]:
    """``-o KEY=VALUE`` words for ssh from ``KEY=VALUE`` items; one line for an item that is not one."""
    words: list[str] = []
    for opt in options:
        if not _OPTION.fullmatch(opt):
            raise UserError(f"not an ssh option: {opt!r} (give KEY=VALUE, e.g. Port=2222)")
        words += ["-o", opt]
    return tuple(words)


def host_label(session: object) -> str:
    """``db1 via ssh`` for a session on an ssh host, "" for any other (or None)."""
    return session.label if isinstance(session, HostSession) else ""


def _symbols(engine: Engine) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for r in engine.probe_recipes() for s in r.symbols))


class HostSession:
    """The target ``pid`` on the host the ``agent`` runs on, probed with ``engine``'s recipes.

    Requests that wait for a reply (targets, a function's bytes) take one lock: the agent answers
    in order, and two threads must not take each other's replies."""

    own_target = False  # a process on someone's host, chosen by pid
    dsn = ""  #: the engine's server as the host sees it, when its session comes too (HostEngineSession)

    def __init__(self, agent: RemoteAgent, engine: Engine, pid: int, ssh_options: Sequence[str] = ()) -> None:
        self.agent = agent
        self.engine = engine
        self.pid = int(pid)
        self.ssh_options = tuple(ssh_options)
        self.requests = threading.Lock()  #: held around each request that waits for its reply
        #: Sampler starts and stops, one after the other in the order asked, off the caller's thread: an
        #: observation stopped for a new target is stopped on the host before the new one starts.
        self.serial = ThreadPoolExecutor(1, thread_name_prefix="host-samplers")

    @property
    def dest(self) -> str:
        """Where we connected: ``[user@]host`` or an ssh config alias."""
        return self.agent.host.dest

    @property
    def reopen_pid(self) -> int | None:
        """The pid Reconnect asks for: the target's (the same process again)."""
        return self.pid

    @property
    def label(self) -> str:
        """``db1 via ssh``: the title, the Engine dock, the status bar and the report say it."""
        return self.agent.label

    def alive(self) -> bool:
        """Whether the agent is still there (the ssh connection stands and its stream is open)."""
        return self.agent.host.alive() and self.agent.client.lost is None

    # -- EngineSession -------------------------------------------------------------------
    def server_pid(self) -> int:
        return self.pid

    def inventory(self) -> Inventory:
        welcome = self.agent.welcome
        tools = welcome.get("tools") or {}
        found = ", ".join(name for name, ok in sorted(tools.items()) if ok) or "none"
        comm = next((p["comm"] for p in self._processes() if p["pid"] == self.pid), "?")
        return Inventory(self.engine.name, (
            ("host", "connected to", self.label),
            ("host", "agent python", str(welcome.get("python", "?"))),
            ("host", "tools on the host", found),
            ("host", "agent runs as", "root" if welcome.get("euid") == 0 else f"uid {welcome.get('euid')}"),
            ("target", "probe target", f"pid {self.pid} ({comm})"),
        ))

    def workloads(self) -> list[Workload]:
        return []  # the host's own clients drive the target: watch mode

    def wait_source(self):
        return None  # no engine connection over ssh here (OS waits come from the agent)

    def close(self) -> None:
        """Say bye to the agent (it disarms and exits) and close the ssh connection. Safe twice."""
        self.serial.shutdown(wait=False, cancel_futures=True)
        self.agent.close()

    # -- the target ------------------------------------------------------------------------
    def _processes(self, symbols: Sequence[str] = ()) -> list[dict]:
        with self.requests:  # which processes map the symbols: the agent reads their ELF files (seconds)
            return self.agent.client.targets(symbols=tuple(symbols), timeout=SEARCH_S if symbols else REPLY_S)

    def targets(self) -> list[TargetChoice]:
        """The host's processes, the current target first (the deny-list's roles said)."""
        rows = self._processes()
        rows.sort(key=lambda p: (p["pid"] != self.pid, p["pid"]))
        return [TargetChoice(p["pid"], _kind(p), application=p["comm"], activity=p["cmdline"]) for p in rows]

    def choose_target(self, pid: int, allow_critical: bool = False) -> None:
        """Probe ``pid`` on the host from now on; one line for a process that is not there or on the deny-list."""
        found = next((p for p in self._processes() if p["pid"] == int(pid)), None)
        if found is None:
            raise UserError(f"no process {pid} on {self.dest}")
        if found.get("critical") and not allow_critical:
            raise UserError(f"pid {pid} on {self.dest} is {found['critical']}, on the deny-list of processes "
                            "never to probe (--allow-critical overrides)")
        self.pid = int(pid)

    def search(self) -> list[dict]:
        """The host's processes, each with ``maps``: whether it maps the engine's probed functions (slow:
        the agent reads every process's mapped ELF files once)."""
        return self._processes(_symbols(self.engine))

    # -- through the agent -------------------------------------------------------------------
    def window(self, pid, recipe, limits, engine, on_capture, on_state=None, allow_critical: bool = False,
               backend=None, followers=()):
        """A capture window the agent runs on the host (eBPF there; ``backend`` and ``followers``, this machine's,
        do not apply): what :class:`~tdescope.app.experiment.Experiment` takes as ``windows``. Same
        ``run``/``cancel``/``armed``; its failure once the connection is gone says "connection lost" (the
        window offers Reconnect)."""

        def state(ev: CaptureWindowState) -> None:
            if ev.state is WindowState.FAILED and ev.message and not self.alive():
                ev = dataclasses.replace(ev, message=self.lost_line(ev.message))
            if on_state is not None:
                on_state(ev)

        return _HostWindow(self, self.agent.client.window(pid, recipe, limits, engine, on_capture, state,
                                                          allow_critical=allow_critical))

    def lost_line(self, why: str) -> str:
        """The one line for a window or sampler the lost connection ended: ``db1: connection lost (why)``."""
        return why if why == self.agent.client.lost else f"{self.dest}: connection lost ({why})"

    def read_function(self, path: str, symbol: str) -> tuple[int, bytes]:
        """``symbol``'s file address and bytes in ``path`` on the host (for disassembly here)."""
        with self.requests:
            header, code = self.agent.client.read_function(path, symbol)
        return int(header["address"]), code


class _HostWindow:
    """The agent's capture window (:class:`~tdescope.app.remote.client.AgentWindow`), whose summary, once
    the connection is gone, says "connection lost" rather than how the stream broke off."""

    def __init__(self, session: HostSession, window) -> None:
        self._session = session
        self._window = window
        self.armed = window.armed

    @property
    def skipped(self) -> int:
        return self._window.skipped

    def cancel(self, reason: str = "cancelled", drain: bool = False) -> None:
        self._window.cancel(reason, drain)

    def run(self) -> CaptureSummary:
        summary = self._window.run()
        if summary.error and not self._session.alive():
            summary = dataclasses.replace(summary, error=self._session.lost_line(summary.error), lost=True)
        return summary


def _kind(process: dict) -> str:
    if process.get("critical"):
        return f"critical: {process['critical']}"
    return "maps the probed code" if process.get("maps") else "process"


def running_the_code(processes: list[dict], dest: str, engine_label: str) -> int:
    """The pid of the one process (off the deny-list) that maps the probed functions; one line otherwise."""
    mapping = [p for p in processes if p.get("maps") and not p.get("critical")]
    if len(mapping) == 1:
        return int(mapping[0]["pid"])
    if not mapping:
        raise UserError(f"no process on {dest} maps {engine_label}'s probed functions: give --pid PID")
    pids = ", ".join(str(p["pid"]) for p in mapping[:5]) + (", …" if len(mapping) > 5 else "")
    raise UserError(f"{len(mapping)} processes on {dest} map {engine_label}'s probed functions ({pids}): "
                    "give --pid PID")
