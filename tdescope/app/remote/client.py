"""The workbench's side of the agent: frames back into the app's events.

:class:`AgentClient` starts the agent with the argv its caller gives (locally
``python3 -I tdescope-agent.pyz``; over ssh ``ssh ... sudo -n python3 /path/agent.pyz``),
says hello, and turns what comes back into the existing events:
:class:`~tdescope.app.events.PageCapture`, :class:`~tdescope.app.events.CaptureWindowState`
and a :class:`~tdescope.app.probe.window.CaptureSummary`, so remote captures enter the
same ``LiveSession`` as local ones. :class:`AgentWindow` has the same ``run``/``cancel``/
``armed`` as :class:`~tdescope.app.probe.window.CaptureWindow` (:mod:`~tdescope.app.remote.agent_window`).
Nothing from the agent is unpickled: every frame is JSON plus bytes, read by
:mod:`~tdescope.app.remote.wire` field by field.
"""

from __future__ import annotations

import collections
import queue
import subprocess
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from tdescope.app.engines.api import ProbeRecipe
from tdescope.app.engines.registry import critical_rules, discover_engines
from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import CaptureWindowState, HotspotWindow, PageCapture, WaitSample
from tdescope.app.probe.backend import ProbeBackend
from tdescope.app.probe.gdb_backend import GdbBackend
from tdescope.app.probe.window import CaptureLimits
from tdescope.app.remote import wire
from tdescope.app.remote.agent_window import AgentWindow
from tdescope.app.system.child_env import PYTHON, child_env
from tdescope.app.system.process_table import ProcRow
from tdescope.app.remote.protocol import PROTOCOL_VERSION, Kind, ProtocolError, encode, read_frame, unpack_fields, widen_pipe

__all__ = ["AgentClient", "AgentWindow", "backend_request", "local_argv"]

#: How long a reply may take before the agent counts as lost.
REPLY_S = 15.0
#: How often the client tells the agent it is still there (``PING``); the agent leaves after
#: ``agent_main.SILENCE_S`` without a frame.
HEARTBEAT_S = 3.0
#: Frames that belong to the running window, not to a request's reply.
_WINDOW_KINDS = (Kind.CAPTURES, Kind.STATE, Kind.SUMMARY)


def local_argv(agent: str | Path) -> list[str]:
    """The argv of the agent on this machine: the system python3, isolated (no venv, no site packages)."""
    return ["/usr/bin/python3", "-I", str(agent)]


def backend_request(backend: ProbeBackend | None) -> tuple[str, dict]:
    """What an ``ARM`` request says of a probe backend object: its name and numeric options (never a path)."""
    backend = backend or GdbBackend()
    if isinstance(backend, GdbBackend):
        return "gdb", {"watchdog_s": float(backend.watchdog_s)}
    if backend.name == "ebpf":
        return "ebpf", {"ring_mb": backend.ring_size / (1 << 20), "sample_every": backend.sample_every,
                        "max_bytes_per_s": backend.max_bytes_per_s}
    raise UserError(f"the agent cannot run a {backend.name} probe")


def _engines_rules() -> tuple:
    engines, _ = discover_engines()
    return critical_rules(engines.values())


class AgentClient:
    """One running agent, spoken to over its stdin and stdout.

    Parameters
    ----------
    argv : sequence of str
        How to start it; the caller's choice (a local pipe or an ssh command line).
    env : mapping, optional
        The started process's environment (over ssh: ``child_env(SSH)``); default: the allowlisted one for
        a Python child (``child_env(PYTHON)``), never the caller's own (which may hold passwords).
    """

    def __init__(self, argv: Sequence[str], env: dict | None = None) -> None:
        self.argv = list(argv)
        self._proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, start_new_session=True,
                                      env=env if env is not None else child_env(PYTHON))
        widen_pipe(self._proc.stdout.fileno())  # the captures' way in: whole batches per wake-up
        self._wlock = threading.Lock()
        self._replies: queue.Queue = queue.Queue()
        self._window_q: queue.Queue | None = None
        self.lost: str | None = None  #: why the agent went away, once it has ("connection lost: …", the one line)
        self.welcome: dict = {}
        #: Where a running sampler's frames go (on the reader thread): source -> (on_event, on_error).
        self._hooks: dict[str, tuple[Callable, Callable]] = {}
        #: The agent's last stderr lines (one-line diagnostics), read as they come so the pipe never fills.
        self.diagnostics: collections.deque[str] = collections.deque(maxlen=20)
        self._stderr_done = threading.Event()
        self._asking = threading.Lock()  #: one process-table question at a time (a reply is matched by order)
        self._gone = threading.Event()  #: set once the agent's stdout ended and :attr:`lost` says why
        self._closing = threading.Event()
        self._beating: threading.Thread | None = None
        threading.Thread(target=self._read_stderr, name="agent-stderr", daemon=True).start()
        threading.Thread(target=self._read, name="agent-reader", daemon=True).start()

    def _read_stderr(self) -> None:
        try:
            for raw in self._proc.stderr:
                line = raw.decode(errors="replace").strip()
                if line:
                    self.diagnostics.append(line)
        except (OSError, ValueError):
            pass
        self._stderr_done.set()

    # -- the stream --------------------------------------------------------------
    def _read(self) -> None:
        try:
            while True:
                frame = read_frame(self._proc.stdout)
                if frame is None:
                    break
                kind, header, _payload = frame
                if header.get("zjson"):  # fields too big for an inline header (protocol.pack_fields)
                    header, _payload = unpack_fields(header, _payload), b""
                    frame = (kind, header, _payload)
                if kind in (Kind.WAITS, Kind.HOTSPOTS, Kind.NOTICE, Kind.WAIT_TOTALS, Kind.WAIT_SPANS):
                    self._stream_event(kind, header)
                    continue
                window_q, request = self._window_q, header.get("request")
                if kind in _WINDOW_KINDS or (kind is Kind.REFUSED and request in ("ARM", "DISARM")):
                    if window_q is not None:
                        window_q.put(frame)
                    continue
                if kind is Kind.REFUSED and request is None and window_q is not None:
                    window_q.put(frame)  # the agent could not read the stream: it is ending
                self._replies.put(frame)
        except (ProtocolError, OSError, ValueError) as exc:
            self.lost = f"connection lost: the agent's stream broke: {exc}"
        self._stderr_done.wait(2.0)  # its last line says why, when it says anything
        last = self.diagnostics[-1] if self.diagnostics else ""
        self.lost = self.lost or (f"connection lost: {last}" if last else "connection lost: the agent exited")
        self._gone.set()
        for q in (self._replies, self._window_q):
            if q is not None:
                q.put(None)

    def _stream_event(self, kind: Kind, header: dict) -> None:
        if kind is Kind.NOTICE:
            hooks = self._hooks.get(str(header.get("source")))
            if hooks is not None:
                hooks[1]((str(header.get("message") or "").splitlines() or [""])[0])
        elif kind is Kind.WAITS and "waits" in self._hooks:
            for sample in wire.waits_of(header):
                self._hooks["waits"][0](sample)
        elif kind is Kind.WAIT_TOTALS and "exact" in self._hooks:
            self._hooks["exact"][0](wire.totals_of(header))
        elif kind is Kind.WAIT_SPANS and "spans" in self._hooks:
            self._hooks["spans"][0](wire.spans_of(header))
        elif kind is Kind.HOTSPOTS and "hotspots" in self._hooks:
            self._hooks["hotspots"][0](wire.hotspots_of(header))

    def send(self, kind: Kind, header: dict | None = None) -> None:
        """Send one request; UserError when the agent is gone."""
        try:
            with self._wlock:
                self._proc.stdin.write(encode(kind, header))
                self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            self._gone.wait(2.0)  # the reader says why (the agent's last stderr line)
            raise ConnectionLost(self.lost or "connection lost: the agent's stdin is closed") from None

    def _reply(self, want: Kind, timeout: float = REPLY_S) -> tuple[dict, bytes]:
        try:
            frame = self._replies.get(timeout=timeout)
        except queue.Empty:
            raise UserError(f"the agent did not answer within {timeout:.0f} s") from None
        if frame is None:
            raise ConnectionLost(self.lost or "connection lost")
        kind, header, payload = frame
        if kind is Kind.REFUSED:
            raise UserError(str(header.get("message") or "the agent refused"))
        if kind is not want:
            raise UserError(f"the agent answered {kind.name} where {want.name} was due")
        return header, payload

    # -- requests ------------------------------------------------------------------
    def hello(self) -> dict:
        """Say hello; the agent's welcome (``version``, ``python``, ``tools``, ``euid``).
        UserError with one line on a version mismatch or an agent that would not start."""
        self.send(Kind.HELLO, {"version": PROTOCOL_VERSION})
        self.welcome, _ = self._reply(Kind.WELCOME)
        if self.welcome.get("version") != PROTOCOL_VERSION:
            raise UserError(f"agent protocol mismatch: the agent speaks version {self.welcome.get('version')}, "
                            f"the workbench {PROTOCOL_VERSION}")
        if self._beating is None:
            self._beating = threading.Thread(target=self._heartbeat, name="agent-heartbeat", daemon=True)
            self._beating.start()
        return self.welcome

    def _heartbeat(self) -> None:
        """``PING`` every :data:`HEARTBEAT_S` until the agent is gone or told bye: an agent that hears nothing
        for longer disarms and exits (a workbench frozen or cut off by a link TCP has not given up on yet)."""
        while not self._closing.is_set():
            try:
                self.send(Kind.PING)  # the first at once: from it on, the agent counts the silence
            except UserError:
                return
            if self._gone.wait(HEARTBEAT_S):
                return

    def targets(self, critical: tuple | None = None, symbols: Sequence[str] = (),
                library: str | None = None, timeout: float = REPLY_S) -> list[dict]:
        """The host's processes: ``pid``, ``comm``, ``cmdline``, ``critical`` (deny-list role or None),
        ``maps`` (whether it maps one of ``symbols``; None when none were given). With ``symbols`` the agent
        reads every process's mapped ELF files (seconds on a busy host): give a ``timeout`` to match."""
        rules = _engines_rules() if critical is None else critical
        self.send(Kind.LIST_TARGETS, {"critical": [wire.to_fields(r) for r in rules], "symbols": list(symbols),
                                      "library": library})
        return list(self._reply(Kind.TARGETS, timeout)[0]["processes"])

    def processes(self, pids=None) -> list[ProcRow]:
        """The host's process table: the rows of ``pids`` that exist there (every process when None)."""
        with self._asking:
            self.send(Kind.PROCESSES, {"pids": None if pids is None else [int(p) for p in pids]})
            rows = self._reply(Kind.PROCESS_ROWS)[0].get("rows") or []
        return [ProcRow(int(pid), int(ppid), str(title)) for pid, ppid, title in rows]

    def read_function(self, path: str, symbol: str) -> tuple[dict, bytes]:
        """``symbol``'s bytes in the ELF file ``path`` on the host, for disassembly here."""
        self.send(Kind.READ_FUNCTION, {"path": path, "symbol": symbol})
        return self._reply(Kind.FUNCTION)

    def start_waits(self, pid: int, hz: float = 20, on_sample: Callable[[WaitSample], None] | None = None,
                    on_error: Callable[[str], None] | None = None) -> None:
        """Sample ``pid``'s OS waits from /proc on the host; ``on_sample`` gets each
        :class:`~tdescope.app.events.WaitSample`, ``on_error`` a one-line message (both on the reader thread)."""
        self._start("waits", Kind.WAITS_START, {"pid": int(pid), "hz": float(hz)}, on_sample, on_error)

    def start_exact_waits(self, pid: int, interval_s: float = 1.0, on_totals: Callable | None = None,
                          on_spans: Callable | None = None, on_error: Callable[[str], None] | None = None) -> None:
        """Trace ``pid``'s waits exactly with eBPF on the host: ``on_totals`` gets each cumulative
        :class:`~tdescope.app.waits.exact.WaitTotals`, ``on_spans`` each list of long-call
        :class:`~tdescope.app.waits.exact.Span` (on the reader thread). Stop with :meth:`stop_waits`."""
        self._hooks["spans"] = (on_spans or (lambda _s: None), lambda _m: None)
        try:
            self._start("exact", Kind.WAITS_START, {"pid": int(pid), "source": "ebpf", "interval_s": float(interval_s)},
                        on_totals, on_error)
        except UserError:
            self._hooks.pop("spans", None)
            raise

    def stop_waits(self) -> None:
        """Stop every wait sampler running, /proc and eBPF (their last ticks are delivered first)."""
        self._stop("waits", Kind.WAITS_STOP)
        for source in ("exact", "spans"):
            self._hooks.pop(source, None)

    def stop_exact_waits(self) -> None:
        """Stop the eBPF wait tracer only (a /proc sampler started with :meth:`start_waits` goes on)."""
        self.send(Kind.WAITS_STOP, {"source": "ebpf"})
        self._check_accepted(Kind.WAITS_STOP)
        for source in ("exact", "spans"):
            self._hooks.pop(source, None)

    def start_hotspots(self, pid: int, frequency: int = 99, window_s: float = 1.0, callgraph: str = "dwarf",
                       on_window: Callable[[HotspotWindow], None] | None = None,
                       on_error: Callable[[str], None] | None = None) -> None:
        """Sample ``pid`` with perf on the host; ``on_window`` gets each :class:`~tdescope.app.events.HotspotWindow`."""
        self._start("hotspots", Kind.HOTSPOTS_START, {"pid": int(pid), "frequency": int(frequency),
                                                      "window_s": float(window_s), "callgraph": callgraph},
                    on_window, on_error)

    def stop_hotspots(self) -> None:
        """Stop perf on the host."""
        self._stop("hotspots", Kind.HOTSPOTS_STOP)

    def _start(self, source: str, kind: Kind, header: dict, on_event, on_error) -> None:
        before = self._hooks.get(source)
        self._hooks[source] = (on_event or (lambda _e: None), on_error or (lambda _m: None))
        try:
            self.send(kind, header)
            self._check_accepted(kind)
        except UserError:
            if before is None:  # refused: a sampler already running keeps its hooks
                self._hooks.pop(source, None)
            else:
                self._hooks[source] = before
            raise

    def _stop(self, source: str, kind: Kind) -> None:
        self.send(kind)
        self._check_accepted(kind)
        self._hooks.pop(source, None)

    def _check_accepted(self, kind: Kind) -> None:
        """Requests without a reply of their own: a refusal comes back, or nothing; a HELLO round trip tells."""
        self.send(Kind.HELLO, {"version": PROTOCOL_VERSION})
        try:
            self._reply(Kind.WELCOME)
        except UserError:
            self._reply(Kind.WELCOME)  # the refusal came first: the ping's answer follows it
            raise

    def window(self, pid: int, recipe: ProbeRecipe, limits: CaptureLimits, engine: str,
               on_capture: Callable[[PageCapture], None],
               on_state: Callable[[CaptureWindowState], None] | None = None,
               allow_critical: bool = False, critical: tuple | None = None, ebpf: dict | None = None,
               backend: tuple[str, dict] | None = None, followers: tuple[int, ...] = ()) -> "AgentWindow":
        """A capture window run by the agent; call its :meth:`AgentWindow.run`.

        ``backend``: ``(name, options)`` from :func:`backend_request` (default eBPF with ``ebpf`` options);
        ``followers``: more processes on the host the probe goes into (PostgreSQL 18's I/O workers)."""
        window = AgentWindow(self, pid, recipe, limits, engine, on_capture, on_state, allow_critical,
                             _engines_rules() if critical is None else critical, backend or ("ebpf", ebpf or {}))
        if followers:
            window._request["followers"] = [int(p) for p in followers]
        return window

    def close(self, timeout: float = 3.0) -> int | None:
        """Say bye, close the pipe and reap the agent (killed when it does not go); its exit code."""
        self._closing.set()
        try:
            self.send(Kind.BYE)
        except UserError:
            pass
        try:
            self._proc.stdin.close()
        except OSError:
            pass
        try:
            return self._proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            return self._proc.wait(5)

    @property
    def pid(self) -> int:
        """The local process started from ``argv`` (the agent itself, or the ssh client)."""
        return self._proc.pid

    def __enter__(self) -> "AgentClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
