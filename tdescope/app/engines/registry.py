"""Engine discovery through the ``tdescope.engines`` entry-point group, and what each engine can do.

Each entry point names an object (``package.module:ENGINE``). It is loaded and
checked against the :class:`~tdescope.app.engines.api.Engine` contract and
against the optional abilities it declares
(:mod:`tdescope.app.engines.capabilities`); a plugin that fails to import,
misses a member, or declares an ability it does not have (or half has one it
does not declare) is reported as an :class:`EngineLoadError` and never stops
start-up (pluggy's habit: reject with a message naming what is wrong).
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.metadata import entry_points

from tdescope.app.engines.api import ConnectParams, Engine, EngineSession, PageDecoder
from tdescope.app.engines.capabilities import (Ability, Role, abilities, ability_problems, has_ability,
                                               partial_abilities)
from tdescope.app.errors import UserError
from tdescope.app.slots import SLOTS

__all__ = [
    "Ability",
    "EngineLoadError",
    "abilities",
    "check_engine",
    "check_session",
    "critical_rules",
    "discover_engines",
    "has_ability",
    "recorded_decoder",
    "open_session",
]

GROUP = "tdescope.engines"
_REQUIRED = ("name", "label", "abilities", "connect", "probe_recipes", "page_decoder", "glossary")
_DATA = ("name", "label", "abilities")


@dataclass(frozen=True, **SLOTS)
class EngineLoadError:
    """A plugin that could not be used: its entry point name and the reason, one line."""

    name: str
    message: str


def _static(obj: object, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def _role_problems(obj: object, role: Role, declared: frozenset, what: str) -> list[str]:
    """``obj`` (the engine, a session or the decoder) against the abilities of ``role`` it declares."""
    problems = []
    for ability in (a for a in Ability if a.role is role):
        if ability in declared:
            problems.extend(f"declares {ability.value}, but {what}: {p}"
                            for p in ability_problems(obj, ability))
        elif has_ability(obj, ability):
            problems.append(f"{what} has {ability.value}, which the engine does not declare")
    for ability, why in partial_abilities(obj, role).items():
        if ability not in declared:
            problems.extend(f"{what} half has {ability.value}: {p}" for p in why)
    return problems


def check_engine(obj: object) -> list[str]:
    """What ``obj`` lacks to satisfy the Engine contract and its declared abilities (empty when fine).

    The engine's own abilities are checked on it, the decoder's on
    ``obj.page_decoder()``; its sessions' are checked by :func:`open_session`.
    """
    problems = [f"missing {m}" for m in _REQUIRED if not _static(obj, m)]
    problems += [f"{m} is not callable" for m in _REQUIRED
                 if m not in _DATA and _static(obj, m) and not callable(getattr(obj, m))]
    if problems:
        return problems
    try:
        params = inspect.signature(obj.connect).parameters
    except (TypeError, ValueError):
        params = {}
    if len(params) != 1:
        problems.append("connect must take one argument (ConnectParams)")
    declared = obj.abilities
    if not isinstance(declared, frozenset) or not all(isinstance(a, Ability) for a in declared):
        return [*problems, "abilities must be a frozenset of Ability members"]
    problems += _role_problems(obj, Role.ENGINE, declared, "the engine")
    try:
        decoder = obj.page_decoder()
    except Exception as exc:  # noqa: BLE001 - reported as the plugin's problem
        return [*problems, f"page_decoder() fails: {type(exc).__name__}: {exc}"]
    problems += _role_problems(decoder, Role.DECODER, declared, "its page decoder")
    return problems


def check_session(engine: Engine, session: object) -> list[str]:
    """What ``session`` (made by ``engine``) lacks of the session abilities its engine declares, and of
    what every session says (:attr:`~tdescope.app.engines.api.EngineSession.own_target`)."""
    problems = _role_problems(session, Role.SESSION, engine.abilities, "its session")
    try:  # the contract's check, not a call site's: every session says it
        own = session.own_target  # type: ignore[attr-defined]
    except AttributeError:
        own = None
    if not isinstance(own, bool):
        problems.append("its session: own_target must be True or False (did this session start its target?)")
    return problems


def open_session(engine: Engine, params: ConnectParams) -> EngineSession:
    """``engine.connect(params)``, with the session checked against the engine's declared abilities.

    Raises
    ------
    UserError
        From the engine (one line), or when the session breaks the declaration
        (a plugin bug: the session is closed first).
    """
    session = engine.connect(params)
    problems = check_session(engine, session)
    if problems:
        session.close()
        raise UserError(f"the {engine.name} plugin is broken: {'; '.join(problems)}")
    return session


def critical_rules(engines: Iterable[Engine]) -> tuple:
    """Every engine's critical-process rules (``tdescope.app.system.critical.CriticalProcess``)."""
    return tuple(rule for engine in engines if has_ability(engine, Ability.CRITICAL_PROCESSES)
                 for rule in engine.critical_processes)


def discover_engines(group: str = GROUP) -> tuple[dict[str, Engine], list[EngineLoadError]]:
    """Load every registered engine.

    Returns
    -------
    engines : dict
        Engine name -> engine object, for the plugins that loaded and passed the contract check.
    errors : list of EngineLoadError
        One per plugin that did not; shown by ``tdescope doctor`` and the UI.
    """
    engines: dict[str, Engine] = {}
    errors: list[EngineLoadError] = []
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            obj = ep.load()
        except Exception as exc:  # noqa: BLE001 - any plugin failure is reported, never fatal
            errors.append(EngineLoadError(ep.name, f"cannot load {ep.value}: {type(exc).__name__}: {exc}"))
            continue
        problems = check_engine(obj)
        if problems:
            errors.append(EngineLoadError(ep.name, f"{ep.value} breaks the engine contract: {', '.join(problems)}"))
            continue
        engines[obj.name] = obj
    return engines, errors


def recorded_decoder(engine: Engine, catalog: dict | None = None) -> PageDecoder:
    """The page decoder a recording's captures were shown with: rebuilt from its catalog (``meta.decoder``,
    what the session's decoder knew of the tables) when the engine can, else the engine's plain one.

    The replay window and ``tdescope report`` both decode through it, as the live window did.
    """
    if catalog and has_ability(engine, Ability.RESTORE_DECODER):
        return engine.decoder_from_catalog(catalog)
    return engine.page_decoder()
