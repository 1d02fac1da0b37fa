"""Observation of a target process: hotspots, OS waits and engine waits, one sink.

An :class:`Observation` owns the three samplers of one target pid and sends
everything they produce to one ``sink`` callable, on worker threads (the same
pattern as :class:`tdescope.app.experiment.Experiment`): ``HotspotWindow``,
:class:`HotspotLeaves` (where in each function the CPU was, for the
disassembly heat), ``WaitSample`` (OS and engine), ``WaitFigures`` (exact OS waits from the eBPF
tracer, once a second, when asked for, with ``WaitSpans``: a bounded sample of the long waits, for the
timeline) and ``Problem``.

Each part fails alone: perf missing or not permitted gives one ``Problem``
with the fix and the wait samplers keep running; an engine wait source that
raises gives one ``Problem`` and stops, the rest goes on.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable

from tdescope.app.hotspots.perf_script import Sample
from tdescope.app.engines.api import WaitSource
from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import Event, HotspotLeaves, LostConnection, Problem
from tdescope.app.hotspots.perf_record import DEFAULT_HZ, DWARF_STACK_BYTES
from tdescope.app.hotspots.profile import HotspotSampler, check_perf
from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
from tdescope.app.waits.exact import FiguresSince, spans_event
from tdescope.app.waits.os_sampler import OsWaitSampler

__all__ = ["ENGINE_WAIT_HZ", "EXACT_WAITS", "OS_WAIT_HZ", "Observation", "engine_poll_text", "leaves_of"]

#: Choices for exact OS waits: ``auto`` traces with eBPF where it loads (else the /proc samples are
#: the only OS figures, and a Problem says why), ``ebpf`` insists (a Problem when it cannot), ``proc``
#: never traces.
EXACT_WAITS = ("auto", "ebpf", "proc")

#: Engine-wait polls per second by default. Each poll is one statement on the database server
#: (PostgreSQL: the one backend's pg_stat_activity row), so the rate is said and adjustable
#: (``--engine-wait-hz``, Observe ▸ Engine wait polling).
ENGINE_WAIT_HZ = 5.0
#: /proc samples per second per thread of the OS wait sampler, by default.
OS_WAIT_HZ = 20.0


def engine_poll_text(source: WaitSource | None, hz: float) -> str:
    """What the engine wait source reads and how often, for the window and the CLI ("" without one)."""
    if source is None:
        return ""
    return f"engine waits: {source.describe()}; polled every {1000.0 / hz:.0f} ms (one statement per poll)"


def leaves_of(samples: list[Sample], pid: int, ts: float | None = None) -> HotspotLeaves:
    """Count leaf offsets per symbol (unknown symbols and offsets are skipped)."""
    per: dict[str, Counter[int]] = {}
    for s in samples:
        leaf = s.leaf
        if leaf is None or leaf.offset is None or leaf.symbol == "[unknown]":
            continue
        per.setdefault(leaf.symbol, Counter())[leaf.offset] += 1
    return HotspotLeaves(time.time() if ts is None else ts, pid, {k: dict(v) for k, v in per.items()})


class Observation:
    """Watch ``pid`` with perf and /proc (and the engine's wait source) until stopped.

    Parameters
    ----------
    pid : int
        The target process.
    sink : callable
        Receives every event, from worker threads.
    hotspots, waits : bool
        Which samplers run at start; toggle later with :meth:`set_hotspots`
        and :meth:`set_waits`.
    wait_source : WaitSource or None
        The engine's own waits, sampled every ``1 / engine_hz`` s while waits are on.
    frequency, window_s : int, float
        perf sampling frequency (default :data:`~tdescope.app.hotspots.perf_record.DEFAULT_HZ`) and
        window length.
    wait_hz, engine_hz : float
        OS wait sampling and engine wait polling rates (:data:`ENGINE_WAIT_HZ`: each engine poll is
        one statement on the server).
    exact_waits : {"proc", "auto", "ebpf"}
        Whether the eBPF wait tracer runs beside the /proc sampler while waits are on
        (:data:`EXACT_WAITS`); :attr:`exact_source` says what the OS figures came from.
    stack_bytes : int
        User stack perf copies per sample to unwind with DWARF (default
        :data:`~tdescope.app.hotspots.perf_record.DWARF_STACK_BYTES`).
    callgraph : {"dwarf", "fp", "none"}
        How perf unwinds stacks (:data:`~tdescope.app.hotspots.perf_record.CALL_GRAPHS`).
    """

    def __init__(
        self,
        pid: int,
        sink: Callable[[Event], None],
        *,
        hotspots: bool = True,
        waits: bool = True,
        wait_source: WaitSource | None = None,
        frequency: int = DEFAULT_HZ,
        window_s: float = 1.0,
        wait_hz: float = OS_WAIT_HZ,
        engine_hz: float = ENGINE_WAIT_HZ,
        exact_waits: str = "proc",
        stack_bytes: int = DWARF_STACK_BYTES,
        callgraph: str = "dwarf",
        lost: Callable[[BaseException], bool] | None = None,
    ) -> None:
        if exact_waits not in EXACT_WAITS:
            raise UserError(f"exact waits must be one of {', '.join(EXACT_WAITS)}")
        self.pid = pid
        self.sink = sink
        self.wait_source = wait_source
        #: Whether an error of the engine's wait source means its connection is gone (the session's
        #: ``connection_lost``): said as a LostConnection, which the window answers with Reconnect.
        self.lost = lost
        self.frequency = frequency
        self.stack_bytes = stack_bytes
        self.callgraph = callgraph
        self.window_s = window_s
        self.wait_hz = wait_hz
        self.engine_hz = engine_hz
        self._want_hotspots = hotspots
        self._want_waits = waits
        self._lock = threading.Lock()
        self._hot: HotspotSampler | None = None
        self._os: OsWaitSampler | None = None
        self.exact_waits = exact_waits
        self._tracer: EbpfWaitTracer | None = None
        #: ``"ebpf"`` while the tracer runs, else ``"proc"``: where the OS wait figures come from.
        self.exact_source = "proc"
        #: Why eBPF is not the source, in one line ("" when it is, or was not asked for).
        self.exact_problem = ""
        self._engine_stop: threading.Event | None = None
        self._engine_thread: threading.Thread | None = None
        self._perf_problem_sent = False
        self._hot_starting = False
        self._stopped = False
        self._waits_before_pause = False
        self._paused = False

    # -- lifecycle -------------------------------------------------------------
    def start(self) -> Observation:
        """Start the chosen samplers on worker threads; returns at once."""
        threading.Thread(target=self._start_all, name="observation-start", daemon=True).start()
        return self

    def start_blocking(self) -> Observation:
        """Start the chosen samplers and return once they run (the CLI's way)."""
        self._start_all()
        return self

    def _start_all(self) -> None:
        if self._want_hotspots:
            self.set_hotspots(True)
        if self._want_waits:
            self.set_waits(True)

    def stop(self) -> None:
        """Stop every sampler (perf ends, temp files go). Idempotent."""
        with self._lock:
            self._stopped = True
        self.set_hotspots(False)
        self.set_waits(False)

    def pause(self) -> None:
        """Stop sampling but keep perf attached (see :meth:`HotspotSampler.pause`); the wait samplers stop.
        Pausing a paused observation does nothing (it must not forget what ran before the first pause)."""
        if self._paused:
            return
        self._paused = True
        hot = self._hot
        if hot is not None:
            hot.pause()
        self._waits_before_pause = self.waits_on
        if self._waits_before_pause:
            self.set_waits(False)

    def resume(self) -> None:
        """Sample again after :meth:`pause`: perf's events back on, the wait samplers started again if they ran."""
        if not self._paused:
            return
        self._paused = False
        hot = self._hot
        if hot is not None:
            hot.resume()
        if self._waits_before_pause:
            self.set_waits(True)

    @property
    def hotspots_on(self) -> bool:
        """True while the hotspot sampler runs."""
        return self._hot is not None and self._hot.running

    @property
    def waits_on(self) -> bool:
        """True while the OS wait sampler runs."""
        return self._os is not None and self._os.running

    # -- toggles ---------------------------------------------------------------
    def set_hotspots(self, on: bool) -> None:
        """Start or stop perf sampling. Blocks for the perf check (~50 ms): call off the GUI thread."""
        with self._lock:
            self._want_hotspots = on
            if not on:
                sampler, self._hot = self._hot, None
            elif self._stopped or self.hotspots_on or self._hot_starting:
                return
            else:
                sampler = None
                self._hot_starting = True
        if sampler is not None:
            sampler.stop()
            return
        if not on:
            return
        try:
            self._start_hotspots()
        finally:
            self._hot_starting = False

    def _start_hotspots(self) -> None:
        problem = check_perf(self.pid)
        if problem is not None:
            # Said once per observation: a toggle pressed again says nothing new.
            if not self._perf_problem_sent:
                self._perf_problem_sent = True
                self._problem("hotspots", problem)
            return
        sampler = HotspotSampler(
            self.pid, frequency=self.frequency, window_s=self.window_s, stack_bytes=self.stack_bytes,
            callgraph=self.callgraph, on_window=self.sink, on_error=lambda m: self._problem("hotspots", m),
            on_samples=lambda samples: self.sink(leaves_of(samples, self.pid)),
        )
        try:
            sampler.start()
        except UserError as exc:
            self._problem("hotspots", str(exc))
            return
        with self._lock:
            if self._stopped or not self._want_hotspots:
                sampler.stop()  # stopped while perf started
                return
            self._hot = sampler

    def set_waits(self, on: bool) -> None:
        """Start or stop the OS wait sampler and the engine's wait source."""
        with self._lock:
            self._want_waits = on
            if on and (self._stopped or self.waits_on):
                return
            old_os, self._os = self._os, None
            old_stop, self._engine_stop = self._engine_stop, None
            old_tracer, self._tracer = self._tracer, None
            self.exact_source = "proc"
            if on:
                self._start_tracer()
                self._os = OsWaitSampler(
                    self.pid, hz=self.wait_hz, on_sample=self.sink,
                    on_error=lambda m: self._problem("waits", m),
                )
                self._os.start()
                if self.wait_source is not None:
                    self._engine_stop = threading.Event()
                    self._engine_thread = threading.Thread(
                        target=self._engine_loop, args=(self.wait_source, self._engine_stop),
                        name="engine-waits", daemon=True,
                    )
                    self._engine_thread.start()
        if old_os is not None:
            old_os.stop()
        if old_stop is not None:
            old_stop.set()
        if old_tracer is not None:
            old_tracer.stop()

    def _start_tracer(self) -> None:
        """Start the eBPF wait tracer when asked for; say in one Problem why not when it cannot load."""
        if self.exact_waits == "proc":
            return
        tracer = EbpfWaitTracer(self.pid, on_totals=FiguresSince(self.pid, self.sink),
                                on_error=lambda m: self._problem("waits", m),
                                on_spans=lambda spans: self.sink(spans_event(self.pid, spans, time.time())))
        try:
            tracer.start()
        except UserError as exc:
            self.exact_problem = f"exact waits: {exc}; OS waits from /proc samples only"
            self._problem("waits", self.exact_problem)
            return
        self._tracer = tracer
        self.exact_source = "ebpf"
        self.exact_problem = ""


    # -- threads ---------------------------------------------------------------
    def _problem(self, source: str, message: str, lost: bool = False) -> None:
        self.sink((LostConnection if lost else Problem)(time.time(), source, message))

    def _is_lost(self, exc: BaseException) -> bool:
        return isinstance(exc, ConnectionLost) or (self.lost is not None and self.lost(exc))

    def _engine_loop(self, source: WaitSource, stop: threading.Event) -> None:
        period = 1.0 / self.engine_hz
        next_tick = time.monotonic()
        while not stop.is_set():
            try:
                events = source.sample()
            except UserError as exc:
                self._problem("engine waits", str(exc), self._is_lost(exc))
                return
            except Exception as exc:  # noqa: BLE001 - errors cross threads as one line
                self._problem("engine waits", f"engine wait source failed: {type(exc).__name__}: {exc}",
                              self._is_lost(exc))
                return
            for ev in events:
                self.sink(ev)
            next_tick = max(next_tick + period, time.monotonic())
            stop.wait(next_tick - time.monotonic())
