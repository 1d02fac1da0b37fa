"""An experiment: a capture window armed on a server process, a run of a workload, or both.

Shared by the GUI and the CLI. An :class:`Experiment` is composed, not flagged: an optional
:class:`CaptureSpec` (the window to arm) and an optional run, a :class:`WorkloadRun` (one run, or
runs again and again while the window catches pages) or an :class:`ABRun` (timed interleaved
rounds, after an untimed capture round when there is a window). Everything runs on worker threads;
results reach the caller as events through one ``sink`` callable (the GUI queues them and repaints in
batches). Failures arrive as :class:`~tdescope.app.events.Problem` events, never as exceptions across
threads.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tdescope.app.ab.runner import ABRunner
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.probe.backend import ProbeBackend
from tdescope.app.probe.remote import RemoteWindow
from tdescope.app.probe.window import CaptureLimits, CaptureSummary, CaptureWindow
from tdescope.app.engines.api import EngineSession, ProbeRecipe, Workload, WorkloadControl
from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import ABResult, Event, LostConnection, Problem, WorkloadResult

__all__ = ["ABRun", "CaptureSpec", "Experiment", "WorkloadRun"]


@dataclass(frozen=True, kw_only=True)
class CaptureSpec:
    """A capture window to arm on the target.

    Attributes
    ----------
    recipe : ProbeRecipe
        What to capture (fitted to the server, when the session can, by the experiment).
    limits : CaptureLimits
        Bounds of the window.
    backend : ProbeBackend, optional
        What places the probe (:func:`~tdescope.app.probe.selection.choose_backend`); gdb when omitted.
    isolated : bool
        Run the window in a worker process (:class:`~tdescope.app.probe.remote.RemoteWindow`): the
        caller's process gets every capture while they are few, a sample in a storm. The GUI's choice.
    allow_critical : bool
        Let the window probe a process on an engine's deny-list (``--allow-critical``).
    windows : callable, optional
        Makes the window instead of :class:`CaptureWindow` / :class:`RemoteWindow`, with their
        arguments (``followers`` too): over ``--ssh`` the agent's window on the database host.
    """

    recipe: ProbeRecipe
    limits: CaptureLimits = field(default_factory=CaptureLimits)
    backend: ProbeBackend | None = None
    isolated: bool = False
    allow_critical: bool = False
    windows: Callable[..., Any] | None = None


@dataclass(frozen=True, kw_only=True)
class WorkloadRun:
    """One run of ``workload`` with ``params``; with ``until_captured``, runs again until the window closes
    (headless capture: the workload only feeds the window, and stops when it ends)."""

    workload: Workload
    params: Mapping[str, Any] = field(default_factory=dict)
    until_captured: bool = False

    def execute(self, exp: Experiment) -> None:
        """Run on ``exp`` (its window, when it has one, is armed already)."""
        exp.run_workload(self.workload, self.params, capture_round=False, again=self.until_captured)
        if not self.until_captured:
            exp.close_window("the workload finished", drain=True)  # nothing left to catch


@dataclass(frozen=True, kw_only=True)
class ABRun:
    """Interleaved timed rounds of an A/B workload (:class:`~tdescope.app.ab.runner.ABRunner`), ending
    in one :class:`~tdescope.app.events.ABResult`.

    With a capture window, an untimed capture round runs first (its result says ``capture_round``)
    and the probe is disarmed before the timed rounds. ``local_server``: the server runs on this
    machine, so the rounds read its CPU time from /proc (False over ``--ssh``).
    """

    workload: Workload
    params: Mapping[str, Any] = field(default_factory=dict)
    rounds: int = 5
    warmup: int = 1
    local_server: bool = True

    def runner(self, pid: int | None, captures: bool) -> ABRunner:
        """The rounds' runner (UserError for a workload that is no A/B comparison, or bad counts)."""
        return ABRunner(self.workload, self.params, pid if self.local_server else None, self.rounds, self.warmup,
                        capture="separate round" if captures else "off")

    def execute(self, exp: Experiment) -> None:
        """The capture round (when ``exp`` has a window), then the timed rounds."""
        if exp.window is not None:
            exp.run_workload(self.workload, self.params, capture_round=True, again=False)
            exp.close_window("the workload finished", drain=True)
        exp.join_window()
        exp.run_rounds()


class Experiment:
    """A capture window on ``session``'s server process, a run of a workload, or both.

    Parameters
    ----------
    session : EngineSession or None
        Its ``server_pid()`` is the probe target (None: ``pid`` names it).
    engine : str
        Engine name stamped on captures.
    sink : callable
        Receives every event, on worker threads.
    capture : CaptureSpec, optional
        The window to arm; the run starts once its probes sit in the target.
    run : WorkloadRun or ABRun, optional
        What runs; None: capture only, while something else drives the target.
    pid : int, optional
        The target, when not the session's server.
    """

    def __init__(self, session: EngineSession | None, engine: str, sink: Callable[[Event], None], *,
                 capture: CaptureSpec | None = None, run: WorkloadRun | ABRun | None = None,
                 pid: int | None = None) -> None:
        self.session = session
        self.engine = engine
        self.sink = sink
        # a length the probed call does not pass comes from the server (its block size), not a constant
        if capture is not None and session is not None and has_ability(session, Ability.FIT_RECIPES):
            capture = dataclasses.replace(capture, recipe=session.fit_recipe(capture.recipe))
        self.capture = capture
        self.run = run
        self.pid = pid if pid is not None else (session.server_pid() if session is not None else None)
        self.control = WorkloadControl(sink)
        self.window: CaptureWindow | RemoteWindow | None = None
        self.capture_summary: CaptureSummary | None = None
        self.results: list[WorkloadResult] = []
        self.ab_result: ABResult | None = None
        self._runner = run.runner(self.pid, capture is not None) if isinstance(run, ABRun) else None
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._window_thread: threading.Thread | None = None
        self.done = threading.Event()

    # -- what it is made of ------------------------------------------------------
    @property
    def recipe(self) -> ProbeRecipe | None:
        """The capture's recipe (fitted to the server), or None."""
        return self.capture.recipe if self.capture is not None else None

    @property
    def limits(self) -> CaptureLimits | None:
        """The capture window's bounds, or None."""
        return self.capture.limits if self.capture is not None else None

    @property
    def backend(self) -> ProbeBackend | None:
        """What places the probe (None: gdb, or the agent's window)."""
        return self.capture.backend if self.capture is not None else None

    @property
    def workload(self) -> Workload | None:
        """The workload that runs, or None (capture only)."""
        return self.run.workload if self.run is not None else None

    # -- control -----------------------------------------------------------------
    def start(self) -> Experiment:
        """Start on worker threads; returns at once."""
        self._thread = threading.Thread(target=self._main, name="experiment", daemon=True)
        self._thread.start()
        return self

    def cancel(self) -> None:
        """Stop the workload at its next safe point and disarm the probe."""
        self.control.cancel()
        if self.window is not None:
            self.window.cancel()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until finished; True when it did."""
        return self.done.wait(timeout)

    # -- steps the runs compose (worker thread) -------------------------------------
    def run_workload(self, workload: Workload, params: Mapping[str, Any], capture_round: bool, again: bool) -> None:
        """Run ``workload`` once, publishing its result; with ``again``, once more while the window is open."""
        while not self.control.cancelled:
            try:
                result = workload.run(params, self.control)
            except UserError as exc:
                self._fail("workload", str(exc), lost=self._lost(exc))
                return
            except Exception as exc:  # noqa: BLE001 - a driver's error (server restart): one line
                self._fail("workload", f"workload {workload.name} failed: {type(exc).__name__}: {exc}",
                           lost=self._lost(exc))
                return
            if not result.label:
                result = dataclasses.replace(result, label=workload.label)
            if capture_round:
                result = dataclasses.replace(result, capture_round=True)
            self.results.append(result)
            self.sink(result)
            if result.cancelled or not again or not self._window_open():
                return

    def close_window(self, why: str, drain: bool = False) -> None:
        """Disarm the capture window, if any; ``drain``: the workload is done, deliver what the probe caught."""
        if self.window is not None:
            self.window.cancel(why, drain)

    def join_window(self) -> None:
        """Wait for the capture window's thread to end."""
        if self._window_thread is not None:
            self._window_thread.join()

    def run_rounds(self) -> None:
        """The A/B rounds, unless cancelled; their result is published."""
        if self._runner is None or self.control.cancelled:
            return
        try:
            self.ab_result = self._runner.run(self.control)
        except UserError as exc:
            self._fail("workload", str(exc), lost=self._lost(exc))
        else:
            self.sink(self.ab_result)

    # -- threads ---------------------------------------------------------------
    def _window_open(self) -> bool:
        return self._window_thread is not None and self._window_thread.is_alive()

    def _fail(self, source: str, message: str, lost: bool = False, wins: bool = False) -> None:
        """Say ``message`` (one line) as a Problem, or as a LostConnection when ``lost``; it becomes
        :attr:`error` when first, or when it ``wins``: the target's exit explains everything after it (the
        workload's broken connection)."""
        message = (message.strip().splitlines() or [""])[0]  # one line, whatever the driver said
        if self.error is None or wins:
            self.error = message
        self.sink((LostConnection if lost else Problem)(time.time(), source, message))

    def _lost(self, exc: BaseException) -> bool:
        """True when ``exc`` means a connection is gone: ours (ConnectionLost), or, as the session tells
        from its driver's error, the database's."""
        if isinstance(exc, ConnectionLost):
            return True
        return has_ability(self.session, Ability.TELL_LOST) and self.session.connection_lost(exc)

    def _run_window(self) -> None:
        assert self.window is not None
        try:
            summary = self.capture_summary = self.window.run()
            if summary.error:
                self._fail("capture", summary.error, lost=summary.lost, wins=summary.target_exited)
        except UserError as exc:
            self._fail("capture", str(exc), lost=self._lost(exc))
        except Exception as exc:  # noqa: BLE001 - reported as one line; the window already detached
            self._fail("capture", f"capture failed: {type(exc).__name__}: {exc}")
        finally:
            if isinstance(self.run, WorkloadRun) and self.run.until_captured:
                self.control.cancel()  # headless capture: the workload only fed the window

    def _arm(self, spec: CaptureSpec) -> None:
        """Open the window on its own thread; return once its probes sit in the target (or it failed)."""
        window_class = spec.windows or (RemoteWindow if spec.isolated else CaptureWindow)
        # PostgreSQL 18's I/O workers, where page reads decrypt (the isolated window probes the target only)
        more = {} if spec.isolated or not has_ability(self.session, Ability.FOLLOW_PROCESSES) \
            else {"followers": self.session.probe_followers(self.pid, spec.recipe)}
        self.window = window_class(self.pid, spec.recipe, spec.limits, self.engine, on_capture=self.sink,
                                   on_state=self.sink, allow_critical=spec.allow_critical, backend=spec.backend,
                                   **more)
        self._window_thread = threading.Thread(target=self._run_window, name="capture-window", daemon=True)
        self._window_thread.start()
        while not self.window.armed.wait(0.05):
            if not self._window_thread.is_alive() or self.control.cancelled:
                break

    def _main(self) -> None:
        try:
            if self.capture is not None and self.pid is not None:
                self._arm(self.capture)
            if self.run is not None:
                self.run.execute(self)
            self.join_window()
        except Exception as exc:  # noqa: BLE001 - never let a worker thread die silently
            self._fail("experiment", f"{type(exc).__name__}: {exc}", lost=self._lost(exc))
            if self.window is not None:
                self.window.cancel()
        finally:
            self.done.set()
