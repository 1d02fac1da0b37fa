"""The app's dataclasses as agent frames and back: recipes, limits, deny-list rules, captures, states.

Each field is named and typed here; an unknown field or a wrong type from the
other end is a :class:`~tdescope.app.remote.protocol.ProtocolError` (one line),
never an object built from whatever arrived.
"""

from __future__ import annotations

import dataclasses

from tdescope.app.engines.api import ProbeRecipe
from tdescope.app.engines.argref import ref_fields, ref_of
from tdescope.app.events import CaptureWindowState, HotspotWindow, PageCapture, WaitSample
from tdescope.app.gdb.guard import GuardReport
from tdescope.app.probe.backend import Happened
from tdescope.app.probe.limits import CaptureLimits, StopLimits
from tdescope.app.probe.stats import EbpfStats, GdbStats, WindowCounts
from tdescope.app.probe.window import CaptureSummary
from tdescope.app.remote.protocol import CAPTURE_ROW, ProtocolError
from tdescope.app.system.critical import CriticalProcess

__all__ = ["batch_key", "captures_frame", "captures_of", "limits_of", "recipe_fields", "recipe_of", "rules_of", "state_of",
           "hotspots_of", "summary_fields", "summary_of", "to_fields", "waits_of", "waits_rows"]


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


_REFS = ("before", "length", "after", "pgno", "context")


def _ref(fields):
    if fields is None:
        return None
    if not isinstance(fields, dict):
        raise ProtocolError("argument reference is not an object")
    try:
        return ref_of(fields)
    except (TypeError, ValueError) as exc:
        raise ProtocolError(f"argument reference: {exc}") from None


def recipe_fields(recipe: ProbeRecipe) -> dict:
    """A recipe as a request carries it: its argument references in their flat form
    (:func:`~tdescope.app.engines.argref.ref_fields`), the condition as ``[ref, value]``."""
    out = {f.name: getattr(recipe, f.name) for f in dataclasses.fields(recipe)}
    for key in _REFS:
        out[key] = None if out[key] is None else ref_fields(out[key])
    out["symbols"] = list(recipe.symbols)
    out["condition"] = None if recipe.condition is None else [ref_fields(recipe.condition[0]), recipe.condition[1]]
    return out


def recipe_of(fields: object) -> ProbeRecipe:
    """The :class:`ProbeRecipe` a request carries."""
    if not isinstance(fields, dict):
        raise ProtocolError("recipe is not an object")
    f = dict(fields)
    for key in _REFS:
        f[key] = _ref(f.get(key))
    f["symbols"] = tuple(f.get("symbols") or ())
    cond = f.get("condition")
    f["condition"] = None if cond is None else (_ref(cond[0]), int(cond[1]))
    return _build(ProbeRecipe, f, "recipe")


def limits_of(fields: object) -> CaptureLimits:
    """The :class:`CaptureLimits` a request carries (:func:`to_fields`' form: its ``stops`` an object)."""
    if not isinstance(fields, dict):
        raise ProtocolError("limits is not an object")
    f = dict(fields)
    if "stops" in f:
        f["stops"] = _build(StopLimits, f["stops"], "stop limits")
    return _build(CaptureLimits, f, "limits")


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


#: The probe counts a summary may carry, by the ``kind`` its frame tags them with.
_STATS = {"gdb": GdbStats, "ebpf": EbpfStats}


def summary_fields(summary: CaptureSummary) -> dict:
    """A summary as its ``SUMMARY`` frame carries it: the probe's counts tagged with their ``kind``,
    ``ended_by`` in its words."""
    out = to_fields(summary)
    if summary.counters is not None:
        out["counters"]["probe"]["kind"] = "ebpf" if isinstance(summary.counters.probe, EbpfStats) else "gdb"
    out["ended_by"] = None if summary.ended_by is None else summary.ended_by.value
    return out


def summary_of(fields: dict) -> CaptureSummary:
    """The :class:`CaptureSummary` of a ``SUMMARY`` frame (:func:`summary_fields`' form)."""
    f = dict(fields)
    f["locations"] = tuple(f.get("locations") or ())
    if f.get("guard") is not None:
        f["guard"] = _build(GuardReport, f["guard"], "guard report")
    if f.get("counters") is not None:
        counts = _build(dict, f["counters"], "window counts")
        probe = _build(dict, counts.get("probe"), "probe counts")
        stats = _STATS.get(probe.pop("kind", None))
        if stats is None:
            raise ProtocolError("capture summary: counts of no known probe")
        counts["probe"] = _build(stats, probe, "probe counts")
        f["counters"] = _build(WindowCounts, counts, "window counts")
    try:
        f["ended_by"] = None if f.get("ended_by") is None else Happened(f["ended_by"])
    except ValueError as exc:
        raise ProtocolError(f"capture summary: {exc}") from None
    return _build(CaptureSummary, f, "capture summary")
