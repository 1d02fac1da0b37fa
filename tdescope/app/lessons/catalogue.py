"""The lesson catalogue: one TOML file per lesson in ``tdescope/resources/lessons/``.

A lesson is an experiment of the source documents (``../shared/seeds/``) with its
published figure. Its steps are said in words, the same for every engine; what runs
them on an engine is a :class:`Binding` (which workload, which parameters, which
probe recipe) and the lesson's ``analysis`` names the function that turns the run
into a result card (:mod:`tdescope.app.lessons.analyses`). An engine without a
binding cannot run the lesson, and the lesson says why (``needs = "needs Oracle"``).
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from types import MappingProxyType
from typing import Any

from tdescope.app.errors import UserError

__all__ = ["Binding", "Lesson", "Published", "load_lessons", "lesson_named"]


@dataclass(frozen=True, slots=True)
class Published:
    """One published figure: what was measured, its value and where it was measured.

    Attributes
    ----------
    label : str
        What the figure is, in words ("elapsed encrypted / plain, AIX").
    value : float or None
        The figure as a number, when it is one (a ratio, a count); None for words only.
    text : str
        The figure as published ("91.65 s vs 42.31 s = 2.17×").
    """

    label: str
    text: str
    value: float | None = None


@dataclass(frozen=True, slots=True)
class Binding:
    """How one engine runs a lesson's steps.

    Attributes
    ----------
    engine : str
        Engine name (``sqlcipher``, ``mariadb``, ``postgres``, ``oracle``).
    workload : str
        The session workload that carries the steps.
    params : mapping
        Parameters over the workload's defaults.
    fast : mapping
        Parameters over ``params`` for a quick run (tests, a class short of time).
    recipe : str
        Probe recipe key, or "" when the lesson captures nothing.
    requires : str
        What the database must have (``pgcrypto``), checked before running.
    marker : str
        Text every row the workload writes holds: found in plaintext only.
    rounds : int
        Timed A/B rounds (``ab_ratio``) or repeats (``two_by_two``).
    note : str
        What the engine's run stands in for, when it is not the published experiment.
    """

    engine: str
    workload: str
    params: Mapping[str, Any] = field(default_factory=dict)
    fast: Mapping[str, Any] = field(default_factory=dict)
    recipe: str = ""
    requires: str = ""
    marker: str = ""
    rounds: int = 1
    note: str = ""

    def parameters(self, defaults: Mapping[str, Any], fast: bool) -> dict:
        """The workload's defaults, with this binding's parameters (and fast ones) over them."""
        return {**defaults, **self.params, **(self.fast if fast else {})}


@dataclass(frozen=True, slots=True)
class Lesson:
    """One lesson of the catalogue.

    Attributes
    ----------
    id : str
        Stable identifier, the file's name (``io-path``).
    title, question, expected : str
        What it asks, and what a run should show.
    analysis : str
        The function that makes the card (:data:`tdescope.app.lessons.analyses.ANALYSES`).
    seed, section : str
        The source document and the part of it the published figure comes from.
    published : tuple of Published
    steps : tuple of str
        The steps in words, the same on every engine.
    bindings : mapping
        Engine name -> :class:`Binding`.
    needs : str
        Why an engine without a binding cannot run it ("needs Oracle").
    order : int
        Place in the catalogue.
    """

    id: str
    title: str
    question: str
    expected: str
    analysis: str
    seed: str
    section: str
    published: tuple[Published, ...]
    steps: tuple[str, ...]
    bindings: Mapping[str, Binding]
    needs: str = ""
    order: int = 0

    @property
    def engines(self) -> tuple[str, ...]:
        """The engines that can run it."""
        return tuple(self.bindings)

    def binding(self, engine: str) -> Binding:
        """How ``engine`` runs it.

        Raises
        ------
        UserError
            The engine cannot: the line says why and which engines can.
        """
        if engine not in self.bindings:
            who = ", ".join(self.bindings) or "no engine here"
            raise UserError(f"lesson {self.id} cannot run on {engine}: {self.needs or 'no workload for it'} "
                            f"(runs on: {who})")
        return self.bindings[engine]

    def why_not(self, engine: str) -> str:
        """"" when ``engine`` can run it, else the reason ("needs Oracle")."""
        return "" if engine in self.bindings else (self.needs or f"no {engine} workload for it")

    def source(self) -> str:
        """``seed 000 (file), section`` for cards and listings."""
        return f"seed {self.seed[:3]} ({self.seed}), {self.section}"


def _lesson(name: str, raw: Mapping[str, Any]) -> Lesson:
    try:
        bindings = {engine: Binding(engine=engine, **spec) for engine, spec in raw.get("engines", {}).items()}
        published = tuple(Published(**p) for p in raw["published"])
        return Lesson(id=name, title=raw["title"], question=raw["question"], expected=raw["expected"],
                      analysis=raw["analysis"], seed=raw["seed"], section=raw["section"], published=published,
                      steps=tuple(raw["steps"]), bindings=MappingProxyType(bindings), needs=raw.get("needs", ""),
                      order=int(raw.get("order", 0)))
    except (KeyError, TypeError) as exc:
        raise UserError(f"lesson file {name}.toml is malformed: {type(exc).__name__}: {exc}") from None


def load_lessons() -> tuple[Lesson, ...]:
    """Every lesson of the catalogue, in its order.

    Raises
    ------
    UserError
        A lesson file that does not parse or lacks a field (one line naming it).
    """
    folder = resources.files("tdescope.resources").joinpath("lessons")
    lessons = []
    for entry in folder.iterdir():
        if not entry.name.endswith(".toml"):
            continue
        name = entry.name[:-5]
        try:
            raw = tomllib.loads(entry.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise UserError(f"lesson file {entry.name} is not valid TOML: {exc}") from None
        lessons.append(_lesson(name, raw))
    return tuple(sorted(lessons, key=lambda lesson: (lesson.order, lesson.id)))


def lesson_named(lesson_id: str) -> Lesson:
    """The lesson called ``lesson_id``, or a UserError listing the known ones."""
    lessons = load_lessons()
    for lesson in lessons:
        if lesson.id == lesson_id:
            return lesson
    raise UserError(f"no lesson {lesson_id!r} (lessons: {', '.join(lesson.id for lesson in lessons)})")
