"""The app's dataclasses as agent frames and back: recipes, limits, deny-list rules, captures, states.

Each field is named and typed here; an unknown field or a wrong type from the
other end is a :class:`~tdescope.app.remote.protocol.ProtocolError` (one line),
never an object built from whatever arrived.
"""

from __future__ import annotations

import dataclasses

from tdescope.app.engines.api import ArgRef, ProbeRecipe
from tdescope.app.events import CaptureWindowState, PageCapture
from tdescope.app.probe.limits import CaptureLimits
from tdescope.app.probe.window import CaptureSummary
from tdescope.app.remote.protocol import ProtocolError
from tdescope.app.system.critical import CriticalProcess

__all__ = ["capture_fields", "capture_of", "limits_of", "recipe_fields", "recipe_of", "rules_of", "state_of",
           "summary_of", "to_fields"]


def to_fields(obj) -> dict:
    """A dataclass's fields as a JSON-ready dict (tuples as lists, nested dataclasses as dicts)."""
    return dataclasses.asdict(obj)


def _build(cls, fields: object, what: str):
    if not isinstance(fields, dict):
        raise ProtocolError(f"{what} is not an object")
    try:
        return cls(**fields)
    except TypeError as exc:
        raise ProtocolError(f"{what}: {exc}") from None


def _ref(fields):
    return None if fields is None else _build(ArgRef, fields, "argument reference")


def recipe_fields(recipe: ProbeRecipe) -> dict:
    return to_fields(recipe)


def recipe_of(fields: object) -> ProbeRecipe:
    """The :class:`ProbeRecipe` a request carries."""
    if not isinstance(fields, dict):
        raise ProtocolError("recipe is not an object")
    f = dict(fields)
    for key in ("before", "length", "after", "pgno"):
        f[key] = _ref(f.get(key))
    f["symbols"] = tuple(f.get("symbols") or ())
    cond = f.get("condition")
    f["condition"] = None if cond is None else (_ref(cond[0]), int(cond[1]))
    return _build(ProbeRecipe, f, "recipe")


def limits_of(fields: object) -> CaptureLimits:
    return _build(CaptureLimits, fields, "limits")


def rules_of(items: object) -> tuple[CriticalProcess, ...]:
    """The deny-list rules the workbench's engines declare (the agent loads no plugins)."""
    if not isinstance(items, list):
        raise ProtocolError("critical rules are not a list")
    return tuple(_build(CriticalProcess, item, "critical rule") for item in items)


def capture_fields(capture: PageCapture) -> tuple[dict, bytes]:
    """A capture's header fields and its payload (``before`` then ``after``)."""
    head = {"ts": capture.ts, "seq": capture.seq, "symbol": capture.symbol, "direction": capture.direction,
            "pgno": capture.pgno, "stop_us": capture.stop_us, "engine": capture.engine,
            "side": capture.plaintext_side, "nb": len(capture.before)}
    return head, capture.before + capture.after


def capture_of(head: dict, payload: bytes) -> PageCapture:
    try:
        nb = int(head["nb"])
        return PageCapture(ts=float(head["ts"]), seq=int(head["seq"]), symbol=str(head["symbol"]),
                           direction=str(head["direction"]), pgno=int(head["pgno"]), before=payload[:nb],
                           after=payload[nb:], stop_us=float(head["stop_us"]), engine=str(head["engine"]),
                           plaintext_side=str(head["side"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"capture frame: bad field {exc}") from None


def state_of(fields: dict) -> CaptureWindowState:
    try:
        return _build(CaptureWindowState, fields, "window state")
    except ValueError as exc:
        raise ProtocolError(f"window state: {exc}") from None


def summary_of(fields: dict) -> CaptureSummary:
    f = dict(fields)
    f["locations"] = tuple(f.get("locations") or ())
    return _build(CaptureSummary, f, "capture summary")
