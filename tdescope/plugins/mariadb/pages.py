"""InnoDB pages decoded into fields with byte spans: FIL header and trailer, INDEX header, records.

What a captured page shows, by offset (MariaDB 10.11, 16 KiB pages):

- FIL header (0-37): checksum or key version (0-3), page number (4), previous and
  next page (8, 12), LSN (16), page type (24), flush LSN or key version (26),
  space id (34). Encryption leaves bytes 0-25 clear and encrypts 26..size-5
  (``full_crc32``, the default) or 38..size-9 (the old format); the trailer is clear.
- INDEX pages (type 17855): the page header (38-93: directory slots, heap top,
  record count, level, index id...), the infimum and supremum records, and the
  user records in COMPACT/DYNAMIC format, walked through their next-record
  offsets from the infimum; each record's 5-byte header (deleted flag, owned
  count, heap number, type) and its bytes.
- Other page types are named (FSP_HDR, XDES, INODE, UNDO, BLOB, ...); an all-zero
  page is ALLOCATED. A page-compressed page is recognised and its zlib stream
  inflated when it can be: in ``full_crc32`` only bytes 0-25 are clear and the
  stream (from byte 26) is the whole page, which is decoded in turn (its space id,
  records and cell count are the page's).

The decoder never raises on bad bytes: what does not decode is a problem.
"""

from __future__ import annotations

import struct
import time
import zlib

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.app.probe.entropy import shannon_entropy
from tdescope.plugins.mariadb.records import decode_record, decode_redundant

__all__ = ["PAGE_TYPES", "InnoDbPageDecoder"]

PAGE_TYPES = {
    0: "ALLOCATED", 2: "UNDO_LOG", 3: "INODE", 4: "IBUF_FREE_LIST", 5: "IBUF_BITMAP", 6: "SYS", 7: "TRX_SYS",
    8: "FSP_HDR", 9: "XDES", 10: "BLOB", 11: "ZBLOB", 12: "ZBLOB2", 18: "INSTANT", 17853: "RTREE",
    17854: "RTREE", 17855: "INDEX", 34354: "PAGE_COMPRESSED", 37401: "PAGE_COMPRESSED_ENCRYPTED",
}
INDEX = 17855
#: full_crc32 page_compressed pages: bit 15 of the page type set, bits 0-7 the stored size / 256.
FCRC32_COMPRESSED = 0x8000
#: Seconds between reloads of the index layouts for pages of one unknown index.
RELOAD_S = 2.0
#: Bits per byte above which the page body is ciphertext (a decrypted INDEX page is far below).
ENCRYPTED_BITS = 7.5
FIL_HEADER, PAGE_HEADER_END = 38, 94
INFIMUM, SUPREMUM = 99, 112  # record origins on a COMPACT page
OLD_INFIMUM, OLD_SUPREMUM = 101, 116  # and on a REDUNDANT one
#: Index ids from here up are the change buffer's (insert buffer) tree of space ``id - IBUF_ID_MIN``.
IBUF_ID_MIN = 0xFFFFFFFF00000000


def index_name(index_id: int) -> str:
    """``index 73``, or what an index id from InnoDB's reserved range is (never a bare 2^64 number)."""
    if index_id >= IBUF_ID_MIN:
        return f"the change buffer of space {index_id - IBUF_ID_MIN}"
    return f"index {index_id}"


def _qualified(type_name: str, space: int, index_id: int) -> str:
    """An INDEX page's type, qualified when it does not hold a user table's rows: the change buffer,
    or the system tablespace (the data dictionary, space 0)."""
    if index_id >= IBUF_ID_MIN:
        return f"{type_name} (change buffer)"
    return f"{type_name} (system)" if space == 0 else type_name
_FIL = struct.Struct(">IIIIQHQI")
_INDEX_HEADER = struct.Struct(">HHHHHHHHHQHQ")


def _field(name: str, start: int, end: int, value) -> DecodedField:
    return DecodedField(name, start, end, str(value))


class InnoDbPageDecoder:
    """Decodes one InnoDB page (any size from 4 to 64 KiB).

    Parameters
    ----------
    layouts : dict, optional
        index id -> :class:`~tdescope.plugins.mariadb.records.IndexLayout` (from the server's data
        dictionary, ``records.index_layouts``): records of those indexes are decoded to column values.
    loader : callable, optional
        Returns fresh layouts; called (at most every :data:`RELOAD_S`) for a page of an unknown index.
    """

    def __init__(self, layouts=None, loader=None) -> None:
        self.layouts = dict(layouts or {})
        self._loader = loader
        self._asked: dict[int, float] = {}  # unknown index id -> when the dictionary was last read for it

    def _layouts_for(self, index_id: int) -> dict:
        # Throttled per index: a table a lesson dropped and created again has a new index id, learnt at
        # its first page, however recently another unknown index (a dictionary table's) made us read.
        if index_id not in self.layouts and self._loader is not None and index_id < IBUF_ID_MIN \
                and time.monotonic() - self._asked.get(index_id, -RELOAD_S) >= RELOAD_S:
            self._asked[index_id] = time.monotonic()
            try:
                self.layouts = dict(self._loader())
            except Exception:  # noqa: BLE001 - the server went away: records stay undecoded
                pass
        return self.layouts

    def catalog(self) -> dict:
        """The index layouts known now (read from the server first when none is), as JSON data."""
        if not self.layouts and self._loader is not None:
            try:
                self.layouts = dict(self._loader())
            except Exception:  # noqa: BLE001 - the server went away: nothing to keep
                pass
        from tdescope.plugins.mariadb.records import layouts_to_json

        return {"layouts": layouts_to_json(self.layouts)} if self.layouts else {}

    def decode(self, data: bytes, pgno: int = -1, context=None) -> DecodedPage:
        """Structure of ``data``; problems instead of exceptions."""
        size = len(data)
        if size < FIL_HEADER + 8:
            return DecodedPage("unknown", problems=(f"{size} bytes: too short for an InnoDB page",))
        checksum, page_no, prev, nxt, lsn, ptype, flush, space = _FIL.unpack_from(data, 0)
        type_name = PAGE_TYPES.get(ptype, f"type {ptype}")
        if ptype & FCRC32_COMPRESSED and ptype not in PAGE_TYPES:
            type_name = "PAGE_COMPRESSED"  # full_crc32: the marker bit, and the stored size / 256 below it
        children = (
            _field("checksum or key version", 0, 4, f"0x{checksum:08x}"),
            _field("page number", 4, 8, page_no),
            _field("previous page", 8, 12, _page_ref(prev)),
            _field("next page", 12, 16, _page_ref(nxt)),
            _field("LSN", 16, 24, lsn),
            _field("page type", 24, 26, f"{type_name} ({ptype})"),
            _field("flush LSN or key version", 26, 34, flush),
            _field("space id", 34, 38, space),
        )
        trailer = DecodedField("FIL trailer", size - 4, size, "CRC-32C (full_crc32) or the old format's LSN low half",
                               (_field("checksum / LSN", size - 4, size, f"0x{data[-4:].hex()}"),))
        if ptype & FCRC32_COMPRESSED and ptype not in PAGE_TYPES:  # (a type with that bit is never all zeros)
            return self._fcrc32_compressed(data, pgno, children[:6], trailer)
        fil = DecodedField("FIL header", 0, FIL_HEADER, f"{type_name}, page {page_no}, space {space}", children)
        if not any(data):
            return DecodedPage("ALLOCATED", (fil, trailer))  # never written (page number 0 included)
        problems: list[str] = []
        if 0 <= pgno != page_no:
            problems.append(f"page number {page_no} in the header, {pgno} from the probe: still encrypted?")
        if ptype not in PAGE_TYPES:
            problems.append(f"unknown page type {ptype}: encrypted bytes, or not an InnoDB page")
        fields = [fil]
        cells, records = 0, ()
        body_bits = shannon_entropy(data[FIL_HEADER:size - 8])
        if body_bits > ENCRYPTED_BITS:
            # only bytes 0-25 are clear: the page number and type are real, the rest is ciphertext
            fil = DecodedField("FIL header (clear part)", 0, 26, f"{type_name}, page {page_no}", fil.children[:6])
            body = DecodedField("encrypted", 26, size - 4, f"{size - 30} bytes, {body_bits:.2f} bits/byte")
            return DecodedPage("encrypted", (fil, body, trailer))
        if ptype == INDEX:
            index_id = struct.unpack_from(">Q", data, 66)[0]
            index_fields, cells, records, more = _index_page(data, self._layouts_for(index_id))
            fields.extend(index_fields)
            problems.extend(more)
            type_name = _qualified(type_name, space, index_id)
        elif ptype in (34354, 37401):
            fields.append(_compressed(data, FIL_HEADER + 2, problems))
        fields.append(trailer)
        return DecodedPage(type_name, tuple(fields), cells, records, tuple(problems), space)

    def _fcrc32_compressed(self, data: bytes, pgno: int, clear_fields: tuple, trailer: DecodedField) -> DecodedPage:
        """A full_crc32 page_compressed page: bytes 0-25 clear (``clear_fields``, the FIL header's first six),
        then a zlib stream of the whole page as the server had it (the page type's low byte is the stored
        size / 256). The inflated page is decoded; its records, cell count and space id are the page's."""
        size = len(data)
        stored = (struct.unpack_from(">H", data, 24)[0] & 0xFF) << 8
        end = stored if 26 < stored <= size else size
        page_no = struct.unpack_from(">I", data, 4)[0]
        clear = DecodedField("FIL header (clear part)", 0, 26, f"PAGE_COMPRESSED, page {page_no}", clear_fields)
        try:
            inflated = zlib.decompressobj().decompress(data[26:end])
        except zlib.error:
            inflated = b""
        if len(inflated) != size:
            bits = shannon_entropy(data[26:end])
            payload = DecodedField("compressed payload", 26, end, f"{end - 26} bytes stored, {bits:.2f} bits/byte")
            return DecodedPage("PAGE_COMPRESSED", (clear, payload, trailer), problems=(
                "page-compressed payload that does not inflate to a page with zlib (another algorithm, or still "
                "encrypted)",))
        inner = self.decode(inflated, pgno)
        summary = "; ".join(f.value for f in inner.fields[:2])
        payload = DecodedField("compressed payload", 26, end,
                               f"zlib, {stored} bytes stored, {size} inflated: {summary}",
                               tuple(DecodedField(f"inflated {f.name}", 26, end, f.value) for f in inner.fields))
        return DecodedPage("PAGE_COMPRESSED", (clear, payload, trailer), inner.cells, inner.records, inner.problems,
                           inner.space_id)

    def summarize(self, data: bytes, pgno: int = -1) -> tuple[str, int]:
        """``(page_type, user records)`` from the headers alone."""
        if len(data) < PAGE_HEADER_END:
            return "unknown", 0
        ptype = struct.unpack_from(">H", data, 24)[0]
        name = PAGE_TYPES.get(ptype, "unknown")
        if ptype != INDEX:
            return name, 0
        space, index_id = struct.unpack_from(">I", data, 34)[0], struct.unpack_from(">Q", data, 66)[0]
        return _qualified(name, space, index_id), struct.unpack_from(">H", data, 54)[0]


def _page_ref(n: int) -> str:
    return "none" if n == 0xFFFFFFFF else str(n)


def _index_page(data: bytes, layouts: dict):
    (slots, heap_top, n_heap, free, garbage, last_insert, direction, n_direction, n_recs, max_trx, level,
     index_id) = _INDEX_HEADER.unpack_from(data, FIL_HEADER)
    compact = bool(n_heap & 0x8000)
    header = DecodedField("INDEX header", FIL_HEADER, PAGE_HEADER_END,
                          f"{n_recs} records, level {level}{' (leaf)' if level == 0 else ''}, "
                          f"{index_name(index_id)}", (
        _field("directory slots", 38, 40, slots),
        _field("heap top", 40, 42, f"0x{heap_top:04x}"),
        _field("records in heap", 42, 44, f"{n_heap & 0x7FFF}{' (COMPACT format)' if compact else ' (REDUNDANT)'}"),
        _field("first free record", 44, 46, f"0x{free:04x}"),
        _field("garbage bytes", 46, 48, garbage),
        _field("last insert", 48, 50, f"0x{last_insert:04x}"),
        _field("direction", 50, 52, direction),
        _field("inserts in that direction", 52, 54, n_direction),
        _field("user records", 54, 56, n_recs),
        _field("max transaction id", 56, 64, max_trx),
        _field("level", 64, 66, level),
        _field("index id", 66, 74, index_id if index_id < IBUF_ID_MIN
               else f"0x{index_id:016x}: {index_name(index_id)}"),
        _field("leaf segment header", 74, 84, data[74:84].hex()),
        _field("non-leaf segment header", 84, 94, data[84:94].hex()),
    ))
    layout = layouts.get(index_id)
    if not compact:  # the old format: the change buffer, the data dictionary, ROW_FORMAT=REDUNDANT tables
        recs, values, problems = _walk_redundant(data, layout, level == 0)
        fields = [header, DecodedField("infimum", OLD_INFIMUM - 6, OLD_INFIMUM + 8, "system record (REDUNDANT)"),
                  DecodedField("supremum", OLD_SUPREMUM - 6, OLD_SUPREMUM + 9, "system record (REDUNDANT)"), *recs]
        if len(recs) != n_recs:
            problems.append(f"walked {len(recs)} records, the header says {n_recs}")
        return fields, n_recs, values, problems
    recs, values, problems = _walk(data, heap_top, layout, level == 0)
    fields = [header, DecodedField("infimum", INFIMUM - 5, INFIMUM + 8, "system record"),
              DecodedField("supremum", SUPREMUM - 5, SUPREMUM + 8, "system record"), *recs]
    if len(recs) != n_recs:
        problems.append(f"walked {len(recs)} records, the header says {n_recs}")
    slot_end = len(data) - 8
    fields.append(DecodedField("page directory", slot_end - 2 * slots, slot_end, f"{slots} slots"))
    return fields, n_recs, values, problems


def _walk(data: bytes, heap_top: int, layout, leaf: bool):
    """User records from the infimum's next pointer to the supremum (COMPACT), with their spans;
    decoded to column values when the index's ``layout`` is known."""
    out, values, problems, seen = [], [], [], set()
    size = len(data)
    origin = INFIMUM
    while True:
        rel = struct.unpack_from(">h", data, origin - 2)[0]
        nxt = (origin + rel) % size if rel else 0
        if nxt == SUPREMUM:
            break
        if nxt < SUPREMUM + 8 + 5 or nxt >= size - 8 or nxt in seen or len(out) > size // 5:
            problems.append(f"record chain broken after offset 0x{origin:04x} (next 0x{nxt:04x})")
            break
        seen.add(nxt)
        info, heap = data[nxt - 5], struct.unpack_from(">H", data, nxt - 4)[0]
        rel_next = struct.unpack_from(">h", data, nxt - 2)[0]
        end = min((nxt + rel_next) % size, heap_top) if rel_next else heap_top
        if end <= nxt or end - nxt > 8192:
            end = min(nxt + 64, heap_top)
        body = data[nxt:end]
        preview = "".join(chr(b) if 32 <= b < 127 else "." for b in body[:80])
        deleted = " deleted" if info & 0x20 else ""
        header = (
            _field("info bits, owned", nxt - 5, nxt - 4, f"0x{info:02x}{deleted}, owns {info & 0x0F}"),
            _field("heap number, type", nxt - 4, nxt - 2, f"{heap >> 3}, type {heap & 7}"),
            _field("next record", nxt - 2, nxt, f"{rel_next:+d}"),
        )
        body_fields, row = (_field("data", nxt, end, preview),), (preview,)
        if layout is not None:
            try:
                decoded, row = decode_record(data, nxt, layout, leaf)
                body_fields = tuple(decoded)
                end = max(end if not decoded else decoded[-1].end, nxt)
                preview = ", ".join("NULL" if v is None else str(v) for v in row)
            except (ValueError, IndexError) as exc:
                problems.append(f"record at 0x{nxt:04x} does not fit {layout.table}.{layout.index}: {exc}")
        values.append(row)
        out.append(DecodedField(f"record {len(out) + 1}", nxt - 5, end, preview, header + body_fields))
        origin = nxt
    return out, tuple(values), problems


def _walk_redundant(data: bytes, layout, leaf: bool):
    """User records of a REDUNDANT page, from the infimum's next pointer (an absolute offset in this
    format) to the supremum: each record's 6-byte header and its fields."""
    out, values, problems, seen = [], [], [], set()
    size = len(data)
    origin = OLD_INFIMUM
    while True:
        nxt = struct.unpack_from(">H", data, origin - 2)[0]
        if nxt == OLD_SUPREMUM:
            break
        if nxt < OLD_SUPREMUM + 9 + 6 or nxt >= size - 8 or nxt in seen or len(out) > size // 6:
            problems.append(f"record chain broken after offset 0x{origin:04x} (next 0x{nxt:04x})")
            break
        seen.add(nxt)
        info, bits = data[nxt - 6], struct.unpack_from(">H", data, nxt - 5)[0]
        deleted = " deleted" if info & 0x20 else ""
        header = (
            _field("info bits, owned", nxt - 6, nxt - 5, f"0x{info:02x}{deleted}, owns {info & 0x0F}"),
            _field("heap number, fields", nxt - 5, nxt - 2, f"{bits >> 3}, {(data[nxt - 4] << 8 | data[nxt - 3]) >> 1 & 0x3FF}"),
            _field("next record", nxt - 2, nxt, f"0x{struct.unpack_from('>H', data, nxt - 2)[0]:04x}"),
        )
        try:
            body, row, end = decode_redundant(data, nxt, layout, leaf)
        except (ValueError, IndexError) as exc:
            problems.append(f"record at 0x{nxt:04x}: {exc}")
            break
        preview = ", ".join("NULL" if v is None else str(v) for v in row)
        values.append(row)
        out.append(DecodedField(f"record {len(out) + 1}", nxt - 6, max(end, nxt), preview, header + tuple(body)))
        origin = nxt
    return out, tuple(values), problems


def _compressed(data: bytes, start: int, problems: list[str]) -> DecodedField:
    """A page-compressed page's payload from ``start`` (a zlib stream with the default algorithm),
    inflated: the rest of the page from ``start`` on, shown as text."""
    try:
        inflated = zlib.decompressobj().decompress(data[start:])
    except zlib.error:
        problems.append("page-compressed payload that does not inflate with zlib (another algorithm, or "
                        "still encrypted)")
        return DecodedField("compressed payload", start, len(data), "not zlib")
    text = "".join(chr(b) if 32 <= b < 127 else "." for b in inflated[:200])
    return DecodedField("compressed payload", start, len(data), f"zlib, {len(data) - start} bytes stored, "
                        f"{len(inflated)} inflated", (DecodedField(f"inflated (page bytes {start}..)", start, len(data),
                                                                   text),))
