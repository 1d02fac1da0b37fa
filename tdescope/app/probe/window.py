"""Capture windows: arm a probe recipe in a live process, collect page pairs, disarm.

A :class:`CaptureWindow` is a small state machine over a probe backend
(:mod:`tdescope.app.probe.backend`; gdb by default)::

    attaching -> armed <-> paused
        |          |         |
        +----------+---------+--> disarming -> disarmed | failed

Every transition goes through :meth:`CaptureWindow._enter`, which publishes the
:class:`CaptureWindowState` users see (``armed``, ``paused``, ``disarmed``,
``failed``). The window refuses a process on any engine's deny-list before
anything attaches, and disarms and releases the target on every way out:
limits reached, cancel, target exit, backend death, error.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from tdescope.app.engines.api import ProbeRecipe
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, PageCapture, WindowState
from tdescope.app.gdb.guard import GuardReport
from tdescope.app.probe.backend import DetachesAnywhere, EndReason, Happened, MetersStops, ProbeBackend, ProbeHandle
from tdescope.app.probe.gdb_backend import GdbBackend
from tdescope.app.probe.joining import CHUNKS_PER_MESSAGE, MessageJoin, joins
from tdescope.app.probe.keep_rate import KeepRate
from tdescope.app.probe.limits import KEEP_PER_S, MAX_CAPTURES, CaptureLimits, stop_budget
from tdescope.app.probe.phase import TRANSITIONS, Phase
from tdescope.app.probe.spec import ProbeSpec
from tdescope.app.probe.stats import WindowCounts
from tdescope.app.probe.spool import FramePairs
from tdescope.app.probe.stop_cost import refuse_many_threads
from tdescope.app.system.critical import refuse_critical
from tdescope.app.system.procstat import gone_within, process_state
from tdescope.app.probe.targets import not_used, refuse_critical_target, refuse_unused_target
from tdescope.app.slots import SLOTS_KW_ONLY

__all__ = ["KEEP_PER_S", "CaptureLimits", "CaptureSummary", "CaptureWindow", "Phase",
           "refuse_critical_target", "refuse_unused_target", "stop_budget"]

#: Seconds between the "armed" progress states that carry the live stopped time.
PROGRESS_S = 0.5
#: How long one turn of the armed loop waits for news from the target.
POLL_S = 0.02
#: What a window may spend on its last frames once disarmed (probes out first), never past its deadline.
CLOSE_S = 0.2
#: How long a window the watchdog ended waits, once detached, for its target to be gone: the stall can be the
#: target's way out (a fatal signal's delivery, its exit) waiting for a debugger a loaded machine descheduled.
EXIT_GRACE_S = 1.5
#: A window ended because nothing more will come (the workload finished, the target exited) delivers what
#: its probe caught for up to this long after the disarm (the probe is already out: only the workbench waits).
DRAIN_S = 10.0


@dataclass(frozen=True, **SLOTS_KW_ONLY)
class CaptureSummary:
    """How a window ended. ``arming_stop_s``: how long the target was stopped while gdb attached and armed
    (before the first resume), the longer of gdb's clock and /proc's. ``guard``: what the guard did when gdb
    died while armed, else None. ``ended_by``: what the target or the backend did that ended the window, if
    that did (``reason`` says it in words). ``counters``: the probe's and the window's counts, None without
    the probe's. ``thinned``: the captures (counted in ``captures``) the keep rate did not keep. ``threads``,
    ``longest_stop_s``, ``most_stopped_s``: what the target's threads felt, sampled from /proc by a stopping
    backend (:class:`~tdescope.app.system.threadstops.StopFigures`; 0 for eBPF). ``lost``: the window ended
    because the connection to the host's agent is gone (its ``error`` says so; the window offers Reconnect)."""

    captures: int
    reason: EndReason | Happened | str
    armed_symbol: str | None
    locations: tuple[str, ...]
    stopped_s: float
    elapsed_s: float
    error: str | None = None
    arming_stop_s: float = 0.0
    guard: GuardReport | None = None
    backend: str = "gdb"
    counters: WindowCounts | None = None
    ended_by: Happened | None = None
    thinned: int = 0
    threads: int = 0
    longest_stop_s: float = 0.0
    most_stopped_s: float = 0.0
    lost: bool = False

    @classmethod
    def failed(cls, error: str, elapsed_s: float = 0.0, backend: str = "gdb", lost: bool = False) -> "CaptureSummary":
        """A window that ended on ``error`` before it armed anything (``lost``: the connection is gone)."""
        return cls(captures=0, reason=EndReason.ERROR, armed_symbol=None, locations=(), stopped_s=0.0, elapsed_s=elapsed_s,
                   error=error, backend=backend, lost=lost)

    @property
    def target_exited(self) -> bool:
        """The target exited while armed: that explains everything after it (a workload's broken connection)."""
        return self.ended_by is Happened.TARGET_EXITED


class CaptureWindow:
    """One bounded capture window on one process.

    Parameters
    ----------
    pid : int
        The target process.
    recipe : ProbeRecipe
        What to break on and which buffers to copy.
    limits : CaptureLimits
        Bounds of the window.
    engine : str
        Engine name stamped on each capture.
    on_capture : callable
        Called (on the window's thread) with each completed :class:`PageCapture`.
    on_state : callable, optional
        Called with :class:`CaptureWindowState` when the window arms, pauses, disarms or fails.
    gdb_path : str, optional
        gdb to use (the default backend's).
    backend : ProbeBackend, optional
        What puts the probe in the process; gdb when omitted.
    allow_critical : bool
        Probe a process on an engine's deny-list anyway (``--allow-critical``).
    critical : tuple of CriticalProcess, optional
        The deny-list rules to apply; None: the loaded engines' (the agent loads no plugins, so
        the workbench sends its engines' rules).
    followers : tuple of int
        More processes probed with the target's program (eBPF; gdb probes the target only), e.g.
        PostgreSQL 18's I/O workers (:func:`tdescope.plugins.postgres.io_workers.io_workers`).

    Notes
    -----
    :meth:`run` blocks; call it from a worker thread. :meth:`cancel` may be called
    from any thread and returns at once; the window disarms within ~50 ms.
    """

    def __init__(
        self,
        pid: int,
        recipe: ProbeRecipe,
        limits: CaptureLimits,
        engine: str,
        on_capture: Callable[[PageCapture], None],
        on_state: Callable[[CaptureWindowState], None] | None = None,
        gdb_path: str | None = None,
        backend: ProbeBackend | None = None,
        allow_critical: bool = False,
        critical: tuple | None = None,
        followers: tuple[int, ...] = (),
    ) -> None:
        self.pid = int(pid)
        self.followers = tuple(int(p) for p in followers)  # more processes to probe (eBPF): I/O workers
        self.recipe = recipe
        self.limits = limits
        self.engine = engine
        #: A recipe whose calls are chunks of messages: one capture per message (joining.py); the probe and
        #: the pairing then count chunks, the window messages.
        self._join = (MessageJoin(on_capture, limits.first_seq, limits.max_captures) if joins(recipe.context_kind)
                      else None)
        self._on_capture = self._join.add if self._join else on_capture
        self._chunk_limit = min(limits.max_captures * (CHUNKS_PER_MESSAGE if self._join else 1), MAX_CAPTURES)
        self._on_state = on_state or (lambda _s: None)
        self._backend = backend or GdbBackend(gdb_path, limits.stops.watchdog_s)
        self._allow_critical = allow_critical
        self._critical = critical
        self._cancel = threading.Event()
        self._cancel_reason: EndReason | str = EndReason.CANCELLED
        self._drain = False
        #: Set while the probe sits in the target (armed or paused).
        self.armed = threading.Event()
        #: The backend's handle once attached (for tests and diagnostics).
        self.handle: ProbeHandle | None = None
        self.phase = Phase.ATTACHING
        self._symbol = ""
        keep = KeepRate(limits.max_kept_per_s).allow if limits.max_kept_per_s and not self._join else None
        self._pairs = FramePairs(self._capture, entry_only=recipe.after is None, keep=keep)
        self._reason: EndReason | Happened | str = EndReason.CANCELLED  # "" while armed and going on
        self._ended_by: Happened | None = None
        self._error: str | None = None
        self._armed_at = self._progress_at = self._resume_at = 0.0
        self._timer: threading.Timer | None = None

    def cancel(self, reason: EndReason | str = EndReason.CANCELLED, drain: bool = False) -> None:
        """Ask the window to disarm and detach now; ``reason`` is how it ends ("the workload finished").

        ``drain``: nothing more will come, so what the probe caught before the disarm is delivered
        (for up to :data:`DRAIN_S`) instead of counted after :data:`CLOSE_S`: a busy consumer may be
        far behind the probe, and a lesson counts what it gets.
        """
        self._cancel_reason, self._drain = reason, drain
        self._cancel.set()

    def _stopping(self) -> bool:
        """Stop building captures now: cancelled, unless the cancel drains (what was read is delivered)."""
        return self._cancel.is_set() and not self._drain

    def _capture(self, seq: int, ts: float, pgno: int, before: bytes, after: bytes, stop_us: float,
                 context: int = -1) -> PageCapture:
        return PageCapture(ts=ts, seq=seq + self.limits.first_seq - 1, symbol=self._symbol, direction=self.recipe.direction, pgno=pgno,
                           before=before, after=after, stop_us=stop_us, engine=self.engine,
                           plaintext_side=self.recipe.side, context=context,
                           context_kind=self.recipe.context_kind if context != -1 else "")

    # -- the one place states change -------------------------------------------
    def _enter(self, phase: Phase, message: str = "") -> None:
        if phase not in TRANSITIONS[self.phase]:
            raise RuntimeError(f"capture window cannot go from {self.phase.name} to {phase.name}")
        self.phase = phase
        if phase is Phase.ARMED:
            self.armed.set()
            self._progress_at = time.monotonic()
        elif phase is Phase.DISARMING:
            self.armed.clear()
        if phase.published is not None:
            self._publish(phase.published, message)

    def _publish(self, state: WindowState, message: str) -> None:
        pairs = self._pairs
        # the target was stopped while the probe was placed too (gdb's attach and arm): it is counted
        arming = self.handle.arming_stop_s if self.handle is not None else 0.0
        self._on_state(CaptureWindowState(time.time(), state=state, captures=pairs.captures,
                                          stopped_s=pairs.stopped_total_s + arming, message=message,
                                          backend=self._backend.name, hits=pairs.stats.hits if pairs.stats else 0,
                                          lost=pairs.stats.lost if pairs.stats else 0, unsent=pairs.thinned))

    # -- run -------------------------------------------------------------------
    def run(self) -> CaptureSummary:
        """Attach, arm, collect until a limit, cancel or exit; always disarm and detach."""
        t_start = time.monotonic()
        try:
            self._attach()
            while self.phase in (Phase.ARMED, Phase.PAUSED) and not self._reason:
                self._step()
        except UserError as exc:
            self._error = str(exc)
            self._reason = EndReason.ERROR
        except OSError:  # /proc/PID/... vanished under the checks: the target exited as the probe armed
            if self.handle is not None or process_state(self.pid) not in ("", "Z"):  # alive, not a zombie
                raise
            self._error = f"pid {self.pid} exited before the probe was armed"
            self._reason = EndReason.ERROR
        finally:
            guard = self._finish()
        handle = self.handle
        felt = handle.stops if isinstance(handle, MetersStops) else None
        return CaptureSummary(
            captures=self._kept(), reason=self._reason, armed_symbol=handle.armed.symbol if handle else None,
            locations=handle.armed.locations if handle else (), stopped_s=self._pairs.stopped_total_s,
            elapsed_s=time.monotonic() - t_start, error=self._error,
            arming_stop_s=handle.arming_stop_s if handle else 0.0, guard=guard, backend=self._backend.name,
            counters=self._counts(), ended_by=self._ended_by, thinned=self._pairs.thinned,
            threads=felt.threads if felt else 0, longest_stop_s=felt.longest_s if felt else 0.0,
            most_stopped_s=felt.most_stopped_s if felt else 0.0,
        )

    def _kept(self) -> int:
        """Captures handed over so far: messages when chunks are joined, else page pairs."""
        return self._join.messages if self._join else self._pairs.captures

    def _counts(self) -> WindowCounts | None:
        """The probe's counters (None without), the window's own beside them (:mod:`~tdescope.app.probe.tally`)."""
        pairs = self._pairs
        if pairs.stats is None:
            return None
        dropped = self._join.partial if self._join else 0  # chunks of messages the window did not keep
        return WindowCounts(probe=pairs.stats, captured=pairs.captures - pairs.thinned - dropped, thinned=pairs.thinned,
                            not_kept=pairs.not_kept + dropped, messages=self._join.messages if self._join else 0)

    def _attach(self) -> None:
        """ATTACHING -> ARMED: refuse a critical process, resolve, attach, arm, let the target run."""
        if not os.path.exists(f"/proc/{self.pid}"):
            raise UserError(f"pid {self.pid} is gone (no such process)")
        # before anything can stop it
        stops = self._backend.stops_target
        if self._critical is None:
            refuse_critical_target(self.pid, self._allow_critical, stops)
        else:
            refuse_critical(self.pid, self._critical, self._allow_critical, stops)
        if stops and not self.limits.stops.accept_stop:
            gdb = self._backend.gdb_path if isinstance(self._backend, GdbBackend) else None
            refuse_many_threads(self.pid, gdb, self.limits.stops.max_burst_s)
        # find the address before attaching: the backend then loads no library symbols while
        # the target is stopped, and a process without the function is never stopped
        address = refuse_unused_target(self.pid, self.recipe, self.engine)
        limits = replace(self.limits, max_captures=self._chunk_limit)
        self.handle = self._backend.attach(self.pid, ProbeSpec.of(self.recipe, limits, address, self.followers))
        if self.handle.armed.symbol is None:
            raise not_used(self.pid, self.recipe, self.engine)
        self._symbol = self.handle.armed.symbol
        self.handle.start()
        self._reason = ""
        self._armed_at = time.monotonic()
        if isinstance(self.handle, DetachesAnywhere):  # probes out at the deadline, whatever the consumer
            self._timer = threading.Timer(self.limits.max_seconds, self.handle.detach)
            self._timer.daemon = True
            self._timer.start()
        self._enter(Phase.ARMED, self._armed_line())

    def _armed_line(self) -> str:
        return f"{self._symbol} in pid {self.pid}"

    def _step(self) -> None:
        """One turn while armed or paused: collect, check the limits, pause or resume, hear the target."""
        assert self.handle is not None
        pairs, limits = self._pairs, self.limits
        if self._cancel.is_set():
            self._reason = self._cancel_reason
            return
        deadline = self._armed_at + limits.max_seconds
        for capture in pairs.drain(self.handle.frames(), self._chunk_limit, deadline, self._stopping):
            self._on_capture(capture)
        pairs.count(self.handle.read_stats())
        if pairs.closed_reason:
            self._reason = pairs.closed_reason
        if self._kept() >= limits.max_captures or pairs.captures >= self._chunk_limit:
            self._reason = self._reason or EndReason.MAX_CAPTURES
            return
        now = time.monotonic()
        if pairs.paused_for is not None:
            if self._join is not None:  # the paused probe misses the open message's other chunks: drop it
                self._join.flush(keep=False)
            self._resume_at, pairs.paused_for = now + pairs.paused_for, None
            if self.phase is Phase.ARMED:
                self._enter(Phase.PAUSED,
                            f"stop budget ({limits.stops.max_busy_fraction:.0%} of wall time) spent: breakpoint out "
                            f"of pid {self.pid}, re-arms in {self._resume_at - now:.1f} s")
        elif self.phase is Phase.PAUSED and now >= self._resume_at:
            self.handle.resume()
            self._enter(Phase.ARMED, self._armed_line())
        elif self.phase is Phase.ARMED and now - self._progress_at >= PROGRESS_S:
            # the stopped time, live: the GUI's status bar shows it while armed
            self._progress_at = now
            self._publish(WindowState.ARMED, self._armed_line())
        if (limits.first_hit_timeout is not None and pairs.captures == 0 and not pairs.pending
                and now - self._armed_at > limits.first_hit_timeout):
            self._reason = EndReason.TIMEOUT
            self._error = (f"no {self.recipe.direction} hit on {self._symbol} "
                           f"within {limits.first_hit_timeout:g} s")
            return
        if now - self._armed_at > limits.max_seconds:
            self._reason = self._reason or EndReason.MAX_SECONDS
            return
        if self._reason:
            return
        news = self.handle.poll(POLL_S)
        if news is None:
            return
        if news.happened is Happened.SIGNAL_PASSED:
            self._publish("armed", news.message)
        else:  # the watchdog's own message says how long the target stayed stopped
            self._ended_by = news.happened
            self._reason = news.message if news.happened is Happened.STALLED else news.happened

    def _finish(self) -> GuardReport | None:
        """-> DISARMING -> DONE or FAILED: take the probe out, release the target, collect the last
        frames for at most :data:`CLOSE_S` (and not past the deadline), count the rest."""
        self._enter(Phase.DISARMING)
        guard = None
        if self._timer is not None:
            self._timer.cancel()
        if self.handle is not None:
            self.handle.disarm()
            closed = self.handle.close()
            guard = closed.guard
            if self._ended_by is Happened.STALLED and gone_within(self.pid, EXIT_GRACE_S):
                # pg_terminate_backend while gdb waited for a CPU: the kill explains the window's end, and
                # whatever else broke with it (the workload's connection), not the watchdog
                self._ended_by = self._reason = Happened.TARGET_EXITED
            if closed.restored:
                self._error = (f"gdb died while armed: the guard put back {closed.restored} breakpoint "
                               f"byte(s) in pid {self.pid} within {closed.restore_ms:.1f} ms")
            # frames written between the last read and the disarm; what is left is counted, not copied
            # nothing more will come once the workload finished or the target exited: deliver what was caught
            ended = self._drain or self._ended_by is Happened.TARGET_EXITED
            close_s = DRAIN_S if ended else CLOSE_S
            until = min(time.monotonic() + close_s, (self._armed_at or float("inf")) + self.limits.max_seconds)
            discard = self.handle.discard if isinstance(self.handle, DetachesAnywhere) else None
            while True:
                late = time.monotonic() > until
                if late and discard is not None:  # the rest is counted, not read; the notices still come
                    self._pairs.not_kept, discard = self._pairs.not_kept + discard(), None
                frames = self.handle.frames()
                for capture in self._pairs.drain(frames, self._chunk_limit, until, final=True):
                    self._on_capture(capture)
                self._pairs.count(self.handle.read_stats())
                if late or not frames:
                    break
            if discard is not None:
                self._pairs.not_kept += discard()
            self._pairs.not_kept += len(self._pairs.pending)
            self._pairs.pending.clear()
        if self._join is not None:  # the last message: whole unless the window already has its count
            self._join.flush(keep=not self._join.full)
        if self._ended_by is Happened.TARGET_EXITED:
            self._error = f"pid {self.pid} exited while armed ({self._kept()} pages captured)"
        self._enter(Phase.FAILED if self._error else Phase.DONE, self._error or self._reason)
        return guard

