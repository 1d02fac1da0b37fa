"""InnoDB COMPACT/DYNAMIC records decoded to column values, with the index's layout from the data dictionary.

A record's origin is preceded by its 5-byte header, then (going backwards) the
NULL bitmap of its nullable fields and the lengths of its variable-length fields,
in field order. The fields of a clustered index leaf are the primary key (or the
6-byte ``DB_ROW_ID``), ``DB_TRX_ID`` (6), ``DB_ROLL_PTR`` (7) and the other columns;
a secondary index leaf holds its columns and then the primary key; a node pointer
(level > 0) its key and a 4-byte child page number. A long value stored off-page
keeps a local prefix (768 bytes in COMPACT, none in DYNAMIC) and a 20-byte reference
to its first BLOB page; it is shown as that prefix, its whole length and that page.
Integers, DATE, YEAR, DATETIME(0), TIMESTAMP(0) (UTC), FLOAT and DOUBLE are decoded;
text in latin1 or UTF-8 (CHAR without its padding); other types as hex. The layout comes from
``information_schema.INNODB_SYS_INDEXES`` / ``_FIELDS`` / ``_COLUMNS``
(:func:`index_layouts`).
"""

from __future__ import annotations

import struct
import time
from dataclasses import dataclass

from tdescope.app.engines.api import DecodedField
from tdescope.plugins.mariadb.statements import DICTIONARY_COLUMNS, DICTIONARY_INDEXES

__all__ = ["BLOB_REF", "Column", "IndexLayout", "decode_record", "decode_redundant", "index_layouts"]

_VARCHAR, _CHAR, _FIXBINARY, _BINARY, _BLOB, _INT, _FLOAT, _DOUBLE, _VARMYSQL, _MYSQL = 1, 2, 3, 4, 5, 6, 9, 10, 12, 13
_NOT_NULL, _UNSIGNED = 256, 512
#: MySQL field types (``prtype & 0xFF``) stored in ways of their own.
_TIMESTAMP, _DATE, _YEAR, _DATETIME = 7, 10, 13, 12
#: Collation ids (MariaDB 10.11) of the character sets whose characters all take the same bytes: the 26
#: single-byte ones (latin1, cp1250, koi8r, ascii, binary...), ucs2 and utf32. InnoDB stores their CHAR
#: columns at full length; in any other charset a CHAR is variable-length (mbminlen != mbmaxlen).
_ONE_WIDTH = frozenset({
    *range(2, 12), *range(14, 17), 18, *range(20, 24), *range(25, 28), *range(29, 33), *range(34, 45),
    *range(47, 54), *range(57, 62), *range(63, 76), *range(77, 83), 89, 90, *range(92, 95), 99, *range(128, 152),
    *range(159, 184), *range(640, 643), *range(736, 739), 1027, 1028, *range(1030, 1036), 1040, 1042, 1046,
    1049, 1050, 1054, 1056, *range(1059, 1066), 1067, 1071, 1074, 1075, 1077, *range(1081, 1086),
    *range(1088, 1100), *range(1101, 1107), 1113, 1114, 1116, 1117, 1152, 1174, 1184, 1206})
#: latin1's collation ids (with the NO PAD ones): text in those columns is decoded as latin1, the rest as UTF-8.
_LATIN1 = frozenset({5, 8, 15, 31, 47, 48, 49, 94, 1032, 1071})
#: ``prtype >> 16`` keeps the whole collation id in these bits (InnoDB's CHAR_COLL_MASK).
_COLLATION_MASK = 0x7FFF
_BINARY_COLLATION = 63
#: A field stored off-page leaves a 20-byte reference at the end of its local part: space id, page
#: number, offset, and an 8-byte length whose top bits are flags.
BLOB_REF = 20


@dataclass(frozen=True, slots=True)
class Column:
    """One field of an index record: its name and InnoDB type (``mtype``, ``prtype``, ``len``)."""

    name: str
    mtype: int
    prtype: int
    length: int

    @property
    def nullable(self) -> bool:
        return not self.prtype & _NOT_NULL

    @property
    def variable(self) -> bool:
        if self.mtype in (_VARCHAR, _BINARY, _BLOB, _VARMYSQL):
            return True
        return self.mtype == _MYSQL and self.collation not in _ONE_WIDTH

    @property
    def collation(self) -> int:
        """The collation id, for a text column (``information_schema.COLLATIONS.ID``)."""
        return (self.prtype >> 16) & _COLLATION_MASK

    @property
    def wide(self) -> bool:
        """Its length may take two bytes in the record header."""
        return self.length > 255 or self.mtype == _BLOB


_ROW_ID = Column("DB_ROW_ID", _FIXBINARY, _NOT_NULL, 6)
_TRX_ID = Column("DB_TRX_ID", _FIXBINARY, _NOT_NULL, 6)
_ROLL_PTR = Column("DB_ROLL_PTR", _FIXBINARY, _NOT_NULL, 7)
_CHILD = Column("child page", _INT, _NOT_NULL | _UNSIGNED, 4)


@dataclass(frozen=True, slots=True)
class IndexLayout:
    """The fields of one index's records: ``leaf`` (level 0) and ``node`` (node pointers, before the child)."""

    table: str
    index: str
    leaf: tuple[Column, ...]
    node: tuple[Column, ...]


def layouts_to_json(layouts: dict[int, IndexLayout]) -> dict:
    """index id -> layout as JSON data (what a recording keeps so that a report decodes records too)."""
    def cols(cs):
        return [[c.name, c.mtype, c.prtype, c.length] for c in cs]

    return {str(i): {"table": lay.table, "index": lay.index, "leaf": cols(lay.leaf), "node": cols(lay.node)}
            for i, lay in layouts.items()}


def layouts_from_json(data: dict) -> dict[int, IndexLayout]:
    """Inverse of :func:`layouts_to_json`; entries it cannot read are left out."""
    out: dict[int, IndexLayout] = {}
    for key, lay in (data or {}).items():
        try:
            out[int(key)] = IndexLayout(str(lay["table"]), str(lay["index"]),
                                        tuple(Column(str(n), int(m), int(p), int(ln)) for n, m, p, ln in lay["leaf"]),
                                        tuple(Column(str(n), int(m), int(p), int(ln)) for n, m, p, ln in lay["node"]))
        except (KeyError, TypeError, ValueError):
            continue
    return out


def index_layouts(conn) -> dict[int, IndexLayout]:
    """index id -> layout, for every user table's indexes (from the data dictionary views)."""
    cur = conn.cursor()
    cur.execute(DICTIONARY_COLUMNS)
    columns: dict[int, list[Column]] = {}
    names: dict[int, str] = {}
    for table_id, table, name, _pos, mtype, prtype, length in cur.fetchall():
        names[table_id] = table
        columns.setdefault(table_id, []).append(Column(name, mtype, prtype, length))
    cur.execute(DICTIONARY_INDEXES)
    indexes: dict[int, tuple[int, str, int, list[str]]] = {}
    for index_id, table_id, name, itype, field in cur.fetchall():
        entry = indexes.setdefault(index_id, (table_id, name, itype, []))
        if field is not None:
            entry[3].append(field)
    clustered_keys = {t: fields for _i, (t, _n, itype, fields) in indexes.items() if itype & 1}
    out: dict[int, IndexLayout] = {}
    for index_id, (table_id, name, itype, fields) in indexes.items():
        cols = {c.name: c for c in columns.get(table_id, [])}
        if not cols:
            continue
        pk = [cols[f] for f in clustered_keys.get(table_id, []) if f in cols] or [_ROW_ID]
        if itype & 1:  # clustered
            rest = [c for c in columns[table_id] if c not in pk]
            leaf, node = (*pk, _TRX_ID, _ROLL_PTR, *rest), tuple(pk)
        else:
            own = [cols[f] for f in fields if f in cols]
            key = own + [c for c in pk if c not in own]
            leaf, node = tuple(key), tuple(key)
        out[int(index_id)] = IndexLayout(names[table_id], name, leaf, node)
    return out


def _value(col: Column, raw: bytes) -> str:
    kind = col.prtype & 0xFF
    if col.mtype == _INT and len(raw) in (1, 2, 3, 4, 8):
        n = int.from_bytes(raw, "big")
        if not col.prtype & _UNSIGNED:
            n -= 1 << (8 * len(raw) - 1)  # InnoDB flips the sign bit so integers sort as bytes
        if kind == _DATE and len(raw) == 3:
            return f"{n >> 9:04d}-{(n >> 5) & 0xF:02d}-{n & 0x1F:02d}"
        if kind == _YEAR and len(raw) == 1:
            return f"{1900 + n:04d}" if n else "0000"
        return str(n)
    if col.mtype == _FIXBINARY and col.length == 5 and kind == _DATETIME:
        return _datetime(raw)
    if col.mtype == _FIXBINARY and col.length == 4 and kind == _TIMESTAMP:
        seconds = int.from_bytes(raw, "big")  # seconds since 1970, UTC
        return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))
    if col.mtype in (_FLOAT, _DOUBLE) and len(raw) in (4, 8):
        return repr(struct.unpack("<f" if len(raw) == 4 else "<d", raw)[0])  # machine order, not sortable
    collation = col.collation
    text_blob = col.mtype == _BLOB and collation not in (0, _BINARY_COLLATION)  # TEXT, not BLOB
    if col.mtype in (_VARCHAR, _CHAR, _VARMYSQL, _MYSQL) or text_blob:
        text = raw.decode("latin-1" if collation in _LATIN1 else "utf-8", errors="replace")
        return text.rstrip(" ") if col.mtype in (_CHAR, _MYSQL) else text  # CHAR is padded, VARCHAR kept as is
    if col.name in ("DB_TRX_ID", "DB_ROW_ID"):
        return str(int.from_bytes(raw, "big"))
    return raw.hex()


def _off_page(col: Column, local: bytes) -> str:
    """A field stored off-page: its local prefix (COMPACT keeps 768 bytes, DYNAMIC none), its whole
    length and the first page of its chain, from the 20-byte reference at the end."""
    prefix, ref = local[:-BLOB_REF], local[-BLOB_REF:]
    page = int.from_bytes(ref[4:8], "big")
    total = len(prefix) + (int.from_bytes(ref[12:20], "big") & 0x3FFFFFFFFFFFFFFF)
    shown = _value(col, prefix) + " " if prefix else ""
    return f"{shown}({total} bytes, off-page from page {page})"


def _datetime(raw: bytes) -> str:
    """MariaDB's DATETIME(0) in the MySQL 5.6 packed format."""
    v = int.from_bytes(raw, "big") - (1 << 39)
    ymd, hms = v >> 17, v & 0x1FFFF
    year, month = divmod(ymd >> 5, 13)
    day = ymd & 0x1F
    hour, minute, second = hms >> 12, (hms >> 6) & 0x3F, hms & 0x3F
    return f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}"


def decode_record(data: bytes, origin: int, layout: IndexLayout, leaf: bool) -> tuple[list[DecodedField], tuple]:
    """The fields of the record at ``origin`` (children with spans) and its values; raises ValueError
    when the header does not fit the layout (then the caller shows the raw bytes)."""
    cols = layout.leaf if leaf else (*layout.node, _CHILD)
    nullable = [c for c in cols if c.nullable]
    pos = origin - 5  # the header's first byte
    null_bytes = (len(nullable) + 7) // 8
    bitmap = int.from_bytes(data[pos - null_bytes:pos][::-1], "little") if null_bytes else 0
    pos -= null_bytes
    nulls, i = set(), 0
    for c in cols:
        if c.nullable:
            if bitmap >> i & 1:
                nulls.add(c.name)
            i += 1
    fields, values, at = [], [], origin
    for c in cols:
        if c.name in nulls:
            fields.append(DecodedField(c.name, at, at, "NULL"))
            values.append(None)
            continue
        external = False
        if c.variable:
            pos -= 1
            size = data[pos]
            if c.wide and size & 0x80:
                pos -= 1
                external = bool(size & 0x40)
                size = ((size & 0x3F) << 8) | data[pos]
        else:
            size = c.length
        if at + size > len(data) - 8:
            raise ValueError("field runs past the page")
        if external and size < BLOB_REF:
            raise ValueError(f"off-page field {c.name} with {size} local bytes")
        raw = data[at:at + size]
        shown = _off_page(c, raw) if external else _value(c, raw)
        fields.append(DecodedField(c.name, at, at + size, shown))
        values.append(shown)
        at += size
    return fields, tuple(values)


def decode_redundant(data: bytes, origin: int, layout: IndexLayout | None,
                     leaf: bool) -> tuple[list[DecodedField], tuple, int]:
    """A REDUNDANT (old-format) record at ``origin``: its fields from the end-offset array before its
    6-byte header, named and decoded by ``layout`` when it fits (else ``field 1``, ``field 2``... as
    text); returns the fields, the values and the record's end. Raises ValueError on offsets that do
    not fit the page."""
    n_fields = (int.from_bytes(data[origin - 4:origin - 2], "big") >> 1) & 0x3FF
    one_byte = data[origin - 4 + 1] & 1
    cols = None
    if layout is not None:
        cols = layout.leaf if leaf else (*layout.node, _CHILD)
        if len(cols) != n_fields:
            cols = None  # an instant ALTER or a layout from another time: show the fields unnamed
    width = 1 if one_byte else 2
    fields, values, start = [], [], origin
    for i in range(n_fields):
        pos = origin - 6 - width * (i + 1)
        raw_end = data[pos] if one_byte else int.from_bytes(data[pos:pos + 2], "big")
        null = bool(raw_end & (0x80 if one_byte else 0x8000))
        end = origin + (raw_end & (0x7F if one_byte else 0x3FFF))
        if end < start or end > len(data) - 8 or pos < 0:
            raise ValueError(f"field {i + 1} ends at 0x{end:04x}, outside the record")
        name = cols[i].name if cols else f"field {i + 1}"
        raw = data[start:end]
        if null:
            shown = "NULL"
        elif cols:
            shown = _value(cols[i], raw)
        else:
            shown = "".join(chr(b) if 32 <= b < 127 else "." for b in raw[:40])
        fields.append(DecodedField(name, start, end, shown))
        values.append(None if null else shown)
        start = end
    return fields, tuple(values), start
