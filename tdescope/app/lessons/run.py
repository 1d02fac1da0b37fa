"""Running a lesson on a session: the shared machinery the analyses use.

A :class:`LessonRun` holds what one run needs (the lesson, the engine's binding, the
session, where events go, the cancel flag) and runs experiments for the analyses
(:mod:`tdescope.app.lessons.analyses`). Every event an experiment emits goes on to
the caller's sink (the GUI's hub shows captures, progress and results in its docks)
and is kept for the analysis.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tdescope.app.engines.api import Engine, EngineSession, ProbeRecipe, Workload
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.errors import UserError
from tdescope.app.events import Event, LessonCard, LessonVerdict, WorkloadProgress
from tdescope.app.experiment import ABRun, CaptureSpec, Experiment, WorkloadRun
from tdescope.app.lessons.catalogue import Binding, Lesson
from tdescope.app.probe.window import CaptureLimits, stop_budget

__all__ = ["LessonRun", "Ran"]


@dataclass(slots=True)
class Ran:
    """What one experiment of a lesson gave: the experiment and every event it emitted."""

    experiment: Experiment
    events: list[Event] = field(default_factory=list)

    def of(self, kind: type) -> list:
        """The events of one class, in order."""
        return [e for e in self.events if isinstance(e, kind)]


class LessonRun:
    """One run of ``lesson`` on ``session``.

    Parameters
    ----------
    lesson : Lesson
    engine : Engine
    session : EngineSession
    sink : callable
        Receives every event (on worker threads), the card last.
    fast : bool
        Use the binding's quick parameters (tests, a class short of time).
    backend_choice : str
        ``auto``, ``ebpf`` or ``gdb``: what places the probes of lessons that capture.
    on_step : callable, optional
        Called with ``(done, total, text)`` as the lesson moves through its steps.
    first_seq : callable, optional
        The number the next capture gets (a window numbers its captures on across runs).
    hotspots : bool
        Record perf on the engine's process during timed rounds (the DML lesson's evidence).
    windows : callable, optional
        Makes the capture windows (:class:`~tdescope.app.experiment.Experiment`'s ``windows``): over
        ``--ssh`` the agent's on the database host.
    remote : str, optional
        Where the server runs when not here ("db1 via ssh"): what samples this machine (perf, the
        eBPF wait tracer, the server's CPU in A/B rounds) is left out, and an analysis that needs it says so.
    """

    def __init__(self, lesson: Lesson, engine: Engine, session: EngineSession,
                 sink: Callable[[Event], None] | None = None, fast: bool = False, backend_choice: str = "auto",
                 on_step: Callable[[int, int, str], None] | None = None,
                 first_seq: Callable[[], int] | None = None, hotspots: bool = True,
                 windows: Callable[..., Any] | None = None, remote: str | None = None) -> None:
        self.lesson = lesson
        self.engine = engine
        self.binding: Binding = lesson.binding(engine.name)
        self.session = session
        self.sink = sink or (lambda event: None)
        self.fast = fast
        self.backend_choice = backend_choice
        self.on_step = on_step or (lambda done, total, text: None)
        self.first_seq = first_seq or (lambda: 1)
        self.hotspots = hotspots and remote is None  # perf runs here: on another host's pid it would be wrong
        self.windows = windows
        self.remote = remote
        self._cancel = threading.Event()
        self._current: Experiment | None = None
        self.backend_note: str | None = None

    # -- control ---------------------------------------------------------------
    @property
    def cancelled(self) -> bool:
        """True once :meth:`cancel` was called."""
        return self._cancel.is_set()

    def cancel(self) -> None:
        """Stop the running experiment at its next safe point; the card says cancelled."""
        self._cancel.set()
        if self._current is not None:
            self._current.cancel()

    def step(self, done: int, text: str) -> None:
        """Tell the caller the lesson reached step ``done`` (of the lesson's steps)."""
        total = len(self.lesson.steps)
        self.on_step(done, total, text)
        self.sink(WorkloadProgress(time.time(), f"lesson:{self.lesson.id}", "lesson", done, total, text))

    # -- what the binding names ------------------------------------------------
    def workload(self) -> Workload:
        """The session's workload the binding names."""
        for w in self.session.workloads():
            if w.name == self.binding.workload:
                return w
        have = ", ".join(w.name for w in self.session.workloads())
        raise UserError(f"lesson {self.lesson.id}: {self.engine.name} has no workload {self.binding.workload!r} "
                        f"(has: {have})")

    def params(self, workload: Workload, **over: Any) -> dict:
        """The workload's parameters for this lesson (fast ones when asked), with ``over`` on top."""
        return {**self.binding.parameters(workload.params, self.fast), **over}

    def recipe(self) -> ProbeRecipe:
        """The probe recipe the binding names."""
        for recipe in self.engine.probe_recipes():
            if recipe.key == self.binding.recipe:
                return recipe
        raise UserError(f"lesson {self.lesson.id}: {self.engine.name} has no probe recipe {self.binding.recipe!r}")

    def check_requirements(self) -> None:
        """UserError ("needs pgcrypto: ...") when the database lacks what the binding requires."""
        need = self.binding.requires
        if need and has_ability(self.session, Ability.REQUIRE_EXTENSIONS):
            try:
                self.session.require_extension(need)
            except UserError as exc:
                raise UserError(f"needs {need}: {exc}") from None

    # -- experiments -----------------------------------------------------------
    def experiment(self, workload: Workload, params: Mapping[str, Any], recipe: ProbeRecipe | None = None,
                   rounds: int = 0, limits: CaptureLimits | None = None) -> Ran:
        """Run one experiment to its end (blocking) and keep its events.

        Raises
        ------
        UserError
            The experiment failed (its one line), or the probe backend cannot be had.
        """
        if self.cancelled:
            raise _Cancelled
        backend = None
        if recipe is not None:
            if self.windows is None:  # over --ssh the agent on the host places the probe (eBPF)
                from tdescope.app.probe.selection import ProbeOptions, choose_backend

                backend, self.backend_note = choose_backend(ProbeOptions(self.backend_choice), recipe)
            if recipe.requires and has_ability(self.session, Ability.REQUIRE_EXTENSIONS):
                self.session.require_extension(recipe.requires)
        ran = Ran(None)  # type: ignore[arg-type]

        def keep(event: Event) -> None:
            ran.events.append(event)
            self.sink(event)

        # a lab the workbench started gets the lab's stop budget, as in the window and `capture --lab`
        limits = dataclasses.replace(limits or CaptureLimits(), first_seq=self.first_seq(),
                                     stops=stop_budget(self.session.own_target))
        capture = CaptureSpec(recipe=recipe, limits=limits, backend=backend, windows=self.windows) \
            if recipe is not None else None
        run = ABRun(workload=workload, params=params, rounds=rounds, warmup=1, local_server=self.remote is None) \
            if rounds else WorkloadRun(workload=workload, params=params)
        exp = Experiment(self.session, self.engine.name, keep, capture=capture, run=run)
        ran.experiment = exp
        self._current = exp
        exp.start()
        while not exp.wait(0.2):
            if self.cancelled:
                exp.cancel()
        self._current = None
        if self.cancelled:
            raise _Cancelled
        if exp.error:
            raise UserError(exp.error)
        return ran

    def probe_name(self, ran: Ran) -> str:
        """What placed ``ran``'s probe, as the evidence says it: ``ebpf``, ``gdb``, or the agent's on a host."""
        if self.remote is not None:
            return f"ebpf, by the agent on {self.remote}"
        return ran.experiment.backend.name if ran.experiment.backend else "gdb"

    # -- the card --------------------------------------------------------------
    def card(self, ours: list[str], verdict: LessonVerdict, verdict_text: str, evidence: list[str] | None = None,
             figures: Mapping[str, Any] | None = None, params: Mapping[str, Any] | None = None) -> LessonCard:
        """A card for this run: the lesson's published figures beside ``ours``."""
        lesson = self.lesson
        published = tuple(f"{p.label}: {p.text}" for p in lesson.published)
        return LessonCard(time.time(), lesson.id, lesson.title, self.engine.name, lesson.question, lesson.source(),
                          published, tuple(ours), verdict, verdict_text, tuple(evidence or ()), dict(figures or {}),
                          self.binding.note, {k: v for k, v in (params or {}).items() if k != "sql"})


class _Cancelled(Exception):
    """The run was cancelled between or inside experiments."""
