"""Engine discovery through the ``tdescope.engines`` entry-point group.

Each entry point names an object (``package.module:ENGINE``). It is loaded and
checked against the :class:`~tdescope.app.engines.api.Engine` contract; a
plugin that fails to import or misses a member is reported as an
:class:`EngineLoadError` and never stops start-up (pluggy's habit: reject with
a message naming what is wrong).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass
from importlib.metadata import entry_points

from tdescope.app.engines.api import Engine

__all__ = ["EngineLoadError", "check_engine", "discover_engines"]

GROUP = "tdescope.engines"
_REQUIRED = ("name", "label", "connect", "probe_recipes", "page_decoder", "glossary")


@dataclass(frozen=True, slots=True)
class EngineLoadError:
    """A plugin that could not be used: its entry point name and the reason, one line."""

    name: str
    message: str


def check_engine(obj: object) -> list[str]:
    """What ``obj`` lacks to satisfy the Engine contract (empty when it is fine)."""
    problems = []
    for member in _REQUIRED:
        if not hasattr(obj, member):
            problems.append(f"missing {member}")
        elif member not in ("name", "label") and not callable(getattr(obj, member)):
            problems.append(f"{member} is not callable")
    if hasattr(obj, "connect") and callable(obj.connect):
        try:
            params = inspect.signature(obj.connect).parameters
        except (TypeError, ValueError):
            params = {}
        if len(params) != 1:
            problems.append("connect must take one argument (ConnectParams)")
    return problems


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
