"""Hotspots and OS waits of a process on an ssh host: perf, the /proc sampler and the eBPF wait tracer
run in the agent there.

:class:`HostObservation` has the face of :class:`~tdescope.app.observe.sampling.Observation` the
window uses (``start``, ``stop``, ``set_hotspots``, ``set_waits``, ``exact_source``, ``exact_problem``),
so the window's Hotspots and Waits docks fill the same way from a remote target: ``WaitSample`` from
/proc, and, as the local window's ``exact_waits="auto"``, exact ``WaitFigures`` and ``WaitSpans`` from
the tracer where eBPF loads on the host (else one Problem says why, and /proc is the only OS source).
With a ``wait_source`` (the engine's own waits, read through the forwarded connection of a
:class:`~tdescope.app.remote.host_engine.HostEngineSession`), it is polled here while waits are on, as
the local Observation polls it.
Each sampler fails alone, as one :class:`~tdescope.app.events.Problem`; a lost connection is one Problem too.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future

from tdescope.app.errors import UserError
from tdescope.app.events import Event, LostConnection, Problem
from tdescope.app.hotspots.perf_record import DEFAULT_HZ
from tdescope.app.observe.sampling import ENGINE_WAIT_HZ
from tdescope.app.waits.exact import FiguresSince, spans_event

__all__ = ["HostObservation"]


class HostObservation:
    """Watch ``session``'s target through its agent (a :class:`~tdescope.app.remote.host_session.HostSession`)."""

    def __init__(self, session, sink: Callable[[Event], None], *, hotspots: bool = True, waits: bool = True,
                 frequency: int = DEFAULT_HZ, window_s: float = 1.0, wait_source=None,
                 engine_hz: float = ENGINE_WAIT_HZ) -> None:
        self.session = session
        self.pid = session.server_pid()
        self.sink = sink
        self.frequency = frequency
        self.window_s = window_s
        self.wait_source = wait_source
        self.engine_hz = engine_hz
        self._engine_stop: threading.Event | None = None
        self._want = {"hotspots": hotspots, "waits": waits}
        self._on = {"hotspots": False, "waits": False}
        self._lock = threading.Lock()
        self._stopped = False
        #: ``"ebpf"`` while the host's wait tracer runs, else ``"proc"``: where the OS wait figures come from.
        self.exact_source = "proc"
        #: Why eBPF is not the source, in one line ("" when it is).
        self.exact_problem = ""

    def start(self) -> HostObservation:
        """Start the chosen samplers (in the session's serial worker); returns at once."""
        self._submit(self._start_all)
        return self

    def _start_all(self) -> None:
        for which, on in self._want.items():
            if on:
                self._set(which, True)

    def set_hotspots(self, on: bool) -> None:
        """Start or stop perf on the host; returns once the agent answered (call off the GUI thread)."""
        self._submit(self._set, "hotspots", on).result()

    def set_waits(self, on: bool) -> None:
        """Start or stop the /proc wait sampler on the host; returns once the agent answered."""
        self._submit(self._set, "waits", on).result()

    def stop(self) -> None:
        """Stop both samplers on the host, after what was asked before; returns at once. Idempotent."""
        with self._lock:
            self._stopped = True
        self._submit(lambda: [self._set(which, False, force=True) for which in ("hotspots", "waits")])

    def _submit(self, fn, *args) -> Future:
        try:
            return self.session.serial.submit(fn, *args)
        except RuntimeError:  # the session closed: the agent stopped everything on its way out
            done: Future = Future()
            done.set_result(None)
            return done

    def _set(self, which: str, on: bool, force: bool = False) -> None:
        with self._lock:
            if (on and self._stopped and not force) or self._on[which] == on:
                return
            self._on[which] = on
            try:
                with self.session.requests:
                    self._request(which, on)
            except UserError as exc:
                self._on[which] = False
                if on or self.session.alive():  # stopping on a lost connection: nothing runs there any more
                    self._problem(which, str(exc))

    def _request(self, which: str, on: bool) -> None:
        client = self.session.agent.client
        if which == "hotspots" and on:
            client.start_hotspots(self.pid, self.frequency, self.window_s, on_window=self.sink,
                                  on_error=lambda m: self._problem("hotspots", m))
        elif which == "hotspots":
            client.stop_hotspots()
        elif on:
            client.start_waits(self.pid, on_sample=self.sink, on_error=lambda m: self._problem("waits", m))
            self._start_exact(client)
            self._poll_engine(on=True)
        else:
            self._poll_engine(on=False)
            self.exact_source = "proc"
            client.stop_waits()  # /proc and eBPF both

    def _start_exact(self, client) -> None:
        """The eBPF wait tracer beside the /proc sampler, as the local window's ``auto``: where it cannot
        load on the host, one Problem and :attr:`exact_problem` say why, and the /proc samples go on."""
        try:
            client.start_exact_waits(self.pid, 1.0, on_totals=FiguresSince(self.pid, self.sink),
                                     on_spans=lambda spans: self.sink(spans_event(self.pid, spans, time.time())),
                                     on_error=lambda m: self._problem("waits", m))
        except UserError as exc:
            self.exact_problem = f"exact waits on {self.session.dest}: {exc}; OS waits from /proc samples only"
            self._problem("waits", self.exact_problem)
            return
        self.exact_source, self.exact_problem = "ebpf", ""

    def _poll_engine(self, on: bool) -> None:
        """Start or stop polling the engine's waits (through the forwarded connection) on a thread."""
        if self._engine_stop is not None:
            self._engine_stop.set()
            self._engine_stop = None
        if on and self.wait_source is not None:
            self._engine_stop = threading.Event()
            threading.Thread(target=self._engine_loop, args=(self.wait_source, self._engine_stop),
                             name="host-engine-waits", daemon=True).start()

    def _engine_loop(self, source, stop: threading.Event) -> None:
        next_tick = time.monotonic()
        while not stop.is_set():
            try:
                events = source.sample()
            except Exception as exc:  # noqa: BLE001 - errors cross threads as one line
                if not stop.is_set():
                    line = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                    self._problem("engine waits", f"engine waits stopped: {line}")
                return
            for ev in events:
                self.sink(ev)
            next_tick = max(next_tick + 1.0 / self.engine_hz, time.monotonic())
            stop.wait(next_tick - time.monotonic())

    def _problem(self, source: str, message: str) -> None:
        if self.session.alive():
            self.sink(Problem(time.time(), source, message))
        else:  # the sampler ended with the connection: the window offers Reconnect
            self.sink(LostConnection(time.time(), source, self.session.lost_line(message)))
