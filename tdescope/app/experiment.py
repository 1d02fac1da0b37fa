"""An experiment: a workload run, optionally with a capture window armed on its server process.

Shared by the GUI and the CLI. Everything runs on worker threads; results reach
the caller as events through one ``sink`` callable (the GUI queues them and
repaints in batches). Failures arrive as :class:`~tdescope.app.events.Problem`
events, never as exceptions across threads.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from tdescope.app.ab.runner import ABRunner
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.probe.backend import ProbeBackend
from tdescope.app.probe.remote import RemoteWindow
from tdescope.app.probe.window import CaptureLimits, CaptureSummary, CaptureWindow
from tdescope.app.engines.api import EngineSession, ProbeRecipe, Workload, WorkloadControl
from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import ABResult, Event, LostConnection, Problem, WorkloadResult

__all__ = ["Experiment"]


class Experiment:
    """Run ``workload`` on ``session`` while ``recipe`` (if any) captures pages.

    Parameters
    ----------
    session : EngineSession
        Its ``server_pid()`` is the probe target.
    workload : Workload or None
        None: capture only, while something else drives the target.
    params : mapping
        Workload parameters.
    recipe : ProbeRecipe or None
        None: no capture.
    limits : CaptureLimits
        Bounds of the capture window.
    engine : str
        Engine name stamped on captures.
    sink : callable
        Receives every event, on worker threads.
    repeat_until_captured : bool
        Run the workload again until the capture window closes (headless capture).
    allow_critical : bool
        Let the capture window probe a process on an engine's deny-list (``--allow-critical``).
    backend : ProbeBackend, optional
        What places the probe (:func:`~tdescope.app.probe.selection.choose_backend`); gdb when omitted.
    isolated : bool
        Run the capture window in a worker process (:class:`~tdescope.app.probe.remote.RemoteWindow`):
        the caller's process gets every capture while they are few, a sample in a storm. The GUI's choice.
    rounds : int
        0: one run (captures, if any, during it). N > 0 with an A/B workload: a capture round first
        when ``recipe`` is given (untimed, its result's params say ``round: capture``), the probe
        disarmed, then ``warmup`` + N interleaved timed rounds (:class:`~tdescope.app.ab.runner.ABRunner`)
        ending in one :class:`~tdescope.app.events.ABResult`.
    warmup : int
        Untimed rounds before the timed ones.
    windows : callable, optional
        Makes the capture window instead of :class:`CaptureWindow` / :class:`RemoteWindow`, with their
        arguments (``followers`` too): over ``--ssh`` the agent's window on the database host.
    local_server : bool
        The server runs on this machine: A/B rounds read its CPU time from /proc. False over ``--ssh``
        (this machine's pid of that number is another process): the rounds carry no server CPU.
    """

    def __init__(
        self,
        session: EngineSession | None,
        workload: Workload | None,
        params: Mapping[str, Any],
        recipe: ProbeRecipe | None,
        limits: CaptureLimits,
        engine: str,
        sink: Callable[[Event], None],
        pid: int | None = None,
        repeat_until_captured: bool = False,
        allow_critical: bool = False,
        backend: ProbeBackend | None = None,
        isolated: bool = False,
        rounds: int = 0,
        warmup: int = 1,
        windows: Callable[..., Any] | None = None,
        local_server: bool = True,
    ) -> None:
        self.windows = windows
        self.session = session
        self.backend = backend
        self.isolated = isolated
        self.workload = workload
        self.params = dict(params)
        # a length the probed call does not pass comes from the server (its block size), not a constant
        fits = recipe is not None and session is not None and has_ability(session, Ability.FIT_RECIPES)
        self.recipe = session.fit_recipe(recipe) if fits else recipe
        self.limits = limits
        self.engine = engine
        self.sink = sink
        self.pid = pid if pid is not None else (session.server_pid() if session is not None else None)
        self.repeat = repeat_until_captured
        self.allow_critical = allow_critical
        self.control = WorkloadControl(sink)
        self.window: CaptureWindow | RemoteWindow | None = None
        self.capture_summary: CaptureSummary | None = None
        self.results: list[WorkloadResult] = []
        self.ab_result: ABResult | None = None
        self.runner = (ABRunner(workload, params, self.pid if local_server else None, rounds, warmup,
                                capture="separate round" if recipe is not None else "off")
                       if rounds > 0 and workload is not None else None)
        self.error: str | None = None
        self._thread: threading.Thread | None = None
        self._window_thread: threading.Thread | None = None
        self.done = threading.Event()

    def start(self) -> "Experiment":
        """Start on worker threads; returns at once."""
        self._thread = threading.Thread(target=self._run, name="experiment", daemon=True)
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

    # -- threads ---------------------------------------------------------------
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
            if self.repeat:
                self.control.cancel()  # headless capture: the workload only fed the window

    def _run(self) -> None:
        try:
            if self.recipe is not None and self.pid is not None:
                window_class = self.windows or (RemoteWindow if self.isolated else CaptureWindow)
                # PostgreSQL 18's I/O workers, where page reads decrypt (the isolated window probes the target only)
                more = {} if self.isolated or not has_ability(self.session, Ability.FOLLOW_PROCESSES) \
                    else {"followers": self.session.probe_followers(self.pid, self.recipe)}
                self.window = window_class(self.pid, self.recipe, self.limits, self.engine, on_capture=self.sink,
                                           on_state=self.sink, allow_critical=self.allow_critical,
                                           backend=self.backend, **more)
                self._window_thread = threading.Thread(target=self._run_window, name="capture-window", daemon=True)
                self._window_thread.start()
                # the workload starts once breakpoints sit in the target (or the window failed)
                while not self.window.armed.wait(0.05):
                    if not self._window_thread.is_alive() or self.control.cancelled:
                        break
            capture_round = self.runner is None or self.window is not None
            if self.workload is not None and capture_round and not self.control.cancelled:
                while True:
                    try:
                        result = self.workload.run(self.params, self.control)
                    except UserError as exc:
                        self._fail("workload", str(exc), lost=self._lost(exc))
                        break
                    except Exception as exc:  # noqa: BLE001 - a driver's error (server restart): one line
                        self._fail("workload", f"workload {self.workload.name} failed: {type(exc).__name__}: {exc}",
                                   lost=self._lost(exc))
                        break
                    if not result.label:
                        result = dataclasses.replace(result, label=self.workload.label)
                    if self.runner is not None:
                        result = dataclasses.replace(result, capture_round=True)
                    self.results.append(result)
                    self.sink(result)
                    if result.cancelled or not self.repeat:
                        break
                    if self._window_thread is None or not self._window_thread.is_alive():
                        break
                if self.window is not None and not self.repeat:
                    self.window.cancel("the workload finished")  # nothing left to catch
            if self._window_thread is not None:
                self._window_thread.join()
            if self.runner is not None and not self.control.cancelled:
                try:
                    self.ab_result = self.runner.run(self.control)
                except UserError as exc:
                    self._fail("workload", str(exc), lost=self._lost(exc))
                else:
                    self.sink(self.ab_result)
        except Exception as exc:  # noqa: BLE001 - never let a worker thread die silently
            self._fail("experiment", f"{type(exc).__name__}: {exc}", lost=self._lost(exc))
            if self.window is not None:
                self.window.cancel()
        finally:
            self.done.set()
