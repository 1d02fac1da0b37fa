"""Events to rows and back, generically, keyed by the event dataclass's name.

Any frozen dataclass deriving from :class:`~tdescope.app.events.Event` is stored
without a schema change: its fields become a JSON object, except ``bytes``
fields, which go to the blob table (zlib-compressed when that helps). Nested
dataclasses (``PhaseTiming`` inside ``WorkloadResult``) carry their class name.
On reading, fields the class no longer has are ignored and missing ones take
their defaults, so files from older or newer versions still load what they can.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import re
import sys
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


def _subclasses(cls: type):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def event_class(kind: str, module: str | None = None) -> type | None:
    """The Event dataclass called ``kind`` (any imported subclass), or None.

    ``module`` is where the recorder found the class; a tdescope module named
    there is imported when the class is not loaded yet (e.g. ``HotspotLeaves``
    lives in ``tdescope.app.observe.sampling``, which a headless reader never imports).
    """
    if module and module.startswith("tdescope.app.") and module not in sys.modules:
        try:
            importlib.import_module(module)
        except ImportError:
            pass
    known = getattr(_events, kind, None)
    if isinstance(known, type) and dataclasses.is_dataclass(known):
        return known
    for cls in _subclasses(_events.Event):
        # slots=True dataclasses replace their class; the discarded one may linger among
        # the subclasses, so only accept the class its module actually exports
        module = sys.modules.get(cls.__module__)
        if cls.__name__ == kind and getattr(module, cls.__qualname__, None) is cls:
            return cls
    return None


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


def decode(kind: str, ts: float, payload: str | bytes, blobs: dict[str, bytes] | None = None,
           module: str | None = None):
    """Rebuild the event, or None when this version has no such kind or it no longer fits."""
    cls = event_class(kind, module)
    if cls is None:
        return None
    text = zlib.decompress(payload).decode() if isinstance(payload, bytes) else payload
    values = {k: _revive(v) for k, v in json.loads(text).items()}
    values["ts"] = ts
    values.update(blobs or {})
    try:
        return _build(cls, values)
    except TypeError:  # a required field is missing: written by an incompatible version
        return None
