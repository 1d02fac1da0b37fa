"""Events to rows and back, generically, keyed by the event dataclass's name.

Any frozen dataclass deriving from :class:`~tdescope.app.events.Event` is stored
without a schema change: its fields become a JSON object, except ``bytes``
fields, which go to the blob table (zlib-compressed when that helps). Nested
dataclasses (``PhaseTiming`` inside ``WorkloadResult``) carry their class name.
On reading, classes come only from the closed map
:data:`~tdescope.app.events.EVENT_TYPES`; a kind outside it decodes to None (the
reader skips and counts it). Fields the class no longer has are ignored and
missing ones take their defaults, so files from older or newer versions still
load what they can.
"""

from __future__ import annotations

import dataclasses
import json
import re
import zlib
from functools import lru_cache

from tdescope.app import events as _events

__all__ = ["EncodedEvent", "encode", "decode", "kind_of", "short_kind", "event_class", "pack_blob", "unpack_blob"]

#: Payloads longer than this are zlib-compressed and stored as a BLOB instead of TEXT.
_COMPRESS_OVER = 1024
_DC = "__dc__"
#: Short names people see (``tdescope info``), by class name.
_SHORT = {"PageCapture": "capture"}


@dataclasses.dataclass(frozen=True, slots=True)
class EncodedEvent:
    """One event as a row: ``payload`` is JSON text, or zlib'd JSON bytes when long."""

    ts: float
    kind: str
    payload: str | bytes
    blobs: tuple[tuple[str, bytes, int], ...]  # (field, stored bytes, 1 when compressed)


def kind_of(event: object) -> str:
    """The stored kind of ``event``: its class name."""
    return type(event).__name__


def short_kind(kind: str) -> str:
    """``PageCapture`` -> ``capture``, ``WaitSample`` -> ``wait_sample``."""
    return _SHORT.get(kind) or re.sub(r"(?<!^)(?=[A-Z])", "_", kind).lower()


def event_class(kind: str) -> type | None:
    """The class stored as ``kind``, from the closed map :data:`~tdescope.app.events.EVENT_TYPES`, or None.

    Nothing named in a session file is imported or looked up on a module: a
    file is data, and a name outside the map is simply unknown.
    """
    return _events.EVENT_TYPES.get(kind) if isinstance(kind, str) else None


def pack_blob(data: bytes) -> tuple[bytes, int]:
    """``(stored, compressed)``: zlib only when it saves at least an eighth."""
    data = bytes(data)
    if len(data) < 64:
        return data, 0
    z = zlib.compress(data, 6)
    return (z, 1) if len(z) < len(data) * 7 // 8 else (data, 0)


def unpack_blob(stored: bytes, compressed: int) -> bytes:
    """Inverse of :func:`pack_blob`."""
    return zlib.decompress(stored) if compressed else bytes(stored)


def _plain(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
        out[_DC] = type(value).__name__
        return out
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return {"__hex__": bytes(value).hex()}
    return value


def encode(event: _events.Event) -> EncodedEvent:
    """Turn ``event`` into a row and its blobs."""
    fields: dict = {}
    blobs = []
    for f in dataclasses.fields(event):
        if f.name == "ts":
            continue
        value = getattr(event, f.name)
        if isinstance(value, (bytes, bytearray, memoryview)):
            stored, z = pack_blob(value)
            blobs.append((f.name, stored, z))
        else:
            fields[f.name] = _plain(value)
    text = json.dumps(fields, separators=(",", ":"), ensure_ascii=False, default=str)
    payload: str | bytes = zlib.compress(text.encode(), 6) if len(text) > _COMPRESS_OVER else text
    return EncodedEvent(float(event.ts), kind_of(event), payload, tuple(blobs))


@lru_cache(maxsize=64)
def _tuple_fields(cls: type) -> frozenset[str]:
    # annotations are strings (postponed evaluation): "tuple[...]" marks fields to rebuild as tuples
    return frozenset(f.name for f in dataclasses.fields(cls) if str(f.type).startswith("tuple"))


def _tuples(value):
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def _revive(value):
    if isinstance(value, dict):
        if _DC in value:
            cls = event_class(value[_DC])
            inner = {k: _revive(v) for k, v in value.items() if k != _DC}
            return _build(cls, inner) if cls is not None else inner
        if set(value) == {"__hex__"}:
            return bytes.fromhex(value["__hex__"])
        return {k: _revive(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_revive(v) for v in value]
    return value


def _build(cls: type, values: dict):
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {k: v for k, v in values.items() if k in names}
    for name in _tuple_fields(cls) & kwargs.keys():
        kwargs[name] = _tuples(kwargs[name])
    return cls(**kwargs)


def decode(kind: str, ts: float, payload: str | bytes, blobs: dict[str, bytes] | None = None):
    """Rebuild the event, or None when this version has no such kind or it no longer fits."""
    cls = event_class(kind)
    if cls is None:
        return None
    text = zlib.decompress(payload).decode() if isinstance(payload, bytes) else payload
    raw = json.loads(text)
    if not isinstance(raw, dict):
        return None
    values = {k: _revive(v) for k, v in raw.items()}
    values["ts"] = ts
    values.update(blobs or {})
    try:
        return _build(cls, values)
    except (TypeError, ValueError):  # a required field is missing, or a value this version does not know
        return None
