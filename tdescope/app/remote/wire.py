"""The app's dataclasses as agent frames and back: recipes, limits, deny-list rules, captures, states.

Each field is named and typed here; an unknown field or a wrong type from the
other end is a :class:`~tdescope.app.remote.protocol.ProtocolError` (one line),
never an object built from whatever arrived.
"""

from __future__ import annotations

import dataclasses

from tdescope.app.engines.api import ArgRef, ProbeRecipe
from tdescope.app.events import CaptureWindowState, HotspotWindow, PageCapture, WaitSample
from tdescope.app.probe.limits import CaptureLimits
from tdescope.app.probe.window import CaptureSummary
from tdescope.app.remote.protocol import CAPTURE_ROW, ProtocolError
from tdescope.app.system.critical import CriticalProcess

__all__ = ["batch_key", "captures_frame", "captures_of", "limits_of", "recipe_fields", "recipe_of", "rules_of", "state_of",
           "hotspots_of", "summary_of", "to_fields", "waits_of", "waits_rows"]


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
    for key in ("before", "length", "after", "pgno", "context"):
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


def batch_key(capture: PageCapture) -> tuple:
    """What the captures of one ``CAPTURES`` frame share (one window's): sent once per batch."""
    return capture.symbol, capture.direction, capture.engine, capture.plaintext_side, capture.context_kind


def captures_frame(captures: list[PageCapture]) -> tuple[dict, list[bytes]]:
    """A batch's header (the shared fields and ``n``) and its payload's parts: one :data:`CAPTURE_ROW`
    (``ts, stop_us, seq, pgno, context, len(before), len(after)``) per capture, then each capture's
    ``before`` and ``after``. The rows are binary: at tens of thousands of pages a second, JSON rows
    cost the agent and the workbench more than the pages' bytes do."""
    symbol, direction, engine, side, context_kind = batch_key(captures[0])
    pack = CAPTURE_ROW.pack
    rows = b"".join([pack(c.ts, c.stop_us, c.seq, c.pgno, c.context, len(c.before), len(c.after)) for c in captures])
    parts = [rows]
    for c in captures:
        parts += (c.before, c.after)
    return {"symbol": symbol, "direction": direction, "engine": engine, "side": side,
            "context_kind": context_kind, "n": len(captures)}, parts


def captures_of(head: dict, payload: bytes) -> list[PageCapture]:
    """The :class:`PageCapture` events of one ``CAPTURES`` frame."""
    try:
        symbol, direction, engine, side, context_kind = (
            str(head[k]) for k in ("symbol", "direction", "engine", "side", "context_kind"))
        n = int(head["n"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"captures frame: bad field {exc}") from None
    pos = n * CAPTURE_ROW.size
    if n < 0 or pos > len(payload):
        raise ProtocolError("captures frame: more rows than its payload holds")
    out = []
    for ts, stop_us, seq, pgno, context, nb, na in CAPTURE_ROW.iter_unpack(memoryview(payload)[:pos]):
        mid, end = pos + nb, pos + nb + na
        if end > len(payload):
            raise ProtocolError("captures frame: page lengths past the payload")
        out.append(PageCapture(ts, seq, symbol, direction, pgno, payload[pos:mid], payload[mid:end], stop_us,
                               engine, side, context, context_kind))
        pos = end
    if pos != len(payload):
        raise ProtocolError("captures frame: payload longer than its pages")
    return out


def waits_rows(samples: list[WaitSample]) -> dict:
    """One tick of wait samples as a ``WAITS`` header."""
    return {"rows": [[w.ts, w.pid, w.tid, w.source, w.wait_class, w.event, w.detail] for w in samples]}


def waits_of(head: dict) -> list[WaitSample]:
    """The :class:`WaitSample` events of one ``WAITS`` frame."""
    try:
        return [WaitSample(ts=float(ts), pid=int(pid), tid=int(tid), source=str(src), wait_class=str(cls),
                           event=str(ev), detail=str(detail))
                for ts, pid, tid, src, cls, ev, detail in head["rows"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"waits frame: bad field {exc}") from None


def hotspots_of(head: dict) -> HotspotWindow:
    """The :class:`HotspotWindow` of one ``HOTSPOTS`` frame (folded stacks -> counts, symbol -> DSO)."""
    try:
        stacks = {str(k): int(v) for k, v in head["stacks"].items()}
        dsos = {str(k): str(v) for k, v in head["dsos"].items()}
        return HotspotWindow(ts=float(head["ts"]), start=float(head["start"]), pid=int(head["pid"]), stacks=stacks,
                             dsos=dsos, event=str(head["event"]), frequency=int(head["frequency"]))
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ProtocolError(f"hotspots frame: bad field {exc}") from None


def totals_rows(totals) -> dict:
    """A :class:`~tdescope.app.waits.exact.WaitTotals` as a ``WAIT_TOTALS`` header."""
    return {"rows": [[k.nr, k.flags, k.size, a.count, a.total_ns, a.max_ns, list(a.lat)] for k, a in totals.aggs.items()],
            "calls": totals.calls, "no_room": totals.no_room, "unmatched": totals.unmatched, "ts": totals.ts}


def totals_of(head: dict):
    """The :class:`~tdescope.app.waits.exact.WaitTotals` of one ``WAIT_TOTALS`` frame."""
    from tdescope.app.waits.exact import SizedKey, SyscallAgg, WaitTotals
    try:
        aggs = {SizedKey(int(nr), int(fl), int(sz)): SyscallAgg(int(c), int(t), int(m), tuple(int(x) for x in lat))
                for nr, fl, sz, c, t, m, lat in head["rows"]}
        return WaitTotals(aggs, int(head["calls"]), int(head["no_room"]), int(head["unmatched"]), float(head["ts"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"wait totals frame: bad field {exc}") from None


def spans_rows(spans) -> dict:
    return {"rows": [[s.start, s.duration_s, s.tid, s.key.nr, s.key.flags, s.key.size] for s in spans]}


def spans_of(head: dict) -> list:
    """The :class:`~tdescope.app.waits.exact.Span` list of one ``WAIT_SPANS`` frame."""
    from tdescope.app.waits.exact import SizedKey, Span
    try:
        return [Span(float(st), float(d), int(tid), SizedKey(int(nr), int(fl), int(sz)))
                for st, d, tid, nr, fl, sz in head["rows"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"wait spans frame: bad field {exc}") from None


def state_of(fields: dict) -> CaptureWindowState:
    try:
        return _build(CaptureWindowState, fields, "window state")
    except ValueError as exc:
        raise ProtocolError(f"window state: {exc}") from None


def summary_of(fields: dict) -> CaptureSummary:
    f = dict(fields)
    f["locations"] = tuple(f.get("locations") or ())
    return _build(CaptureSummary, f, "capture summary")
