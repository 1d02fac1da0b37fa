"""``tdescope agent``: the privileged half, run on the database host from one zipapp.

It reads :mod:`~tdescope.app.remote.protocol` requests on stdin and answers on
stdout, nothing else: it never runs a command it was sent (a request names a
closed set of things to do), writes only to a 0700 spool directory it removes,
and exits when stdin closes (a dropped connection), or when a workbench that
sends heartbeats (``PING``) has said nothing for ``SILENCE_S`` (frozen, or cut
off by a link TCP has not given up on yet): its window is cancelled, and the
kernel takes out what is left of the eBPF probe as the process's file
descriptors close. Stderr carries one-line diagnostics.

A garbled stream (wrong magic, unknown kind, oversized frame) is refused in one
line and ends the agent: after garbage the stream has no frame boundary to trust.
A bad field in a known request is refused in one line and the agent goes on.
"""

from __future__ import annotations

import ctypes.util
import os
import shutil
import sys
import tempfile
import threading

from tdescope import __version__
from tdescope.app.errors import UserError
from tdescope.app.gdb import allowlist
from tdescope.app.probe.ebpf.backend import DEFAULT_RING_MB, EbpfBackend
from tdescope.app.probe.gdb_backend import GdbBackend
from tdescope.app.probe.window import CaptureSummary, CaptureWindow
from tdescope.app.remote import wire
from tdescope.app.remote.agent_stream import SILENCE_S, Out, Silence
from tdescope.app.remote.carried import carry_into
from tdescope.app.remote.host_reads import follower_pids, list_processes, process_rows, read_function
from tdescope.app.hotspots.perf_record import HotspotSampler
from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
from tdescope.app.waits.os_sampler import OsWaitSampler
from tdescope.app.remote.protocol import PROTOCOL_VERSION, REQUESTS, Kind, ProtocolError, read_frame, widen_pipe

__all__ = ["Agent", "main"]

#: How long the agent gives its window to disarm once stdin closed, before it exits anyway.
EXIT_GRACE_S = 1.5


def _tools() -> dict:
    """What the host has: libbpf (eBPF probes), gdb, perf."""
    return {"libbpf": ctypes.util.find_library("bpf"), "gdb": shutil.which("gdb"), "perf": shutil.which("perf")}


class Agent:
    """One agent session: the request loop's state (the spool, the window running, if any)."""

    def __init__(self, out: Out, spool: str, silence: Silence | None = None) -> None:
        self._out = out
        self._spool = spool
        self._silence = silence or Silence(lambda: None)
        self._hello = False
        self._window: CaptureWindow | None = None
        self._thread: threading.Thread | None = None
        self._waits: dict = {}  #: source ("proc", "ebpf") -> its running sampler: both may run at once
        self._hotspots: HotspotSampler | None = None

    # -- requests ----------------------------------------------------------------
    def handle(self, kind: Kind, header: dict, payload: bytes) -> bool:
        """Answer one request; False when the session ends (bye, a version mismatch)."""
        if kind not in REQUESTS:
            return self._refuse(kind, f"{kind.name} is not a request")
        if kind is Kind.HELLO:
            return self._hello_(header)
        if not self._hello:
            return self._refuse(kind, "say hello first")
        if kind is Kind.PING:
            self._silence.arm()
            return True
        if kind is Kind.BYE:
            self.shutdown("bye")
            self._out.send(Kind.GOODBYE)
            return False
        try:
            if kind is Kind.LIST_TARGETS:
                rules = wire.rules_of(header.get("critical", []))
                procs = list_processes(rules, tuple(header.get("symbols") or ()), header.get("library"))
                self._out.send(Kind.TARGETS, {"processes": procs})
            elif kind is Kind.ARM:
                self._arm(header)
            elif kind is Kind.DISARM:
                window = self._window
                if window is None:
                    return self._refuse(kind, "no capture window is armed")
                window.cancel(str(header.get("reason") or "cancelled"), bool(header.get("drain")))
            elif kind is Kind.WAITS_START:
                self._start_waits(header)
            elif kind is Kind.WAITS_STOP:
                source = header.get("source")  # None: every wait sampler running
                stopping = [s for s in self._waits if source in (None, s)]
                if not stopping:
                    return self._refuse(kind, "no OS wait sampling is running")
                for s in stopping:
                    self._waits.pop(s).stop()
            elif kind is Kind.HOTSPOTS_START:
                self._start_hotspots(header)
            elif kind is Kind.HOTSPOTS_STOP:
                if self._hotspots is None:
                    return self._refuse(kind, "no hotspot sampling is running")
                self._hotspots.stop()
                self._hotspots = None
            elif kind is Kind.PROCESSES:
                self._out.send(Kind.PROCESS_ROWS, {"rows": process_rows(header.get("pids"))})
            elif kind is Kind.READ_FUNCTION:
                head, code = read_function(str(header.get("path", "")), str(header.get("symbol", "")))
                self._out.send(Kind.FUNCTION, head, code)
            else:
                return self._refuse(kind, f"{kind.name} is not handled")
        except (UserError, ProtocolError) as exc:
            return self._refuse(kind, str(exc))
        except Exception as exc:  # noqa: BLE001 - one line to the workbench, the agent goes on
            return self._refuse(kind, f"{kind.name.lower()} failed: {type(exc).__name__}: {exc}")
        return True

    def _hello_(self, header: dict) -> bool:
        theirs = header.get("version")
        if theirs != PROTOCOL_VERSION:
            message = (f"agent protocol mismatch: the workbench speaks version {theirs}, this agent "
                       f"{PROTOCOL_VERSION} (tdescope {__version__}); copy the workbench's agent to the host")
            self._refuse(Kind.HELLO, message)
            print(message, file=sys.stderr)
            return False
        self._hello = True
        self._out.send(Kind.WELCOME, {"version": PROTOCOL_VERSION, "tdescope": __version__,
                                      "python": sys.version.split()[0], "tools": _tools(), "euid": os.geteuid(),
                                      "pid": os.getpid(), "spool": self._spool})
        return True

    def _refuse(self, kind: Kind | None, message: str) -> bool:
        self._out.send(Kind.REFUSED, {"request": None if kind is None else kind.name,
                                      "message": message.splitlines()[0] if message else "refused"})
        return True

    def _arm(self, header: dict) -> None:
        if self._window is not None:
            raise UserError("a capture window is already armed: disarm it first")
        backend = _backend(str(header.get("backend", "ebpf")), header.get("options") or {})
        window = CaptureWindow(int(header["pid"]), wire.recipe_of(header.get("recipe")),
                               wire.limits_of(header.get("limits", {})), str(header.get("engine", "")),
                               self._capture, self._state, backend=backend,
                               allow_critical=bool(header.get("allow_critical")),
                               critical=wire.rules_of(header.get("critical", [])),
                               followers=follower_pids(header.get("followers")))
        self._window = window
        self._thread = threading.Thread(target=self._run, args=(window,), name="window", daemon=True)
        self._thread.start()

    def _start_waits(self, header: dict) -> None:
        source = str(header.get("source", "proc"))
        if source not in ("proc", "ebpf"):
            raise UserError(f"no OS wait source {source!r} (proc or ebpf)")
        if source in self._waits:
            raise UserError("OS waits are already being sampled: stop them first")
        pid = int(header["pid"])
        if source == "ebpf":
            self._waits[source] = _ExactWaits(self._out, pid, float(header.get("interval_s", 1.0)))
        else:
            self._waits[source] = _Waits(self._out, pid, float(header.get("hz", 20)))

    def _start_hotspots(self, header: dict) -> None:
        if self._hotspots is not None:
            raise UserError("hotspots are already being sampled: stop them first")
        pid = int(header["pid"])
        sampler = HotspotSampler(pid, int(header.get("frequency", 99)), float(header.get("window_s", 1.0)),
                                 str(header.get("callgraph", "dwarf")),
                                 on_window=lambda w: self._out.send(Kind.HOTSPOTS, wire.to_fields(w)),
                                 on_error=lambda m: self._out.send(Kind.NOTICE, {"source": "hotspots", "message": m}))
        sampler.start()
        self._hotspots = sampler

    def _capture(self, capture) -> None:
        self._out.capture(capture)

    def _state(self, state) -> None:
        self._out.send(Kind.STATE, wire.to_fields(state))

    def _run(self, window: CaptureWindow) -> None:
        try:
            summary = window.run()
        except Exception as exc:  # noqa: BLE001 - told to the workbench as the window's error
            summary = CaptureSummary.failed(f"capture failed: {type(exc).__name__}: {exc}")
        self._window = None  # before the summary: the workbench may arm the next window as soon as it has it
        self._out.send(Kind.SUMMARY, wire.summary_fields(summary))

    def shutdown(self, reason: str) -> None:
        """Stop the wait sampler, cancel the window, if any, and wait (bounded) for its probe to come out."""
        for sampler in list(self._waits.values()):
            sampler.stop()
        if self._hotspots is not None:
            self._hotspots.stop()
        window, thread = self._window, self._thread
        if window is not None:
            window.cancel(reason)
        if thread is not None:
            thread.join(EXIT_GRACE_S)


def _backend(name: str, options: dict):
    """The probe backend a request names, from a closed set, with its numeric options only: eBPF
    (ring size, sampling, byte cap), or gdb (the watchdog), read-only as everywhere, sourcing the helper
    the agent carried into its spool. A gdb path is never taken from a request: the agent runs the
    host's ``gdb``."""
    if name == "ebpf":
        return EbpfBackend(float(options.get("ring_mb", DEFAULT_RING_MB)), int(options.get("sample_every", 1)),
                           float(options.get("max_bytes_per_s", 0.0)))
    if name == "gdb":
        if not os.path.isfile(allowlist.helper_path()):
            raise UserError("gdb's probe helper is not in the agent's spool: the agent cannot probe with gdb")
        return GdbBackend(None, float(options.get("watchdog_s", 0.25)))
    raise UserError(f"no probe backend {name!r} (ebpf or gdb)")


class _Waits:
    """OS waits sampled from /proc (:class:`OsWaitSampler`), one ``WAITS`` frame per tick."""

    def __init__(self, out: Out, pid: int, hz: float) -> None:
        if not 0.1 <= hz <= 200:
            raise UserError(f"wait sampling rate must be between 0.1 and 200 Hz, not {hz}")
        if not os.path.exists(f"/proc/{pid}"):
            raise UserError(f"no process {pid}")
        self._out = out
        self._tick: list = []
        self._lock = threading.Lock()
        self._sampler = OsWaitSampler(pid, hz, self._sample, self._error)
        self._sampler.start()

    def _sample(self, sample) -> None:
        with self._lock:
            if self._tick and self._tick[0].ts != sample.ts:
                self._send()
            self._tick.append(sample)

    def _send(self) -> None:  # the lock held
        if self._tick:
            self._out.send(Kind.WAITS, wire.waits_rows(self._tick))
            self._tick = []

    def _error(self, message: str) -> None:
        with self._lock:
            self._send()
        self._out.send(Kind.NOTICE, {"source": "waits", "message": message})

    def stop(self) -> None:
        self._sampler.stop()
        with self._lock:
            self._send()


class _ExactWaits:
    """Exact waits from the eBPF wait tracer: ``WAIT_TOTALS`` each interval, ``WAIT_SPANS`` as they come."""

    def __init__(self, out: Out, pid: int, interval_s: float) -> None:
        if not 0.1 <= interval_s <= 60:
            raise UserError(f"wait interval must be between 0.1 and 60 s, not {interval_s}")
        self._tracer = EbpfWaitTracer(pid, interval_s,
                                      on_totals=lambda t: out.send(Kind.WAIT_TOTALS, wire.totals_rows(t)),
                                      on_error=lambda m: out.send(Kind.NOTICE, {"source": "exact", "message": m}),
                                      on_spans=lambda s: out.send(Kind.WAIT_SPANS, wire.spans_rows(s)))
        self._tracer.start()

    def stop(self) -> None:
        self._tracer.stop()


def main() -> int:
    """The agent's process: frames in on stdin, frames out on stdout, until stdin closes or ``bye``."""
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    widen_pipe(stdout.fileno())  # sshd's pipe (or the workbench's, locally): whole batches in one write
    sys.stdout = sys.stderr  # stdout is the protocol's alone: a stray print must not corrupt it
    spool = tempfile.mkdtemp(prefix="tdescope-agent-")  # 0700, removed below
    tempfile.tempdir = spool  # perf's windows and any other temporary file: inside the spool
    if os.path.isfile(sys.path[0]):  # a zipapp: helpers it starts (the reaper) find tdescope in it
        os.environ["PYTHONPATH"] = sys.path[0]
    out = Out(stdout)

    def silenced() -> None:  # the main thread may be stuck in a read, the window's in a write: end from here
        print(f"tdescope agent: the workbench said nothing for {SILENCE_S:g} s: disarming and exiting", file=sys.stderr)
        out.closed = True  # nothing more goes out (a write blocked on a reader that stopped keeps its lock)
        agent.shutdown("the workbench stopped talking")
        shutil.rmtree(spool, ignore_errors=True)
        os._exit(4)

    silence = Silence(silenced)
    agent = Agent(out, spool, silence)
    code = 0
    try:
        carry_into(spool)
        while True:
            try:
                frame = read_frame(stdin)
            except ProtocolError as exc:
                agent._refuse(None, str(exc))
                print(f"tdescope agent: {exc}", file=sys.stderr)
                code = 2
                break
            if frame is None:  # the workbench closed the pipe (or the connection dropped)
                break
            silence.heard()
            with silence.answering():
                going_on = agent.handle(*frame)
            if not going_on:
                break
    except KeyboardInterrupt:
        pass
    finally:
        agent.shutdown("the workbench went away")
        shutil.rmtree(spool, ignore_errors=True)
        with out._lock:
            out.closed = True
            try:
                stdout.flush()
            except (BrokenPipeError, OSError, ValueError):
                pass
    return code


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main())
