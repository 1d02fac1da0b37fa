"""SQLite varints, record format and payload spill rules (https://www.sqlite.org/fileformat2.html).

Used by :mod:`tdescope.plugins.sqlcipher.pages`. Every reader takes an explicit
``end`` bound and raises :class:`OffPage` instead of reading past it, so a page
of garbage yields problems, never an IndexError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tdescope.app.engines.api import DecodedField

__all__ = [
    "CUT_MARK",
    "OVERFLOW_MARK",
    "OffPage",
    "RecordResult",
    "decode_record",
    "format_value",
    "local_payload_size",
    "read_varint",
    "serial_type_name",
    "serial_type_size",
    "signed64",
]

#: Appended to a value (or standing in for one) whose bytes live on overflow pages.
OVERFLOW_MARK = "…(overflow)"
#: Appended to a value whose bytes lie past the end of a truncated capture (not on overflow pages).
CUT_MARK = "…(capture ends)"

_BLOB_SHOWN = 32  # bytes of a BLOB shown in a field value before eliding


class OffPage(Exception):
    """A read would run past the bytes available; ``str()`` says where."""


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """Read an SQLite varint (1-9 bytes, big-endian, 7 bits per byte, the 9th byte 8 bits).

    Parameters
    ----------
    buf : bytes
        The page.
    pos : int
        Offset of the first byte.
    end : int
        Bytes at or past ``end`` may not be read.

    Returns
    -------
    tuple of int
        ``(value, next_pos)``; the value as the unsigned 64-bit integer it encodes
        (rowids are signed: see :func:`signed64`).

    Raises
    ------
    OffPage
        When the varint is not complete before ``end``.
    """
    value = 0
    for i in range(9):
        if pos + i >= end:
            raise OffPage(f"varint at offset {pos} runs past offset {end}")
        b = buf[pos + i]
        if i == 8:
            return (value << 8) | b, pos + 9
        value = (value << 7) | (b & 0x7F)
        if b < 0x80:
            return value, pos + i + 1
    raise AssertionError("unreachable")  # pragma: no cover


def signed64(v: int) -> int:
    """Reinterpret an unsigned 64-bit varint value as two's complement (rowids may be negative)."""
    return v - (1 << 64) if v >= 1 << 63 else v


def serial_type_size(t: int) -> int | None:
    """Bytes a value of serial type ``t`` occupies in the record body; None for reserved 10 and 11."""
    if t >= 12:
        return (t - 12) // 2 if t % 2 == 0 else (t - 13) // 2
    return (0, 1, 2, 3, 4, 6, 8, 8, 0, 0, None, None)[t]


def serial_type_name(t: int) -> str:
    """Human name of serial type ``t``: ``NULL``, ``INT16``, ``FLOAT64``, ``TEXT(100)``..."""
    if t >= 12:
        return f"BLOB({(t - 12) // 2})" if t % 2 == 0 else f"TEXT({(t - 13) // 2})"
    return ("NULL", "INT8", "INT16", "INT24", "INT32", "INT48", "INT64", "FLOAT64",
            "0", "1", "reserved(10)", "reserved(11)")[t]


def local_payload_size(payload: int, usable: int, table_leaf: bool) -> int:
    """How many payload bytes a cell keeps on its b-tree page; the rest spills to overflow pages.

    Parameters
    ----------
    payload : int
        Total payload size P from the cell.
    usable : int
        Usable page size U (page size minus reserved bytes).
    table_leaf : bool
        True for table b-tree leaf cells (X = U-35); index cells use
        X = ((U-12)*64/255)-23.

    Returns
    -------
    int
        P when it fits, else K = M+((P-M) mod (U-4)) when K <= X, else M, with
        M = ((U-12)*32/255)-23, as the file format specifies.
    """
    x = usable - 35 if table_leaf else (usable - 12) * 64 // 255 - 23
    if payload <= x:
        return payload
    m = (usable - 12) * 32 // 255 - 23
    if usable <= 4 or m < 0:  # nonsense geometry: keep what is readable, let bounds checks talk
        return payload
    k = m + (payload - m) % (usable - 4)
    return k if k <= x else m


def format_value(v) -> str:
    """Display text of a decoded column value: ``NULL``, ``42``, ``1.5``, ``'text'``, ``x'00ff'``."""
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        shown = v[:_BLOB_SHOWN].hex()
        return f"x'{shown}'" + (f"… ({len(v)} bytes)" if len(v) > _BLOB_SHOWN else "")
    if isinstance(v, str):
        return repr(v)
    return repr(v) if isinstance(v, float) else str(v)


@dataclass
class RecordResult:
    """What :func:`decode_record` found.

    Attributes
    ----------
    fields : list of DecodedField
        The record header group, then one field per column present on the page.
    values : list
        Column values: None, int, float, str or bytes. A value cut by the
        overflow boundary is a ``str`` ending in :data:`OVERFLOW_MARK` (the
        local text, or ``x'hex'`` of the local bytes); a value entirely on
        overflow pages is :data:`OVERFLOW_MARK` alone.
    problems : list of str
        Inconsistencies (header size, serial types, lengths).
    """

    fields: list[DecodedField] = field(default_factory=list)
    values: list = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _value(buf: bytes, t: int, pos: int, size: int, encoding: str):
    raw = buf[pos:pos + size]
    if t in (1, 2, 3, 4, 5, 6):
        return int.from_bytes(raw, "big", signed=True)
    if t == 7:
        return struct.unpack(">d", raw)[0]
    if t in (8, 9):
        return t - 8
    if t == 0:
        return None
    return bytes(raw) if t % 2 == 0 else bytes(raw).decode(encoding, errors="replace")


def decode_record(buf: bytes, start: int, local_end: int, payload: int, encoding: str = "utf-8",
                  cut: bool = False) -> RecordResult:
    """Decode one record (header, serial types, values) from a cell payload.

    Parameters
    ----------
    buf : bytes
        The page.
    start : int
        Offset of the payload (the record header size varint).
    local_end : int
        End of the payload bytes on this page (start + local size, clamped to
        the bytes available). Beyond it the record continues on overflow pages.
    payload : int
        Total payload size declared by the cell.
    encoding : str, optional
        Python codec for TEXT values, from the database header's text encoding.
    cut : bool, optional
        True when ``local_end`` is the end of a truncated capture rather than the
        overflow boundary: values it cuts are marked with :data:`CUT_MARK`.

    Returns
    -------
    RecordResult
        Fields with spans inside ``[start, local_end)``.
    """
    res = RecordResult()
    spilled = local_end - start < payload
    mark = CUT_MARK if cut else OVERFLOW_MARK
    try:
        hdr_size, pos = read_varint(buf, start, local_end)
    except OffPage as exc:
        res.problems.append(f"record header size: {exc}")
        return res
    hdr_children = [DecodedField("header size", start, pos, str(hdr_size))]
    if hdr_size < pos - start or hdr_size > payload:
        res.problems.append(f"record header size {hdr_size} does not fit a payload of {payload} bytes")
        res.fields.append(DecodedField("record header", start, pos, "", tuple(hdr_children)))
        return res
    hdr_end = start + hdr_size
    types: list[int] = []
    while pos < min(hdr_end, local_end):
        try:
            t, nxt = read_varint(buf, pos, min(hdr_end, local_end))
        except OffPage as exc:
            if not spilled or hdr_end <= local_end:
                res.problems.append(f"serial type: {exc}")
            break
        hdr_children.append(DecodedField(f"serial type {len(types)}", pos, nxt, f"{t} ({serial_type_name(t)})"))
        types.append(t)
        pos = nxt
    res.fields.append(DecodedField("record header", start, min(hdr_end, local_end),
                                   f"{len(types)} columns", tuple(hdr_children)))
    if hdr_end > local_end:  # header itself spills: the column values all live on overflow pages
        res.values = [mark] * len(types)
        return res
    sizes = [serial_type_size(t) for t in types]
    if None in sizes:
        res.problems.append(f"reserved serial type {types[sizes.index(None)]} in column {sizes.index(None)}")
        return res
    body = sum(sizes)
    if hdr_size + body != payload:
        res.problems.append(f"record is {hdr_size + body} bytes but the cell says payload {payload}")
    pos = hdr_end
    for i, (t, size) in enumerate(zip(types, sizes)):
        name = f"column {i} ({serial_type_name(t)})"
        if pos + size <= local_end:
            v = _value(buf, t, pos, size, encoding)
            res.fields.append(DecodedField(name, pos, pos + size, format_value(v)))
        elif spilled and pos < local_end:
            part = bytes(buf[pos:local_end])
            if t >= 13 and t % 2:
                text = part.decode(encoding, errors="replace")
                v, shown = text + mark, repr(text) + mark
            else:  # a BLOB (or, oddly, a number) cut by the spill point: show the local bytes
                v = shown = f"x'{part.hex()}'{mark}"
            res.fields.append(DecodedField(name, pos, local_end, shown))
        elif spilled:
            v = mark
        else:
            res.problems.append(f"column {i} runs past the end of its payload")
            break
        res.values.append(v)
        pos += size
    return res
