"""The walk over one SQLite b-tree page behind :class:`tdescope.plugins.sqlcipher.pages.SqlitePageDecoder`.

Database header, page header, cell pointers, cells and records, freeblocks and
the reserved tail, as :class:`~tdescope.app.engines.api.DecodedField` spans
(see :mod:`tdescope.plugins.sqlcipher.pages` for page 1 as the cipher sees it).
"""

from __future__ import annotations

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.app.probe.entropy import Randomness, shannon_entropy, verdict
from tdescope.plugins.sqlcipher._records import (
    OffPage,
    decode_record,
    local_payload_size,
    read_varint,
    signed64,
)

__all__ = ["SQLCIPHER_RESERVE", "PageWalk", "is_page_size"]

#: Reserved bytes per page with SQLCipher 4 defaults: 16-byte IV + 64-byte HMAC-SHA512.
SQLCIPHER_RESERVE = 80

_SALT = 16  # KDF salt on disk == length of "SQLite format 3\0"
_MAGIC = b"SQLite format 3\x00"
_PAGE_TYPES = {0x02: "index interior", 0x05: "table interior", 0x0A: "index leaf", 0x0D: "table leaf"}
_ENCODINGS = {1: ("UTF-8", "utf-8"), 2: ("UTF-16le", "utf-16-le"), 3: ("UTF-16be", "utf-16-be")}
_MIN_USABLE = 480  # the file format requires usable size >= 480
_TAIL_MIN_BITS = 5.0  # below this, the last 80 bytes cannot be SQLCipher's IV + HMAC


def _version(v: int) -> str:
    return f"{v} ({v // 1000000}.{v // 1000 % 1000}.{v % 1000})"


# (page offset, length, name, value text). Offsets 0-15 are handled apart (magic or salt).
_DB_HEADER = (
    (16, 2, "page size", lambda v: str(65536 if v == 1 else v)),
    (18, 1, "file format write version", lambda v: f"{v} ({ {1: 'rollback journal', 2: 'WAL'}.get(v, '?') })"),
    (19, 1, "file format read version", lambda v: f"{v} ({ {1: 'rollback journal', 2: 'WAL'}.get(v, '?') })"),
    (20, 1, "reserved space per page", str),
    (21, 1, "max embedded payload fraction", str),
    (22, 1, "min embedded payload fraction", str),
    (23, 1, "leaf payload fraction", str),
    (24, 4, "file change counter", str),
    (28, 4, "database size in pages", str),
    (32, 4, "first freelist trunk page", str),
    (36, 4, "freelist page count", str),
    (40, 4, "schema cookie", str),
    (44, 4, "schema format number", str),
    (48, 4, "default page cache size", str),
    (52, 4, "largest root b-tree page (auto-vacuum)", lambda v: f"{v} (auto-vacuum {'on' if v else 'off'})"),
    (56, 4, "text encoding", lambda v: f"{v} ({_ENCODINGS.get(v, ('unknown',))[0]})"),
    (60, 4, "user version", str),
    (64, 4, "incremental vacuum mode", lambda v: f"{v} ({'on' if v else 'off'})"),
    (68, 4, "application id", lambda v: f"{v} (0x{v:08x})"),
    (72, 20, "reserved for expansion", lambda v: "all zero" if v == 0 else f"0x{v:040x}"),
    (92, 4, "version-valid-for number", str),
    (96, 4, "SQLite version number", _version),
)


def is_page_size(n: int) -> bool:
    return 512 <= n <= 65536 and n & (n - 1) == 0


def _u(buf: bytes, off: int, n: int) -> int:
    return int.from_bytes(buf[off:off + n], "big")


def _shift(f: DecodedField, by: int, hi: int) -> DecodedField:
    s, e = min(max(f.start - by, 0), hi), min(max(f.end - by, 0), hi)
    return DecodedField(f.name, s, max(s, e), f.value, tuple(_shift(c, by, hi) for c in f.children))


class PageWalk:
    """State of one decode call; works in page offsets, shifts spans to buffer offsets at the end."""

    def __init__(self, dec, data: bytes, pgno: int) -> None:
        # dec: the SqlitePageDecoder (page_size, reserve, encoding) in pages.py, which imports this module
        self.dec, self.data, self.pgno = dec, data, pgno
        self.fields: list[DecodedField] = []
        self.problems: list[str] = []
        self.records: list[tuple] = []
        self.encoding = dec.encoding

    # -- geometry ---------------------------------------------------------------------------
    def _starts_past_salt(self) -> bool:
        d, n = self.data, len(self.data)
        if not is_page_size(n + _SALT) or self.pgno not in (1, -1):
            return False
        if self.pgno == 1:
            return True
        # Unknown page number: only when the buffer starts like header offset 16 onwards.
        return _u(d, 0, 2) in (n + _SALT, 1 if n + _SALT == 65536 else -1) and d[5:8] == b"\x40\x20\x20"

    def run(self) -> DecodedPage:
        d = self.data
        if not d or d.count(0) == len(d):
            return DecodedPage("empty")
        self.base = _SALT if self._starts_past_salt() else 0
        self.page = bytes(self.base) + d  # page offsets index this directly
        self.limit = len(self.page)
        hint = self.dec.page_size
        self.size = self.limit if is_page_size(self.limit) or not hint else hint
        if self.limit < self.size:
            self.problems.append(f"only {len(d)} bytes of a {self.size}-byte page")
        page1 = self.pgno == 1 or (self.pgno == -1 and (self.base or self.page[:16] == _MAGIC))
        hdr_ok = page1 and self.limit >= 100 and self.page[21:24] == b"\x40\x20\x20"
        if hdr_ok:
            self.encoding = _ENCODINGS.get(_u(self.page, 56, 4), (None, self.encoding))[1]
        self._choose_reserve(hdr_ok)
        at = 100 if page1 else 0
        why = self._btree_problem(at)
        if why is None:
            self.page_type = _PAGE_TYPES[self.page[at]]
            self._btree(at)
            if page1 and hdr_ok:
                self._db_header()
            elif page1:
                self.problems.append("page 1 has no readable database header")
        elif page1 and hdr_ok:
            self.page_type = "unknown"
            self._db_header()
            self.problems.append(f"b-tree header at offset 100: {why}")
        else:
            body = d[_SALT:] if page1 and not self.base else d  # the salt says nothing about the rest
            judged = verdict(body)
            if judged is Randomness.ENCRYPTED:
                self.page_type = "encrypted"
                self._encrypted(page1)
            elif judged is Randomness.EMPTY or page1:
                self.page_type = "empty" if judged is Randomness.EMPTY else "unknown"
                if page1:
                    self.problems.append(f"page 1 has no readable database header ({why})")
            else:
                self.page_type = "overflow or freelist"
                self._overflow_or_freelist()
                if self.page[0] in _PAGE_TYPES:
                    self.problems.append(f"looks like a b-tree page but {why}")
        fields = self.fields
        if self.base or self.limit != self.size or not is_page_size(self.size):
            # Spans of a whole page are built in range; anything else is clamped to the buffer.
            fields = [_shift(f, self.base, len(d)) for f in fields]
        fields = sorted(fields, key=lambda f: (f.start, -f.end))
        return DecodedPage(self.page_type, tuple(fields), getattr(self, "ncells", 0),
                           tuple(self.records), tuple(self.problems))

    def _choose_reserve(self, hdr_ok: bool) -> None:
        if self.dec.reserve is not None:
            r, why = self.dec.reserve, "given"
        elif hdr_ok:
            r, why = self.page[20], "from the database header"
        elif is_page_size(self.size):
            r, why = SQLCIPHER_RESERVE, "SQLCipher 4 default assumed"
            tail = self.page[self.size - r:self.size]
            # An IV + HMAC is 80 random bytes: their sample entropy is ~6.0 (min 5.66 in 200k
            # draws). Text, small integers or zeros there mean a plain page with no reserve.
            if len(tail) == r and (h := shannon_entropy(tail)) < _TAIL_MIN_BITS:
                r, why = 0, f"the last 80 bytes ({h:.1f} bits/byte) are no IV + HMAC"
        else:
            r, why = 0, "unknown page geometry"
        if r < 0 or self.size - r < _MIN_USABLE:
            self.problems.append(f"reserve of {r} bytes leaves less than {_MIN_USABLE} usable bytes; using 0")
            r, why = 0, "forced"
        self.reserve, self.reserve_why = r, why

    # -- b-tree pages ---------------------------------------------------------------------------
    def _btree_problem(self, at: int) -> str | None:
        p, size = self.page, self.size
        if at + 8 > self.limit:
            return "too short for a b-tree page header"
        if p[at] not in _PAGE_TYPES:
            return f"byte {at} is 0x{p[at]:02x}, not a b-tree page type"
        hl = 12 if p[at] in (0x02, 0x05) else 8
        ncells, cstart, free1 = _u(p, at + 3, 2), _u(p, at + 5, 2) or 65536, _u(p, at + 1, 2)
        ptr_end = at + hl + 2 * ncells
        if ptr_end > size or ptr_end > self.limit:
            return f"{ncells} cell pointers do not fit the page"
        if not ptr_end <= cstart <= size:
            return f"cell content area start {cstart} lies outside {ptr_end}..{size}"
        if free1 and not ptr_end <= free1 < size:
            return f"first freeblock {free1} lies outside {ptr_end}..{size}"
        if hl == 12 and _u(p, at + 8, 4) == 0:
            return "right-most child page is 0"
        return None

    def _btree(self, at: int) -> None:
        p, t = self.page, self.page[at]
        ncells, cstart = _u(p, at + 3, 2), _u(p, at + 5, 2) or 65536
        if self.reserve_why.startswith("SQLCipher") and (cstart > self.size - self.reserve or not self._fits(at)):
            self.reserve, self.reserve_why = 0, "cells reach into the last 80 bytes, so no SQLCipher IV/HMAC"
        usable, self.ncells = self.size - self.reserve, ncells
        hl = 12 if t in (0x02, 0x05) else 8
        ptr_end = at + hl + 2 * ncells
        kids = [DecodedField("page type", at, at + 1, f"0x{t:02x} ({_PAGE_TYPES[t]})"),
                DecodedField("first freeblock", at + 1, at + 3, str(_u(p, at + 1, 2))),
                DecodedField("cell count", at + 3, at + 5, str(ncells)),
                DecodedField("cell content area start", at + 5, at + 7,
                             f"{_u(p, at + 5, 2)}" + (" (65536)" if cstart == 65536 else "")),
                DecodedField("fragmented free bytes", at + 7, at + 8, str(p[at + 7]))]
        if hl == 12:
            kids.append(DecodedField("right-most child page", at + 8, at + 12, str(_u(p, at + 8, 4))))
        self.fields.append(DecodedField(
            "b-tree page header", at, at + hl,
            f"{_PAGE_TYPES[t]}, {ncells} cells; usable size {usable} (reserve {self.reserve}: {self.reserve_why})",
            tuple(kids)))
        ptrs = [_u(p, at + hl + 2 * i, 2) for i in range(ncells)]
        if ptrs:
            self.fields.append(DecodedField("cell pointer array", at + hl, ptr_end, f"{ncells} pointers", tuple(
                DecodedField(f"pointer {i}", at + hl + 2 * i, at + hl + 2 * i + 2, f"{v} (0x{v:04x})")
                for i, v in enumerate(ptrs))))
        if cstart > ptr_end and cstart <= self.limit:
            gap = p[ptr_end:cstart]
            self.fields.append(DecodedField("unallocated space", ptr_end, cstart,
                                            f"{len(gap)} bytes" + (", all zero" if gap.count(0) == len(gap) else "")))
        for i, ptr in enumerate(ptrs):
            if not ptr_end <= ptr < usable:
                self.problems.append(f"cell {i}: pointer {ptr} lies outside the cell content area {ptr_end}..{usable}")
                continue
            if ptr >= self.limit:
                self.problems.append(f"cell {i}: at {ptr}, past the {self.limit - self.base} bytes captured")
                continue
            cell, values = self._cell(i, ptr, t, usable)
            self.fields.append(cell)
            if values is not None:
                self.records.append(tuple(values))
        self._freeblocks(at, ptr_end, usable)
        self._reserve_area(usable)

    def _fits(self, at: int) -> bool:
        # Does the highest cell end inside the assumed usable area? Cells never overlap, so the
        # one with the highest pointer ends highest; a plain SQLite page (reserve 0) packs its
        # first cell right against the page end and fails this test.
        p, t = self.page, self.page[at]
        hl, usable = (12 if t in (0x02, 0x05) else 8), self.size - self.reserve
        ptrs = [_u(p, at + hl + 2 * i, 2) for i in range(_u(p, at + 3, 2))]
        top = max((x for x in ptrs if x < self.limit), default=None)
        return top is None or self._cell(0, top, t, usable, quiet=True)[0].end <= usable

    def _cell(self, i: int, ptr: int, t: int, usable: int, quiet: bool = False):
        p, limit = self.page, min(self.limit, self.size)
        kids: list[DecodedField] = []
        values, pos, summary = None, ptr, ""
        problems: list[str] = []
        try:
            if t in (0x02, 0x05):
                if pos + 4 > limit:
                    raise OffPage(f"left child pointer at {pos} runs past offset {limit}")
                kids.append(DecodedField("left child page", pos, pos + 4, str(_u(p, pos, 4))))
                summary, pos = f"left child {_u(p, pos, 4)}", pos + 4
            if t == 0x05:
                key, nxt = read_varint(p, pos, limit)
                kids.append(DecodedField("rowid (key)", pos, nxt, str(signed64(key))))
                summary += f", key {signed64(key)}"
            else:
                payload, nxt = read_varint(p, pos, limit)
                kids.append(DecodedField("payload size", pos, nxt, str(payload)))
                pos, rowid = nxt, None
                if t == 0x0D:
                    rowid, nxt = read_varint(p, pos, limit)
                    rowid = signed64(rowid)
                    kids.append(DecodedField("rowid", pos, nxt, str(rowid)))
                    pos = nxt
                local = local_payload_size(payload, usable, t == 0x0D)
                end = min(pos + local, limit)
                cut = pos + local > limit
                if cut:
                    problems.append(f"payload of {local} local bytes runs past offset {limit}")
                rec = decode_record(p, pos, end, payload, self.encoding, cut=cut)
                problems += rec.problems
                spill = f", {local} on this page" if local < payload else ""
                kids.append(DecodedField("record", pos, end, f"{payload} bytes{spill}", tuple(rec.fields)))
                # a row cut by the capture's end is no row: its cell still shows what was caught
                values = None if cut else ([rowid] if t == 0x0D else []) + rec.values
                shown = ", ".join(f.value for f in rec.fields[1:])
                summary = (f"{summary}, " if summary else "") + (f"rowid {rowid}: " if t == 0x0D else "") + shown
                pos += local
                if local < payload:
                    if pos + 4 > limit:
                        raise OffPage(f"overflow page number at {pos} runs past offset {limit}")
                    kids.append(DecodedField("first overflow page", pos, pos + 4, str(_u(p, pos, 4))))
        except OffPage as exc:
            problems.append(str(exc))
        end = max([k.end for k in kids] + [ptr + 1])
        if end > usable:
            problems.append(f"cell ends at {end}, past the usable size {usable}")
        if not quiet:
            self.problems += [f"cell {i}: {m}" for m in problems]
        if len(summary) > 120:
            summary = summary[:119] + "…"
        return DecodedField(f"cell {i}", ptr, min(end, self.limit), summary, tuple(kids)), values

    def _freeblocks(self, at: int, ptr_end: int, usable: int) -> None:
        fb, seen = _u(self.page, at + 1, 2), 0
        while fb and seen < 4096:
            if not ptr_end <= fb <= usable - 4:
                self.problems.append(f"freeblock at {fb} lies outside {ptr_end}..{usable}")
                return
            if fb + 4 > self.limit:
                self.problems.append(f"freeblock at {fb}: past the {self.limit - self.base} bytes captured")
                return
            nxt, size = _u(self.page, fb, 2), _u(self.page, fb + 2, 2)
            if size < 4 or fb + size > usable:
                self.problems.append(f"freeblock at {fb} has size {size}, outside the usable area")
                size = max(4, min(size, usable - fb))
            self.fields.append(DecodedField(f"freeblock @{fb}", fb, fb + size, f"{size} bytes", (
                DecodedField("next freeblock", fb, fb + 2, str(nxt)),
                DecodedField("size", fb + 2, fb + 4, str(size)))))
            if nxt and nxt <= fb + size:
                self.problems.append(f"freeblock chain goes back or overlaps: {fb} -> {nxt}")
                return
            fb, seen = nxt, seen + 1

    # -- everything else ----------------------------------------------------------------------
    def _reserve_area(self, usable: int) -> None:
        r, end = self.reserve, min(self.size, self.limit)
        if r <= 0 or usable >= end:
            return
        kids = ()
        if r >= 16:  # SQLCipher layout: IV first, then HMAC (plus any padding)
            kids = (DecodedField("IV", usable, min(usable + 16, end), self.page[usable:usable + 16].hex()),
                    DecodedField("HMAC", min(usable + 16, end), end, self.page[usable + 16:end].hex()))
        self.fields.append(DecodedField("reserved space", usable, end, f"{r} bytes ({self.reserve_why})", kids))

    def _db_header(self) -> None:
        p = self.page
        kids = []
        if not self.base:
            name = "header string" if p[:16] == _MAGIC else "KDF salt (SQLCipher)"
            kids.append(DecodedField(name, 0, 16, repr(p[:16].decode("latin-1")) if p[:16] == _MAGIC else p[:16].hex()))
        kids += [DecodedField(name, off, off + n, text(_u(p, off, n))) for off, n, name, text in _DB_HEADER]
        note = ("SQLite database header (100 bytes)" if not self.base else
                "header bytes 16-99: the 16 bytes before them (the KDF salt on disk) are not passed to "
                "sqlcipher_page_cipher, so offset 0 of this buffer is page offset 16")
        self.fields.append(DecodedField("database header", self.base, 100, note, tuple(kids)))

    def _encrypted(self, page1: bool) -> None:
        if page1 and not self.base:
            self.fields.append(DecodedField("KDF salt (SQLCipher)", 0, _SALT, self.page[:_SALT].hex()))
        start = _SALT if page1 else 0
        r = self.dec.reserve if self.dec.reserve is not None else (SQLCIPHER_RESERVE if is_page_size(self.size) else 0)
        usable = self.size - r if 0 < r < self.size - start else min(self.size, self.limit)
        body = self.page[start:usable]
        self.fields.append(DecodedField("ciphertext", start, min(usable, self.limit),
                                        f"{len(body)} bytes, {shannon_entropy(body):.2f} bits/byte"))
        self.reserve, self.reserve_why = r, "given" if self.dec.reserve is not None else "SQLCipher 4 default assumed"
        self._reserve_area(usable)

    def _overflow_or_freelist(self) -> None:
        usable = self.size - self.reserve
        nxt = _u(self.page, 0, 4)
        self.fields.append(DecodedField("next page (overflow chain or freelist trunk)", 0, 4, str(nxt)))
        self.fields.append(DecodedField("content (overflow payload or freelist leaf list)", 4,
                                        min(usable, self.limit), f"{min(usable, self.limit) - 4} bytes"))
        self._reserve_area(usable)
