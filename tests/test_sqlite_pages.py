"""SqlitePageDecoder against real SQLite and SQLCipher files built here.

Plain databases come from the stdlib ``sqlite3``; their pages are read straight
from the file. SQLCipher plaintext pages are what ``sqlcipher_page_cipher``
writes to its ``out`` buffer when decrypting: the test derives the SQLCipher 4
keys from the file's salt, checks each page's HMAC-SHA512 (so the bytes are
exactly the cipher's), and AES-256-CBC-decrypts the page, page 1 without its
first 16 bytes. Those pages carry the real 80 reserved bytes (IV + HMAC).
"""

from __future__ import annotations

import hashlib
import hmac
import random
import sqlite3
from collections import Counter
from dataclasses import dataclass, field

import pytest

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.app.probe.entropy import shannon_entropy, verdict
from tdescope.plugins.sqlcipher._records import OVERFLOW_MARK
from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

sqlcipher3 = pytest.importorskip("sqlcipher3")

KEY = "correct horse"
KDF_ITER = 4000  # a real SQLCipher KDF, fewer rounds so the test derives the key fast


# -- building real databases -----------------------------------------------------------------

def fill(conn, rows: int = 300) -> None:
    """The workload schema: a row table, two indexes, a text-heavy table and mixed types."""
    conn.execute("PRAGMA user_version=42")
    conn.execute("PRAGMA application_id=1952736627")
    conn.execute("CREATE TABLE t(grp, id, name, ts)")
    conn.execute("CREATE INDEX t_all ON t(grp, id, name, ts)")
    conn.execute("CREATE INDEX t_grp_name ON t(grp, name)")
    conn.executemany("INSERT INTO t VALUES (?,?,?,?)", [
        (f"abc_{i % 7}".ljust(100, "x"), i, f"name {i:05d}", 1_700_000_000.25 + i) for i in range(rows)])
    conn.execute("CREATE TABLE docs(title, body)")
    conn.executemany("INSERT INTO docs VALUES (?,?)", [
        (f"doc {n}", "".join(chr(0x61 + (i * 7 + n) % 26) for i in range(n))) for n in (300, 900, 3000, 20000, 50000)])
    conn.execute("CREATE TABLE mixed(a, b, c)")
    conn.executemany("INSERT INTO mixed VALUES (?,?,?)", [
        (None, 0, 1), (-1, 127, -32768), (2**23 - 1, -2**31, 2**40), (-2**63, 2**63 - 1, 3.25),
        (b"\x00\x01\xff", "", "héllo ✓"), (-0.5, b"", 255)])
    conn.execute("INSERT INTO mixed(rowid, a, b, c) VALUES (-7, 'negative rowid', NULL, NULL)")
    conn.commit()


@dataclass
class Db:
    """A built database and the page bytes a probe would hand the decoder."""

    label: str
    conn: object
    page_size: int
    pages: dict[int, bytes]
    decoder: SqlitePageDecoder
    reserve: int = 0
    stat: list = field(default_factory=list)  # dbstat rows, plain SQLite only

    def decode(self, pgno: int) -> DecodedPage:
        return self.decoder.decode(self.pages[pgno], pgno)

    def root(self, name: str) -> int:
        return self.conn.execute("SELECT rootpage FROM sqlite_schema WHERE name=?", (name,)).fetchone()[0]


def plain_db(tmp, page_size: int, encoding: str, journal: str) -> Db:
    path = tmp / f"plain-{page_size}.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size={page_size}")
    conn.execute(f"PRAGMA encoding='{encoding}'")
    conn.execute(f"PRAGMA journal_mode={journal}")
    fill(conn, rows=300 if page_size > 1024 else 120)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw = path.read_bytes()
    pages = {i // page_size + 1: raw[i:i + page_size] for i in range(0, len(raw), page_size)}
    codec = {"UTF-8": "utf-8", "UTF-16le": "utf-16-le"}[encoding]
    stat = conn.execute("SELECT name, path, pageno, pagetype, ncell, unused FROM dbstat").fetchall()
    return Db(f"sqlite-{page_size}-{encoding}-{journal}", conn, page_size, pages,
              SqlitePageDecoder(encoding=codec), 0, stat)


def sqlcipher_page_cipher_decrypt(page: bytes, pgno: int, key: bytes, hmac_key: bytes) -> bytes:
    """What sqlcipher_page_cipher(mode=decrypt) leaves in ``out``: plaintext, then IV, then HMAC."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    data = page[16:] if pgno == 1 else page  # page 1 is passed without its salt
    size = len(data) - 80
    iv, mac = data[size:size + 16], data[size + 16:]
    computed = hmac.new(hmac_key, data[:size + 16] + pgno.to_bytes(4, "little"), "sha512").digest()
    assert hmac.compare_digest(computed, mac), f"HMAC of page {pgno}: key derivation is wrong"
    dec = Cipher(algorithms.AES(key), modes.CBC(iv)).decryptor()
    return dec.update(data[:size]) + dec.finalize() + iv + computed


def sqlcipher_db(tmp, page_size: int, fill_with=fill) -> Db:
    pytest.importorskip("cryptography")
    path = tmp / f"enc-{page_size}.db"
    conn = sqlcipher3.connect(str(path))
    conn.execute(f"PRAGMA key='{KEY}'")
    conn.execute(f"PRAGMA kdf_iter={KDF_ITER}")
    conn.execute(f"PRAGMA cipher_page_size={page_size}")
    if fill_with is fill:
        fill(conn, rows=200)
    else:
        fill_with(conn)
    raw = path.read_bytes()
    salt = raw[:16]
    key = hashlib.pbkdf2_hmac("sha512", KEY.encode(), salt, KDF_ITER, 32)
    hmac_key = hashlib.pbkdf2_hmac("sha512", key, bytes(b ^ 0x3A for b in salt), 2, 32)
    pages = {}
    for i in range(0, len(raw), page_size):
        pgno = i // page_size + 1
        pages[pgno] = sqlcipher_page_cipher_decrypt(raw[i:i + page_size], pgno, key, hmac_key)
    db = Db(f"sqlcipher-{page_size}", conn, page_size, pages, SqlitePageDecoder(), 80)
    db.raw = raw
    return db


@pytest.fixture(scope="module", params=[
    ("sqlite", 4096, "UTF-8", "delete"),
    ("sqlite", 1024, "UTF-16le", "wal"),
    ("sqlite", 8192, "UTF-8", "delete"),
    ("sqlcipher", 4096, None, None),
    ("sqlcipher", 1024, None, None),
], ids=lambda p: "-".join(str(x) for x in p if x))
def db(request, tmp_path_factory):
    kind, page_size, encoding, journal = request.param
    tmp = tmp_path_factory.mktemp(kind)
    made = plain_db(tmp, page_size, encoding, journal) if kind == "sqlite" else sqlcipher_db(tmp, page_size)
    yield made
    made.conn.close()


# -- helpers ------------------------------------------------------------------------------

def named(page: DecodedPage, name: str) -> DecodedField:
    found = [f for top in page.fields for f in top.walk() if f.name == name]
    assert found, f"no field {name!r} in {[f.name for f in page.fields]}"
    return found[0]


def cells(page: DecodedPage) -> list[DecodedField]:
    return sorted((f for f in page.fields if f.name.startswith("cell ") and f.name[5:].isdigit()),
                  key=lambda f: int(f.name[5:]))


def children_of(page: DecodedPage) -> list[int]:
    kids = [int(named_in(c, "left child page").value) for c in cells(page)]
    return kids + [int(named(page, "right-most child page").value)]


def named_in(f: DecodedField, prefix: str) -> DecodedField:
    return next(x for x in f.walk() if x.name.startswith(prefix))


def tree_pages(db: Db, pgno: int) -> list[tuple[int, DecodedPage]]:
    """Every page of one b-tree, found by following the decoded child pointers."""
    page = db.decode(pgno)
    assert page.page_type in ("table leaf", "table interior", "index leaf", "index interior"), (pgno, page)
    out = [(pgno, page)]
    if "interior" in page.page_type:
        for child in children_of(page):
            out += tree_pages(db, child)
    return out


def in_order(db: Db, pgno: int) -> list[tuple]:
    """Rows (table) or entries (index) of a b-tree in key order, from decoded pages only."""
    page = db.decode(pgno)
    if "interior" not in page.page_type:
        return list(page.records)
    out = []
    for i, child in enumerate(children_of(page)):
        out += in_order(db, child)
        if page.page_type == "index interior" and i < len(page.records):
            out.append(page.records[i])  # interior index cells are entries between their subtrees
    return out


# -- page 1 ---------------------------------------------------------------------------------

def test_page1_header_fields(db):
    page = db.decode(1)
    expect_pages = len(db.pages)
    want = {
        "page size": str(db.page_size),
        "reserved space per page": str(db.reserve),
        "max embedded payload fraction": "64",
        "database size in pages": str(expect_pages),
        "first freelist trunk page": "0",
        "schema format number": "4",
        "text encoding": "2 (UTF-16le)" if "UTF-16" in db.label else "1 (UTF-8)",
    }
    version = db.conn.execute("SELECT sqlite_version()").fetchone()[0]
    a, b, c = map(int, version.split("."))
    want |= {"user version": "42", "application id": "1952736627 (0x74646573)",
             "SQLite version number": f"{a * 1000000 + b * 1000 + c} ({version})",
             "file format write version": "2 (WAL)" if "wal" in db.label else "1 (rollback journal)"}
    if db.label.startswith("sqlite"):
        want["header string"] = repr("SQLite format 3\x00")
    got = {name: named(page, name).value for name in want}
    assert got == want
    assert page.page_type == "table leaf" and page.problems == ()
    # The schema table lives on page 1: its records are sqlite_schema rows.
    names = {r[2] for r in page.records}
    assert {"t", "t_all", "t_grp_name", "docs", "mixed"} <= names


def test_page1_spans_follow_the_buffer(db):
    page = db.decode(1)
    shift = 16 if db.label.startswith("sqlcipher") else 0
    assert len(db.pages[1]) == db.page_size - shift
    assert (named(page, "page size").start, named(page, "page size").end) == (16 - shift, 18 - shift)
    assert named(page, "b-tree page header").start == 100 - shift
    assert named(page, "database header").end == 100 - shift
    if shift:
        assert "not passed to sqlcipher_page_cipher" in named(page, "database header").value
        # Same result when the page number is unknown: the header tail is recognised.
        assert db.decoder.decode(db.pages[1]).records == page.records


# -- b-trees ---------------------------------------------------------------------------------

def test_table_leaf_records_equal_select(db):
    got = in_order(db, db.root("t"))
    want = [tuple(r) for r in db.conn.execute("SELECT rowid, * FROM t ORDER BY rowid")]
    assert got == want
    leaves = [p for _, p in tree_pages(db, db.root("t")) if p.page_type == "table leaf"]
    assert sum(p.cells for p in leaves) == len(want) and len(leaves) > 3
    for leaf in leaves:  # each leaf on its own holds exactly the rows SELECT gives for its rowids
        lo, hi = leaf.records[0][0], leaf.records[-1][0]
        rows = db.conn.execute("SELECT rowid, * FROM t WHERE rowid BETWEEN ? AND ? ORDER BY rowid", (lo, hi))
        assert list(leaf.records) == [tuple(r) for r in rows]


def test_mixed_serial_types(db):
    ((_, leaf),) = tree_pages(db, db.root("mixed"))
    assert list(leaf.records) == [tuple(r) for r in db.conn.execute("SELECT rowid, * FROM mixed ORDER BY rowid")]
    assert named(leaf, "cell 0").children[1].value == "-7"  # rowid varints are two's complement
    types = [f.name for f in named(leaf, "cell 1").walk() if f.name.startswith("column")]
    assert types == ["column 0 (NULL)", "column 1 (0)", "column 2 (1)"]
    c4 = [f.name for f in named(leaf, "cell 4").walk() if f.name.startswith("column")]
    assert c4 == ["column 0 (INT64)", "column 1 (INT64)", "column 2 (FLOAT64)"]
    c2 = [f.value for f in named(leaf, "cell 2").walk() if f.name.startswith("column")]
    assert c2 == ["-1", "127", "-32768"]


@pytest.mark.parametrize("index, columns", [("t_all", "grp, id, name, ts"), ("t_grp_name", "grp, name")])
def test_index_entries_equal_select(db, index, columns):
    got = in_order(db, db.root(index))
    want = [tuple(r) for r in db.conn.execute(f"SELECT {columns}, rowid FROM t ORDER BY {columns}, rowid")]
    assert len(got) == len(want)
    # Leaves and interior entries, walked in order, give the index order. Wide UTF-16 keys on
    # 1 KB pages spill to overflow pages: those entries hold the local prefix then markers.
    spilled = [g for g in got if OVERFLOW_MARK in str(g)]
    assert [g for g in got if g not in spilled] == [w for g, w in zip(got, want) if g not in spilled]
    for g, w in ((g, w) for g, w in zip(got, want) if g in spilled):
        assert all(a == b or a == OVERFLOW_MARK or (a.endswith(OVERFLOW_MARK)
                   and b.startswith(a[: -len(OVERFLOW_MARK)].rstrip("\ufffd"))) for a, b in zip(g, w)), (g, w)
    assert len(spilled) < len(got) // 2 or "UTF-16" in db.label and db.page_size == 1024
    kinds = Counter(p.page_type for _, p in tree_pages(db, db.root(index)))
    assert kinds["index leaf"] > 1 and kinds["index interior"] >= 1


def test_interior_children_match_dbstat(db):
    if not db.stat:
        pytest.skip("dbstat is not compiled into sqlcipher3")
    by_path = {(name, path): pgno for name, path, pgno, kind, *_ in db.stat}
    checked = 0
    for name, path, pgno, kind, ncell, _ in db.stat:
        if kind != "internal":
            continue
        page = db.decode(pgno)
        want = [by_path[(name, f"{path}{i:03x}/")] for i in range(ncell + 1)]
        assert children_of(page) == want
        assert page.cells == ncell
        checked += 1
    assert checked >= 3


def test_free_space_matches_dbstat(db, tmp_path):
    if not db.stat:
        pytest.skip("dbstat is not compiled into sqlcipher3")
    copy = sqlite3.connect(tmp_path / "copy.db")
    db.conn.backup(copy)  # same page size and encoding; the shared fixture stays untouched
    copy.execute("PRAGMA journal_mode=delete")
    copy.execute("DELETE FROM t WHERE id % 3 = 0")  # leaves freeblocks behind (no VACUUM)
    copy.commit()
    raw = (tmp_path / "copy.db").read_bytes()
    stat = copy.execute("SELECT pageno, pagetype, unused FROM dbstat "
                        "WHERE name LIKE 't%' AND pagetype != 'overflow'").fetchall()
    copy.close()
    freeblocks = 0
    for pgno, kind, unused in stat:
        page = db.decoder.decode(raw[(pgno - 1) * db.page_size:pgno * db.page_size], pgno)
        assert page.problems == ()
        free = [f for f in page.fields if f.name.startswith(("freeblock", "unallocated"))]
        frag = int(named(page, "fragmented free bytes").value)
        assert sum(f.end - f.start for f in free) + frag == unused, (pgno, kind)
        freeblocks += sum(f.name.startswith("freeblock") for f in free)
        for f in free:
            if f.name.startswith("freeblock"):
                assert int(named_in(f, "size").value) == f.end - f.start
    assert freeblocks > 0


# -- overflow ---------------------------------------------------------------------------------

def local_size(payload: int, usable: int) -> int:
    """Table-leaf local payload per https://www.sqlite.org/fileformat2.html#b_tree_pages."""
    x, m = usable - 35, (usable - 12) * 32 // 255 - 23
    k = m + (payload - m) % (usable - 4)
    return payload if payload <= x else (k if k <= x else m)


def test_overflow_chain_rebuilds_the_text(db):
    usable = db.page_size - db.reserve
    bodies = dict(db.conn.execute("SELECT rowid, body FROM docs"))
    codec = db.decoder.encoding
    spilled = 0
    for pgno, leaf in tree_pages(db, db.root("docs")):
        for cell, rec in zip(cells(leaf), leaf.records):
            body = bodies[rec[0]]
            payload = int(named_in(cell, "payload size").value)
            record = named_in(cell, "record")
            assert record.end - record.start == local_size(payload, usable)
            if payload <= usable - 35:
                assert rec[2] == body
                continue
            spilled += 1
            local_text = rec[2][: -len(OVERFLOW_MARK)].rstrip("\ufffd")  # UTF-16 may cut a character
            assert rec[2].endswith(OVERFLOW_MARK) and body.startswith(local_text) and len(local_text) > 20
            # Follow the chain and glue the text back together from the decoded spans alone.
            text = named_in(cell, "column 1")
            joined, nxt = db.pages[pgno][text.start:text.end], int(named_in(cell, "first overflow page").value)
            while nxt:
                ov = db.decode(nxt)
                assert ov.page_type == "overflow or freelist" and ov.problems == ()
                content = named(ov, "content (overflow payload or freelist leaf list)")
                joined += db.pages[nxt][content.start:content.end]
                nxt = int(named(ov, "next page (overflow chain or freelist trunk)").value)
            assert joined[: len(body.encode(codec))].decode(codec) == body
    assert spilled >= 2


# -- spans and lookup -------------------------------------------------------------------------

def test_every_span_nests_and_pages_are_clean(db):
    for pgno, data in db.pages.items():
        page = db.decode(pgno)
        assert page.problems == (), (pgno, page.problems)
        assert page.page_type != "unknown"
        assert verdict(data) == "looks structured"  # SQLCipher plaintext too, despite its random tail
        stack = [(f, 0, len(data)) for f in page.fields]
        while stack:
            f, lo, hi = stack.pop()
            assert lo <= f.start <= f.end <= hi, (pgno, f.name, f.start, f.end, lo, hi)
            stack += [(c, f.start, f.end) for c in f.children]
        if db.reserve:  # SQLCipher plaintext: the cipher's IV sits right after the usable area
            iv = named(page, "IV")
            assert iv.end - iv.start == 16 and bytes.fromhex(iv.value) == data[iv.start:iv.end]
            assert named(page, "HMAC").end == len(data)


def test_summarize_agrees_with_decode_on_every_page(db):
    """The cheap summary per capture, on every page as the probe gives it (SQLCipher's page 1 without salt)."""
    for pgno, data in db.pages.items():
        page = db.decode(pgno)
        assert db.decoder.summarize(data, pgno) == (page.page_type, page.cells), pgno


def test_btree_header_fields_read_the_bytes_they_span(db):
    """Each field of every b-tree page header: its name, its bytes and the number they hold."""
    names = ("page type", "first freeblock", "cell count", "cell content area start", "fragmented free bytes",
             "right-most child page")
    for pgno, data in db.pages.items():
        page = db.decode(pgno)
        if page.page_type not in ("table leaf", "table interior", "index leaf", "index interior"):
            continue
        header = named(page, "b-tree page header")
        kids = header.children
        assert [k.name for k in kids] == list(names[:len(kids)]) and len(kids) in (5, 6)
        assert header.end - header.start == (12 if len(kids) == 6 else 8)
        assert [k.end - k.start for k in kids] == [1, 2, 2, 2, 1, 4][:len(kids)]
        for k in kids[1:]:
            number = int.from_bytes(data[k.start:k.end], "big")
            assert k.value.split()[0] == str(number), (pgno, k)
        assert kids[0].value == f"0x{data[kids[0].start]:02x} ({page.page_type})"
        assert int(kids[2].value) == page.cells


def test_cell_summaries_are_cut_at_120_characters_and_records_say_their_size(db):
    cut = 0
    for pgno in db.pages:
        for cell in cells(db.decode(pgno)):
            assert len(cell.value) <= 120
            cut += len(cell.value) == 120 and cell.value.endswith("…")
            for rec in (k for k in cell.children if k.name == "record"):
                payload = int(next(k.value for k in cell.children if k.name == "payload size"))
                local = rec.end - rec.start
                assert rec.value == f"{payload} bytes" + (f", {local} on this page" if local < payload else "")
    assert cut > 10


def test_field_at_finds_the_innermost_field(db):
    page = next(p for _, p in tree_pages(db, db.root("t")) if p.page_type == "table leaf")
    cell = cells(page)[0]
    name_col = named_in(cell, "column 2")
    hit = page.field_at((name_col.start + name_col.end) // 2)
    assert hit is name_col and hit.value == repr(page.records[0][3])
    p1 = db.decode(1)
    shift = 16 if db.reserve else 0
    assert p1.field_at(56 - shift).name == "text encoding"
    assert p1.field_at(100 - shift).name == "page type"
    assert p1.field_at(len(db.pages[1]) + 5) is None


# -- ciphertext ---------------------------------------------------------------------------------

def test_sqlcipher_file_pages_are_encrypted(tmp_path):
    db = sqlcipher_db(tmp_path, 4096)
    dec = SqlitePageDecoder()
    for i in range(0, len(db.raw), 4096):
        pgno, data = i // 4096 + 1, db.raw[i:i + 4096]
        page = dec.decode(data, pgno)
        assert page.page_type == "encrypted" and page.problems == ()
        body = data[16:] if pgno == 1 else data
        assert verdict(body) == "looks encrypted" and shannon_entropy(body) > 7.5
        assert named(page, "ciphertext").end == 4016
        assert bytes.fromhex(named(page, "IV").value) == data[4016:4032]
        assert (named(page, "HMAC").start, named(page, "HMAC").value) == (4032, data[4032:].hex())
    page1 = dec.decode(db.raw[:4096], 1)
    salt = named(page1, "KDF salt (SQLCipher)")
    assert (salt.start, salt.end, salt.value) == (0, 16, db.raw[:16].hex())
    # Page 1 decrypted but captured with its salt: the salt, then the header from offset 16
    whole = dec.decode(db.raw[:16] + db.pages[1], 1)
    assert whole.page_type == "table leaf" and whole.problems == ()
    salt = named(whole, "KDF salt (SQLCipher)")
    assert (salt.start, salt.end, salt.value) == (0, 16, db.raw[:16].hex())
    assert named(whole, "HMAC").value == db.pages[1][-64:].hex()
    # What the probe sees at entry for page 1: the 4080 bytes after the salt.
    before = dec.decode(db.raw[16:4096], 1)
    assert before.page_type == "encrypted"
    spans = [(f.name, f.start, f.end) for f in before.fields]
    assert spans == [("ciphertext", 0, 4000), ("reserved space", 4000, 4080)]
    db.conn.close()


def test_reserve_defaults_and_fallback(db):
    """Without a header the decoder assumes 80 reserved bytes, and drops to 0 when cells say so."""
    pgno = db.root("mixed")
    data = db.pages[pgno]
    page = SqlitePageDecoder(encoding=db.decoder.encoding).decode(data)
    reserved = [f for f in page.fields if f.name == "reserved space"]
    assert bool(reserved) == bool(db.reserve)
    explicit = SqlitePageDecoder(reserve=db.reserve, encoding=db.decoder.encoding).decode(data, pgno)
    assert explicit.records == page.records and explicit.problems == ()


def test_random_blob_rows_decode_although_they_look_encrypted(tmp_path):
    """A leaf full of random BLOBs fools the entropy verdict; the decoder trusts structure first."""
    path = tmp_path / "blobs.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE r(x)")
    blobs = [random.Random(n).randbytes(500) for n in range(40)]
    conn.executemany("INSERT INTO r VALUES (?)", [(b,) for b in blobs])
    conn.commit()
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name='r'").fetchone()[0]
    conn.close()
    raw = path.read_bytes()
    dec = SqlitePageDecoder(reserve=0)
    interior = dec.decode(raw[(root - 1) * 4096:root * 4096], root)
    got = []
    for child in children_of(interior):
        data = raw[(child - 1) * 4096:child * 4096]
        leaf = dec.decode(data, child)
        assert leaf.page_type == "table leaf" and leaf.problems == ()
        got += [r[1] for r in leaf.records]
    assert got == blobs
    assert verdict(data) == "looks encrypted"



def test_the_assumed_reserve_gives_way_to_cells_in_the_last_80_bytes(tmp_path):
    """Plain pages whose tail looks like an IV + HMAC (random BLOBs, or their bytes left by a DELETE without
    secure_delete): no reserve is assumed where cells or the content area reach into the last 80 bytes."""
    path = tmp_path / "blobs.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA secure_delete=OFF")  # (on in Debian's build; off by default in SQLite's)
    conn.execute("CREATE TABLE r(x)")
    conn.execute("CREATE TABLE emptied(x)")
    blobs = [random.Random(n).randbytes(500) for n in range(7)]
    conn.executemany("INSERT INTO r VALUES (?)", [(b,) for b in blobs])
    conn.executemany("INSERT INTO emptied VALUES (?)", [(b,) for b in blobs])
    conn.commit()
    conn.execute("DELETE FROM emptied")
    conn.commit()
    roots = dict(conn.execute("SELECT name, rootpage FROM sqlite_schema"))
    conn.close()
    raw = path.read_bytes()
    page = {n: raw[(n - 1) * 4096:n * 4096] for n in roots.values()}
    assert {n: shannon_entropy(page[n][-80:]) > 5 for n in page} == {n: True for n in page}  # as IV + HMAC do
    dec = SqlitePageDecoder()
    leaf = dec.decode(page[roots["r"]], roots["r"])
    assert (leaf.problems, [r[1] for r in leaf.records]) == ((), blobs)
    assert "(reserve 0: cells reach into the last 80 bytes, so no SQLCipher IV/HMAC)" in leaf.fields[0].value
    empty = dec.decode(page[roots["emptied"]], roots["emptied"])
    assert (empty.page_type, empty.cells, empty.problems) == ("table leaf", 0, ())
    assert "usable size 4096 (reserve 0" in empty.fields[0].value
    assert not any(f.name == "reserved space" for f in empty.fields)


def test_an_empty_table_of_an_sqlcipher_database_keeps_its_iv_and_hmac(tmp_path):
    """Its root page has no cells and its content area starts right at the reserve: 80 bytes stay reserved."""
    def empty_table(conn):
        conn.execute("CREATE TABLE e(x)")
        conn.execute("CREATE TABLE t(x)")
        conn.execute("INSERT INTO t VALUES ('one row')")
        conn.commit()

    made = sqlcipher_db(tmp_path, 1024, fill_with=empty_table)
    root = made.root("e")
    page = SqlitePageDecoder().decode(made.pages[root], root)
    assert (page.page_type, page.cells, page.problems) == ("table leaf", 0, ())
    assert "usable size 944 (reserve 80: SQLCipher 4 default assumed)" in page.fields[0].value
    assert [(f.name, f.start, f.end) for f in page.fields if f.name == "reserved space"] == [
        ("reserved space", 944, 1024)]
    made.conn.close()


# -- robustness ---------------------------------------------------------------------------------

def _page(cells_: list[tuple[int, bytes]], cstart: int = 0, hdr: bytes = b"", size: int = 1024) -> bytes:
    """A hand-made 1 KB table leaf page; ``cells_`` are (offset, bytes)."""
    buf = bytearray(size)
    cstart = cstart or min([o for o, _ in cells_] + [size])
    buf[:8] = hdr or bytes([0x0D, 0, 0]) + len(cells_).to_bytes(2, "big") + cstart.to_bytes(2, "big") + b"\0"
    for i, (off, body) in enumerate(cells_):
        buf[8 + 2 * i:10 + 2 * i] = off.to_bytes(2, "big")
        buf[off:off + len(body)] = body
    return bytes(buf)


@pytest.mark.parametrize("data, problem", [
    (_page([(4, b"")], cstart=900), "cell 0: pointer 4 lies outside the cell content area"),
    (_page([(1016, b"\xff" * 8)]), "cell 0: varint at offset 1016 runs past offset 1024"),
    (_page([(900, bytes([3, 1, 9, 1, 1]))]), "record header size 9 does not fit a payload of 3 bytes"),
    (_page([(900, bytes([4, 1, 2, 25, 97, 98]))]), "record is 8 bytes but the cell says payload 4"),
    (_page([(900, bytes([3, 1, 2, 10, 0]))]), "reserved serial type 10 in column 0"),
    (_page([], hdr=bytes([0x0D, 0, 4, 0, 0, 4, 0, 0])), "first freeblock 4 lies outside 8..1024"),
    (_page([(900, bytes([3, 1, 2, 1, 5]))], hdr=bytes([0x0D, 0x03, 0xB6, 0, 1, 0x03, 0x84, 0])),
     "freeblock at 950 has size 0"),
    (_page([(1000, bytes([0x81, 0x48, 1]))]), "payload of 200 local bytes runs past offset 1024"),
], ids=["pointer", "varint", "header-size", "payload-size", "serial-10", "freeblock", "freeblock-size", "payload"])
def test_bad_bytes_are_reported(data, problem):
    page = SqlitePageDecoder(reserve=0).decode(data)
    assert any(problem in p for p in page.problems), page.problems


def test_fuzz_never_raises(db):
    rng = random.Random(1234)
    dec = SqlitePageDecoder()
    sources = list(db.pages.values())
    for n in range(1500):
        base = bytearray(rng.choice(sources))
        mode = n % 4
        if mode == 0:
            data = rng.randbytes(rng.choice([0, 1, 7, 99, 100, 512, 1008, 4080]))
        elif mode == 1:
            data = bytes(base[:rng.randrange(len(base))])
        else:
            for _ in range(rng.randrange(1, 24)):
                base[rng.randrange(len(base))] = rng.getrandbits(8)
            data = bytes(base)
        page = dec.decode(data, rng.choice([-1, 1, 2]))
        assert not any(p.startswith("decoder error") for p in page.problems), (n, page.problems)
        for top in page.fields:
            for f in top.walk():
                assert 0 <= f.start <= f.end <= len(data), (n, f)


@pytest.mark.parametrize("data, page_type", [
    (b"", "empty"),
    (bytes(4096), "empty"),
    (random.Random(7).randbytes(4096), "encrypted"),
    (random.Random(8).randbytes(1008), "encrypted"),
])
def test_page_types_without_structure(data, page_type):
    assert SqlitePageDecoder().decode(data).page_type == page_type
