"""SqlitePageDecoder against SQLite's own view of the same file: ``dbstat``, ``typeof()`` and ``SELECT``.

Every page of plain databases built here (page sizes 512 to 8192, UTF-8 and
UTF-16, a reserve area made by the ``sqlite3`` shell's ``.filectrl reserve_bytes``,
freeblocks, a freelist, overflow chains) is decoded and compared with the row
``dbstat`` gives for it: the page type, cell count, local payload bytes, largest
payload and unused bytes. Record values are checked against ``SELECT`` and their
serial types against ``typeof()``; ``summarize()`` must agree with ``decode()``
and with dbstat on every page; truncated captures keep what they hold.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess

import pytest

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

DBSTAT_TYPES = {"internal": "interior", "leaf": "leaf", "overflow": "overflow or freelist"}

# value, serial type, the decoder's type name: one per serial type (https://www.sqlite.org/fileformat2.html)
SERIAL_TYPES = [
    pytest.param(None, 0, "NULL", id="NULL"),
    pytest.param(2, 1, "INT8", id="int8"),
    pytest.param(-128, 1, "INT8", id="int8-min"),
    pytest.param(128, 2, "INT16", id="int16"),
    pytest.param(-32769, 3, "INT24", id="int24"),
    pytest.param(2**23, 4, "INT32", id="int32"),
    pytest.param(-2**31 - 1, 5, "INT48", id="int48"),
    pytest.param(2**47, 6, "INT64", id="int64"),
    pytest.param(-2**63, 6, "INT64", id="int64-min"),
    pytest.param(-1.25, 7, "FLOAT64", id="float"),
    pytest.param(0, 8, "0", id="zero"),
    pytest.param(1, 9, "1", id="one"),
    pytest.param(b"", 12, "BLOB(0)", id="blob-empty"),
    pytest.param(b"\x00", 14, "BLOB(1)", id="blob-1"),
    pytest.param(bytes(i % 7 for i in range(512)), 12 + 2 * 512, "BLOB(512)", id="blob-512"),
    pytest.param("", 13, "TEXT(0)", id="text-empty"),
    pytest.param("a", 15, "TEXT(1)", id="text-1"),
    pytest.param("héllo ✓", 13 + 2 * 10, "TEXT(10)", id="text-utf8"),
]


def _fill(conn) -> None:
    conn.execute("CREATE TABLE t(grp, id, name, ts)")
    conn.execute("CREATE INDEX t_grp_name ON t(grp, name)")
    conn.executemany("INSERT INTO t VALUES (?,?,?,?)", [
        (f"g{i % 7}".ljust(60, "x"), i, f"name {i:05d}", i + 0.5) for i in range(400)])
    conn.execute("CREATE TABLE docs(title, body)")
    conn.executemany("INSERT INTO docs VALUES (?,?)", [
        (f"doc {n}", bytes(0x61 + (i * 7 + n) % 26 for i in range(n))) for n in (100, 700, 3000, 20000)])
    conn.execute("CREATE TABLE s(v)")
    conn.executemany("INSERT INTO s VALUES (?)", [(p.values[0],) for p in SERIAL_TYPES])
    # index keys around the most an index cell keeps on its page, (U-12)*64/255-23, at each page size
    conn.execute("CREATE TABLE k(v)")
    conn.execute("CREATE INDEX k_v ON k(v)")
    conn.executemany("INSERT INTO k VALUES (?)", [("k" * n,) for lo, hi in ((95, 110), (225, 240), (980, 1012),
                                                                           (2015, 2065)) for n in range(lo, hi)])
    conn.execute("CREATE TABLE gone(x)")
    conn.executemany("INSERT INTO gone VALUES (?)", [(bytes(300),) for _ in range(60)])
    conn.commit()
    conn.execute("DELETE FROM t WHERE id % 3 = 0")  # freeblocks
    conn.execute("DROP TABLE gone")  # freelist trunk and leaf pages
    conn.commit()


class PlainDb:
    """A plain database file, its pages, and dbstat's row for each b-tree and overflow page."""

    def __init__(self, path, page_size: int, encoding: str, reserve: int) -> None:
        self.path, self.page_size, self.reserve = path, page_size, reserve
        self.conn = sqlite3.connect(path)
        self.conn.execute(f"PRAGMA page_size={page_size}")
        self.conn.execute(f"PRAGMA encoding='{encoding}'")
        _fill(self.conn)
        raw = path.read_bytes()
        assert raw[20] == reserve and len(raw) % page_size == 0
        self.pages = {i // page_size + 1: raw[i:i + page_size] for i in range(0, len(raw), page_size)}
        self.codec = {"UTF-8": "utf-8", "UTF-16le": "utf-16-le"}[encoding]
        self.decoder = SqlitePageDecoder(reserve=reserve, encoding=self.codec)
        self.stat = {r[0]: r[1:] for r in self.conn.execute(
            "SELECT pageno, name, pagetype, ncell, payload, unused, mx_payload FROM dbstat")}

    def root(self, name: str) -> int:
        return self.conn.execute("SELECT rootpage FROM sqlite_schema WHERE name=?", (name,)).fetchone()[0]


def _with_reserve(path, page_size: int, reserve: int) -> None:
    """An empty database whose pages keep ``reserve`` bytes, made the way only the sqlite3 shell can."""
    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("the sqlite3 shell is not installed (it sets reserve bytes)")
    subprocess.run([shell, str(path), f"PRAGMA page_size={page_size}", f".filectrl reserve_bytes {reserve}",
                    "CREATE TABLE boot(x)", "DROP TABLE boot", "VACUUM"], check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module", params=[(512, "UTF-8", 0), (1024, "UTF-16le", 0), (4096, "UTF-8", 40),
                                        (8192, "UTF-8", 0)], ids=lambda p: f"{p[0]}-{p[1]}-reserve{p[2]}")
def plain(request, tmp_path_factory):
    page_size, encoding, reserve = request.param
    path = tmp_path_factory.mktemp("dbstat") / "plain.db"
    if reserve:
        _with_reserve(path, page_size, reserve)
    db = PlainDb(path, page_size, encoding, reserve)
    if not db.stat:
        pytest.skip("this sqlite3 has no dbstat")
    yield db
    db.conn.close()


def _named(f: DecodedField | DecodedPage, name: str) -> DecodedField:
    fields = f.fields if isinstance(f, DecodedPage) else (f,)
    return next(x for top in fields for x in top.walk() if x.name == name)


def _cells(page: DecodedPage) -> list[DecodedField]:
    """Cells in cell-pointer order (``page.fields`` is in page-offset order)."""
    return sorted((f for f in page.fields if f.name.startswith("cell ") and f.name[5:].isdigit()),
                  key=lambda f: int(f.name[5:]))


def test_every_page_against_dbstat(plain):
    """Type, cells, payload on the page, largest payload and unused bytes, for every page dbstat knows."""
    usable = plain.page_size - plain.reserve
    seen = set()
    for pgno, (name, kind, ncell, payload, unused, mx_payload) in plain.stat.items():
        data = plain.pages[pgno]
        page = plain.decoder.decode(data, pgno)
        assert page.problems == (), (pgno, page.problems)
        assert page.page_type.endswith(DBSTAT_TYPES[kind]), (pgno, name, kind, page.page_type)
        seen.add(page.page_type)
        if kind == "overflow":
            nxt = _named(page, "next page (overflow chain or freelist trunk)")
            content = _named(page, "content (overflow payload or freelist leaf list)")
            assert (nxt.start, nxt.end, content.start, content.end) == (0, 4, 4, usable)
            assert payload + unused == usable - 4
            continue
        assert page.cells == len(_cells(page)) == ncell, pgno
        sizes = [int(_named(c, "payload size").value) for c in _cells(page) if c.children[-1].name != "rowid (key)"]
        local = [c for c in _cells(page) for x in c.children if x.name == "record"]
        assert sum(_named(c, "record").end - _named(c, "record").start for c in local) == payload, pgno
        assert max(sizes, default=0) == mx_payload, pgno
        free = [f for f in page.fields if f.name.startswith(("freeblock", "unallocated"))]
        assert sum(f.end - f.start for f in free) + int(_named(page, "fragmented free bytes").value) == unused, pgno
        header = _named(page, "b-tree page header")
        at = 100 if pgno == 1 else 0
        assert (header.start, header.end) == (at, at + (12 if kind == "internal" else 8))
        assert f"usable size {usable} (reserve {plain.reserve}: given)" in header.value
        if plain.reserve:
            reserved = _named(page, "reserved space")
            assert (reserved.start, reserved.end) == (usable, plain.page_size)
        else:
            assert not any(f.name == "reserved space" for f in page.fields)
    assert seen == {"table leaf", "table interior", "index leaf", "index interior", "overflow or freelist"}
    freelist = set(plain.pages) - set(plain.stat)
    assert freelist, "the dropped table left no freelist pages"
    for pgno in freelist:
        assert plain.decoder.decode(plain.pages[pgno], pgno).page_type in ("overflow or freelist", "empty")


def test_interior_cells_point_at_dbstat_children(plain):
    """Each interior cell's left child, and the right-most child, are the pages dbstat puts under it."""
    by_path = {(r[0], p): pgno for pgno, r in plain.stat.items()
               for p in plain.conn.execute("SELECT path FROM dbstat WHERE pageno=?", (pgno,)).fetchone()}
    checked = 0
    for (name, path), pgno in by_path.items():
        kind = plain.stat[pgno][1]
        if kind != "internal":
            continue
        page = plain.decoder.decode(plain.pages[pgno], pgno)
        kids = [int(_named(c, "left child page").value) for c in _cells(page)]
        kids.append(int(_named(page, "right-most child page").value))
        assert kids == [by_path[(name, f"{path}{i:03x}/")] for i in range(len(kids))]
        checked += 1
    assert checked >= 2


_STORAGE_CLASS = {"NULL": "null", "FLOAT64": "real", "BLOB": "blob", "TEXT": "text"}


@pytest.mark.parametrize(("value", "serial", "type_name"), SERIAL_TYPES)
def test_serial_types_against_typeof(plain, value, serial, type_name):
    """Each serial type's name, size and value, against typeof() and SELECT of the same row."""
    rowid = next(i for i, p in enumerate(SERIAL_TYPES, 1) if p.values[1] == serial and p.values[0] == value)
    if isinstance(value, str):  # TEXT(n) counts bytes in the database's encoding
        n = len(value.encode(plain.codec))
        serial, type_name = 13 + 2 * n, f"TEXT({n})"
    stored, sqltype = plain.conn.execute("SELECT v, typeof(v) FROM s WHERE rowid=?", (rowid,)).fetchone()
    found = [(page, cell, record) for pgno, r in plain.stat.items() if r[0] == "s" and r[1] == "leaf"
             for page in [plain.decoder.decode(plain.pages[pgno], pgno)]
             for cell, record in zip(_cells(page), page.records) if record[0] == rowid]
    assert len(found) == 1
    page, cell, record = found[0]
    assert _named(cell, "serial type 0").value == f"{serial} ({type_name})"
    column = next(f for f in cell.walk() if f.name.startswith("column 0"))
    assert column.name == f"column 0 ({type_name})"
    assert _STORAGE_CLASS.get(type_name.split("(")[0], "integer") == sqltype
    if any(f.name == "first overflow page" for f in cell.walk()):  # (BLOB(512) on 512-byte pages)
        assert record[1] == f"x'{stored[:column.end - column.start].hex()}'…(overflow)"
        return
    assert record[1] == stored and type(record[1]) is type(stored)
    width = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}
    raw = stored.encode(plain.codec) if isinstance(stored, str) else stored
    assert column.end - column.start == (width[serial] if serial in width else len(raw))
    if serial >= 12:
        assert plain.pages[page_no(plain, page)][column.start:column.end] == raw


def page_no(plain, page) -> int:
    return next(p for p, data in plain.pages.items() if plain.decoder.decode(data, p) == page)


def test_summarize_agrees_with_decode_and_dbstat(plain):
    for pgno, data in plain.pages.items():
        page = plain.decoder.decode(data, pgno)
        assert plain.decoder.summarize(data, pgno) == (page.page_type, page.cells), pgno
        if pgno in plain.stat and plain.stat[pgno][1] != "overflow":
            assert page.cells == plain.stat[pgno][2]
    # page 1 as SQLCipher hands it to the cipher: without its first 16 bytes
    page1 = plain.decoder.decode(plain.pages[1][16:], 1)
    assert plain.decoder.summarize(plain.pages[1][16:], 1) == (page1.page_type, page1.cells) == (
        "table leaf", plain.stat[1][2])
    # a header that does not make sense: summarize falls back to decode
    bad = bytearray(plain.pages[plain.root("t")])
    bad[3:5] = (5000).to_bytes(2, "big")
    assert plain.decoder.summarize(bytes(bad), 2) == (plain.decoder.decode(bytes(bad), 2).page_type, 0)


@pytest.mark.parametrize("cut", ["inside a cell", "at a cell's end"])
def test_truncated_capture_keeps_what_it_holds(plain, cut):
    """A capture cut short: the page size comes from the hint; whole cells decode, a cut one gives no row."""
    pgno = max((p for p, r in plain.stat.items() if r[0] == "t" and r[1] == "leaf"),
               key=lambda p: plain.stat[p][2])
    whole = plain.decoder.decode(plain.pages[pgno], pgno)
    by_start = sorted(_cells(whole), key=lambda c: c.start)
    middle = by_start[len(by_start) // 2]
    n = (middle.start + middle.end) // 2 if cut == "inside a cell" else middle.end
    dec = SqlitePageDecoder(reserve=plain.reserve, page_size=plain.page_size, encoding=plain.codec)
    page = dec.decode(plain.pages[pgno][:n], pgno)
    assert page.page_type == "table leaf" and page.cells == whole.cells
    assert f"only {n} bytes of a {plain.page_size}-byte page" in page.problems
    whole_cells = {c.name: c for c in _cells(whole)}
    kept = [c.name for c in _cells(whole) if c.end <= n]
    assert kept and [c for c in _cells(page) if c.name in kept] == [whole_cells[k] for k in kept]
    rows = dict(zip((c.name for c in _cells(whole)), whole.records))
    assert list(page.records) == [rows[k] for k in kept]  # a cut cell is no row (and no overflow)
    assert page.problems[0] == f"only {n} bytes of a {plain.page_size}-byte page"
    for problem in page.problems[1:]:  # cells past the end are said to be, not called misplaced
        assert f"past the {n} bytes captured" in problem or f"runs past offset {n}" in problem, problem
    assert (f"{middle.name}: payload of" in " ".join(page.problems)) == (cut == "inside a cell")
    if cut == "inside a cell":
        shown = _named(page, middle.name)
        assert shown.end == n and "…(capture ends)" in shown.value and "…(overflow)" not in shown.value
    for top in page.fields:
        for f in top.walk():
            assert 0 <= f.start <= f.end <= n
    assert dec.summarize(plain.pages[pgno][:n], pgno) == ("table leaf", whole.cells)


def test_reserve_from_the_header_and_the_fallback(plain):
    """Page 1 states the reserve; elsewhere the 80-byte SQLCipher default drops to 0 on a plain page."""
    guess = SqlitePageDecoder(encoding=plain.codec)
    page1 = guess.decode(plain.pages[1], 1)
    assert f"(reserve {plain.reserve}: from the database header)" in _named(page1, "b-tree page header").value
    assert page1.records == plain.decoder.decode(plain.pages[1], 1).records
    if plain.reserve:
        assert _named(page1, "reserved space").value == f"{plain.reserve} bytes (from the database header)"
        return
    for pgno, (_, kind, *_rest) in plain.stat.items():
        if kind == "leaf" and pgno != 1:
            page = guess.decode(plain.pages[pgno], pgno)
            header = _named(page, "b-tree page header").value
            assert "(reserve 0: " in header and page.problems == (), (pgno, header, page.problems)
            assert page.records == plain.decoder.decode(plain.pages[pgno], pgno).records
            assert not any(f.name == "reserved space" for f in page.fields)


def test_pointer_array_gap_and_freeblocks_read_the_bytes_they_span(plain):
    """The cell pointer array (one field per pointer, each its cell's start), the unallocated gap and the
    freeblock chain (walked here from the header's first freeblock), on every b-tree page."""
    checked = 0
    for pgno, data in plain.pages.items():
        page = plain.decoder.decode(data, pgno)
        if page.page_type not in ("table leaf", "table interior", "index leaf", "index interior"):
            continue
        checked += 1
        at = 100 if pgno == 1 else 0
        hl = 12 if data[at] in (2, 5) else 8
        ncells, cstart = int.from_bytes(data[at + 3:at + 5], "big"), int.from_bytes(data[at + 5:at + 7], "big")
        ptr_end = at + hl + 2 * ncells
        ptrs = [int.from_bytes(data[at + hl + 2 * i:at + hl + 2 * i + 2], "big") for i in range(ncells)]
        if ncells:
            array = _named(page, "cell pointer array")
            assert (array.start, array.end, array.value) == (at + hl, ptr_end, f"{ncells} pointers")
            assert [(k.name, k.start, k.end, k.value) for k in array.children] == [
                (f"pointer {i}", at + hl + 2 * i, at + hl + 2 * i + 2, f"{v} (0x{v:04x})") for i, v in enumerate(ptrs)]
            assert [c.start for c in _cells(page)] == ptrs
        gaps = [f for f in page.fields if f.name == "unallocated space"]
        if cstart > ptr_end:
            gap = data[ptr_end:cstart]
            assert [(g.start, g.end, g.value) for g in gaps] == [
                (ptr_end, cstart, f"{len(gap)} bytes" + (", all zero" if not any(gap) else ""))]
        else:
            assert gaps == []
        chain, fb = [], int.from_bytes(data[at + 1:at + 3], "big")
        while fb:
            nxt, size = int.from_bytes(data[fb:fb + 2], "big"), int.from_bytes(data[fb + 2:fb + 4], "big")
            chain.append((f"freeblock @{fb}", fb, fb + size, f"{size} bytes",
                          [("next freeblock", fb, fb + 2, str(nxt)), ("size", fb + 2, fb + 4, str(size))]))
            fb = nxt
        got = [(f.name, f.start, f.end, f.value, [(k.name, k.start, k.end, k.value) for k in f.children])
               for f in page.fields if f.name.startswith("freeblock @")]
        assert got == chain, pgno
    assert checked > 5


def test_overflow_and_freelist_pages_show_the_link_and_the_content(plain):
    usable = plain.page_size - plain.reserve
    seen = 0
    for pgno, data in plain.pages.items():
        page = plain.decoder.decode(data, pgno)
        if page.page_type != "overflow or freelist":
            continue
        seen += 1
        link, content = page.fields[:2]
        assert (link.start, link.end, link.value) == (0, 4, str(int.from_bytes(data[:4], "big")))
        assert (content.start, content.end, content.value) == (4, usable, f"{usable - 4} bytes")
    assert seen
