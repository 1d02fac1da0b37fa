"""Heap tuple headers and attribute values (src/include/access/htup_details.h, varatt.h).

Used by :mod:`tdescope.plugins.postgres.pages`. Every reader is bounded by the
tuple's end and reports problems instead of raising, so a page of garbage
yields problems, never an IndexError.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tdescope.app.engines.api import DecodedField

__all__ = ["PgColumn", "TupleResult", "decode_tuple", "infomask_flags", "infomask2_flags"]

_HEADER = struct.Struct("<IIIHHHHHB")  # xmin xmax cid ctid(bi_hi bi_lo posid) infomask2 infomask hoff
HEADER_SIZE = 23
_BYTES_SHOWN = 32

_INFOMASK = (
    (0x0001, "HASNULL"), (0x0002, "HASVARWIDTH"), (0x0004, "HASEXTERNAL"), (0x0008, "HASOID_OLD"),
    (0x0010, "XMAX_KEYSHR_LOCK"), (0x0020, "COMBOCID"), (0x0040, "XMAX_EXCL_LOCK"), (0x0080, "XMAX_LOCK_ONLY"),
    (0x0100, "XMIN_COMMITTED"), (0x0200, "XMIN_INVALID"), (0x0400, "XMAX_COMMITTED"), (0x0800, "XMAX_INVALID"),
    (0x1000, "XMAX_IS_MULTI"), (0x2000, "UPDATED"), (0x4000, "MOVED_OFF"), (0x8000, "MOVED_IN"),
)
_INFOMASK2 = ((0x2000, "KEYS_UPDATED"), (0x4000, "HOT_UPDATED"), (0x8000, "ONLY_TUPLE"))
_ALIGN = {"c": 1, "s": 2, "i": 4, "d": 8}
_FIXED = {"int2": "<h", "int4": "<i", "int8": "<q", "oid": "<I", "xid": "<I", "float4": "<f", "float8": "<d",
          "bool": "<?"}
_TEXT = {"text", "varchar", "bpchar", "json", "xml"}
_COMPRESSION = {0: "pglz", 1: "lz4"}  # the top two bits of va_tcinfo / va_extinfo
_EXTERNAL = struct.Struct("<iIII")  # varatt_external: va_rawsize va_extinfo va_valueid va_toastrelid


@dataclass(frozen=True, slots=True)
class PgColumn:
    """One column of a relation as pg_attribute describes it (attnum order, dropped ones included).

    Attributes
    ----------
    name : str
        attname.
    typname : str
        The type's name (``int4``, ``text``, ``bytea``...).
    typlen : int
        Bytes for fixed-width types; -1 varlena, -2 cstring.
    typalign : str
        ``c``, ``s``, ``i`` or ``d``.
    """

    name: str
    typname: str
    typlen: int
    typalign: str = "i"


@dataclass
class TupleResult:
    """What :func:`decode_tuple` found: fields with spans, column values, problems."""

    fields: list[DecodedField] = field(default_factory=list)
    values: list = field(default_factory=list)
    natts: int = 0
    problems: list[str] = field(default_factory=list)


def infomask_flags(mask: int) -> list[str]:
    """Names of the t_infomask bits set in ``mask``."""
    return [name for bit, name in _INFOMASK if mask & bit]


def infomask2_flags(mask: int) -> list[str]:
    """Names of the t_infomask2 flag bits set in ``mask`` (the low 11 bits are natts)."""
    return [name for bit, name in _INFOMASK2 if mask & bit]


def _align(pos: int, base: int, alignment: int) -> int:
    off = pos - base
    return base + (off + alignment - 1) // alignment * alignment


def _show(raw: bytes, col: PgColumn):
    if col.typname == "name":  # fixed 64 bytes, NUL-padded
        return raw.split(b"\x00", 1)[0].decode("utf-8", errors="replace")
    if col.typname == "char":  # the one-byte "char"
        return raw.decode("latin-1")
    if col.typname in _TEXT:
        return raw.decode("utf-8", errors="replace")
    if col.typname in _FIXED and struct.calcsize(_FIXED[col.typname]) == len(raw):
        return struct.unpack(_FIXED[col.typname], raw)[0]
    return bytes(raw)


def format_value(v) -> str:
    """Display text of a column value: ``NULL``, ``42``, ``'text'``, ``\\x0102…``."""
    if v is None:
        return "NULL"
    if isinstance(v, bytes):
        return "\\x" + v[:_BYTES_SHOWN].hex() + (f"… ({len(v)} bytes)" if len(v) > _BYTES_SHOWN else "")
    return repr(v) if isinstance(v, str) else str(v)


def _varlena(page: bytes, pos: int, end: int) -> tuple[int, int, str]:
    """(total size, header size, kind) of the varlena at ``pos``.

    ``kind`` is ``short`` or ``4-byte`` for a plain value; otherwise the text shown
    after the value: where a TOAST pointer points, or how an inline value is compressed.
    """
    first = page[pos]
    if first == 0x01:  # 1-byte header, external (TOAST pointer): tag then the pointer
        if pos + 2 > end:
            raise ValueError("TOAST pointer cut by the tuple end")
        tag = page[pos + 1]
        size = {18: 16, 1: 8, 2: 8, 3: 8}.get(tag)
        if size is None:
            raise ValueError(f"unknown TOAST tag {tag}")
        if tag != 18 or pos + 2 + size > end:
            return 2 + size, 2, "toast pointer"
        rawsize, extinfo, valueid, toastrelid = _EXTERNAL.unpack_from(page, pos + 2)
        extsize = extinfo & 0x3FFFFFFF
        how = (f"compressed {_COMPRESSION.get(extinfo >> 30, extinfo >> 30)}" if extsize < rawsize - 4
               else "uncompressed")
        return 2 + size, 2, (f"toast pointer: value {valueid} in toast relation {toastrelid}, {how}, "
                             f"raw size {rawsize - 4}, stored {extsize}")
    if first & 0x01:
        return (first >> 1) & 0x7F, 1, "short"
    if pos + 4 > end:
        raise ValueError("varlena header cut by the tuple end")
    word = struct.unpack_from("<I", page, pos)[0]
    if word & 0x03 != 0x02:
        return word >> 2, 4, "4-byte"
    if pos + 8 > end:
        return word >> 2, 4, "compressed"
    tcinfo = struct.unpack_from("<I", page, pos + 4)[0]
    method = _COMPRESSION.get(tcinfo >> 30, tcinfo >> 30)
    return word >> 2, 4, f"compressed {method}, raw size {tcinfo & 0x3FFFFFFF}"


def decode_tuple(page: bytes, start: int, length: int, columns: tuple[PgColumn, ...] | None) -> TupleResult:
    """Decode the heap tuple at ``page[start:start+length]``.

    Parameters
    ----------
    page : bytes
        The whole page.
    start, length : int
        From the line pointer (lp_off, lp_len).
    columns : tuple of PgColumn or None
        The relation's attributes in attnum order; None decodes the header only.
    """
    res = TupleResult()
    end = min(start + length, len(page))
    if end - start < HEADER_SIZE:
        res.problems.append(f"tuple at {start} is {end - start} bytes, shorter than a tuple header")
        return res
    xmin, xmax, cid, bi_hi, bi_lo, posid, mask2, mask, hoff = _HEADER.unpack_from(page, start)
    res.natts = mask2 & 0x07FF
    block = (bi_hi << 16) | bi_lo
    hdr = [
        DecodedField("t_xmin", start, start + 4, str(xmin)),
        DecodedField("t_xmax", start + 4, start + 8, str(xmax)),
        DecodedField("t_cid", start + 8, start + 12, str(cid)),
        DecodedField("t_ctid", start + 12, start + 18, f"({block},{posid})"),
        DecodedField("t_infomask2", start + 18, start + 20,
                     f"natts {res.natts}" + "".join(" " + f for f in infomask2_flags(mask2))),
        DecodedField("t_infomask", start + 20, start + 22, f"0x{mask:04x} " + "|".join(infomask_flags(mask))),
        DecodedField("t_hoff", start + 22, start + 23, str(hoff)),
    ]
    nulls: list[bool] = []
    if mask & 0x0001:
        nbytes = (res.natts + 7) // 8
        bits = page[start + 23:start + 23 + nbytes]
        nulls = [not (bits[i // 8] >> (i % 8)) & 1 if i // 8 < len(bits) else False for i in range(res.natts)]
        hdr.append(DecodedField("t_bits", start + 23, start + 23 + nbytes,
                                "".join("0" if n else "1" for n in nulls) + " (1 = not null)"))
    if hoff < HEADER_SIZE or start + hoff > end:
        res.problems.append(f"t_hoff {hoff} outside the tuple at {start}")
        res.fields.append(DecodedField("tuple header", start, start + HEADER_SIZE, "", tuple(hdr)))
        return res
    res.fields.append(DecodedField("tuple header", start, start + hoff, "", tuple(hdr)))
    if columns is None:
        return res
    data = start + hoff
    pos = data
    for i in range(res.natts):
        if i >= len(columns):
            res.problems.append(f"tuple has {res.natts} attributes, the relation {len(columns)}")
            break
        col = columns[i]
        if nulls and nulls[i]:
            res.values.append(None)
            continue
        try:
            if col.typlen == -1:
                if pos < end and page[pos] == 0:
                    pos = _align(pos, data, _ALIGN.get(col.typalign, 4))  # padding before a 4-byte header
                if pos >= end:
                    raise ValueError("runs past the tuple end")
                size, head, kind = _varlena(page, pos, end)
                if size < head or pos + size > end:
                    raise ValueError(f"varlena of {size} bytes runs past the tuple end")
                raw = page[pos + head:pos + size]
                value = raw if kind != "short" and kind != "4-byte" else _show(raw, col)
                label = f"{format_value(value)}" + ("" if kind in ("short", "4-byte") else f" [{kind}]")
            elif col.typlen == -2:
                nul = page.find(b"\x00", pos, end)
                if nul < 0:
                    raise ValueError("cstring without its terminating zero")
                size = nul + 1 - pos
                value = page[pos:nul].decode("utf-8", errors="replace")
                label = format_value(value)
            else:
                pos = _align(pos, data, _ALIGN.get(col.typalign, 1))
                size = col.typlen
                if pos + size > end:
                    raise ValueError("runs past the tuple end")
                value = _show(page[pos:pos + size], col)
                label = format_value(value)
        except ValueError as exc:
            res.problems.append(f"column {col.name} of the tuple at {start}: {exc}")
            break
        res.values.append(value)
        res.fields.append(DecodedField(f"{col.name} ({col.typname})", pos, pos + size, label))
        pos += size
    return res
