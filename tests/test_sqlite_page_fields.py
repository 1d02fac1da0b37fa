"""SQLite page decoder details the engine comparisons do not reach: interior index pages, cell
summaries, header spans, edge geometry (pointer arrays that just fit, long freeblock chains, odd-sized
ciphertext), unknown text encodings and the cheap summary of a truncated interior page.
"""

from __future__ import annotations

import random
import sqlite3
import struct

import pytest

from tdescope.app.probe.entropy import shannon_entropy
from tdescope.plugins.sqlcipher._records import format_value
from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

PAGE = 1024


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    """Pages of a plain 1 KiB-page database with a two-level index and a table."""
    path = tmp_path_factory.mktemp("sqlite") / "fields.db"
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA page_size={PAGE}")
    conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, n)")
    conn.execute("CREATE INDEX t_name ON t(name)")
    conn.executemany("INSERT INTO t VALUES (?,?,?)",
                     [(i, f"name {i:05d}", None if i % 3 else i) for i in range(1, 600)])
    conn.commit()
    conn.close()
    data = path.read_bytes()
    return [data[i:i + PAGE] for i in range(0, len(data), PAGE)]


def test_interior_index_pages_decode_with_their_child_pointers(pages):
    dec = SqlitePageDecoder(reserve=0)
    interior = [(n, p) for n, p in enumerate(pages, 1) if n > 1 and p[0] == 0x02]
    assert interior
    for pgno, data in interior:
        page = dec.decode(data, pgno)
        assert page.page_type == "index interior" and not page.problems, page.problems
        ncells = struct.unpack_from(">H", data, 3)[0]
        assert page.cells == ncells and dec.summarize(data, pgno) == ("index interior", ncells)
        header = page.fields[0]
        assert [(c.name, c.start, c.end) for c in header.children][-1] == ("right-most child page", 8, 12)
        cells = [f for f in page.fields if f.name.split()[-1].isdigit() and f.name.startswith("cell ")]
        assert len(cells) == ncells
        for cell in cells:
            child = struct.unpack_from(">I", data, cell.start)[0]
            assert cell.value.startswith(f"left child {child}, ") and cell.children[0].value == str(child)
        # a capture cut 2 bytes into the pointer array: the cheap summary does not trust the header
        short = data[:8 + 2 * ncells + 2]
        assert dec.summarize(short, pgno) == (dec.decode(short, pgno).page_type, dec.decode(short, pgno).cells)
        assert dec.summarize(short, pgno)[0] != "index interior"


def test_table_cells_summarise_rowid_first_and_nulls_by_name(pages):
    dec = SqlitePageDecoder(reserve=0)
    leaf = next(p for n, p in enumerate(pages, 1) if n > 1 and p[0] == 0x0D)
    page = dec.decode(leaf)
    cells = [f for f in page.fields if f.name.split()[-1].isdigit() and f.name.startswith("cell ")]
    rowid = page.records[0][0]
    first = next(c for c in cells if c.value.startswith(f"rowid {rowid}: "))
    assert first.value == f"rowid {rowid}: NULL, 'name {rowid:05d}', " + ("NULL" if rowid % 3 else str(rowid))
    assert format_value(None) == "NULL"


def test_page_one_header_spans_and_the_unallocated_gap(pages):
    page = SqlitePageDecoder(reserve=0).decode(pages[0], 1)
    header = next(f for f in page.fields if f.name == "database header")
    assert (header.children[0].name, header.children[0].start, header.children[0].end) == ("header string", 0, 16)
    assert header.children[0].value == repr("SQLite format 3\0")
    gap = next(f for f in page.fields if f.name == "unallocated space")
    assert gap.value == f"{gap.end - gap.start} bytes, all zero"


def test_an_unknown_text_encoding_keeps_the_decoders(pages):
    p1 = bytearray(pages[0])
    p1[56:60] = b"\0\0\0\x09"
    page = SqlitePageDecoder(reserve=0, encoding="utf-16-be").decode(bytes(p1), 1)
    assert not page.problems and page.page_type == "table leaf"
    assert page.records[0][1] == "table".encode().decode("utf-16-be", errors="replace")  # the decoder's own
    p1[56:60] = b"\0\0\0\x03"
    assert SqlitePageDecoder(reserve=0).decode(bytes(p1), 1).records[0][1] != "table"  # the header's, UTF-16be


def test_a_pointer_array_that_ends_exactly_at_the_page_end():
    ncells = (512 - 8) // 2
    data = bytearray(512)
    data[0] = 0x0D
    struct.pack_into(">HHHB", data, 1, 0, ncells, 512, 0)
    page = SqlitePageDecoder(reserve=0).decode(bytes(data), 2)
    assert page.page_type == "table leaf" and page.cells == ncells
    assert not any("do not fit" in p for p in page.problems)
    data[0:1] = b"\x0d"
    struct.pack_into(">H", data, 3, ncells + 1)
    assert "looks like a b-tree page but 253 cell pointers do not fit the page" in \
        SqlitePageDecoder(reserve=0).decode(bytes(data), 2).problems


def test_a_long_freeblock_chain_is_walked_to_its_end():
    size, first, count = 32768, 8, 2100  # 8 bytes apart: adjacent freeblocks would be a problem
    data = bytearray(size)
    data[0] = 0x0D
    struct.pack_into(">HHHB", data, 1, first, 0, size, 0)
    for k in range(count):
        fb = first + 8 * k
        struct.pack_into(">HH", data, fb, fb + 8 if k < count - 1 else 0, 4)
    page = SqlitePageDecoder(reserve=0).decode(bytes(data), 2)
    assert sum(f.name.startswith("freeblock @") for f in page.fields) == count and not page.problems


def test_too_short_for_a_btree_header():
    page = SqlitePageDecoder().decode(b"\x0d\x00\x00\x00\x01\x00", 2)
    assert "looks like a b-tree page but too short for a b-tree page header" in page.problems


def test_ciphertext_of_no_page_size_has_no_reserve():
    body = random.Random(5).randbytes(1000)
    page = SqlitePageDecoder().decode(body, 3)
    assert page.page_type == "encrypted"
    assert [(f.name, f.start, f.end) for f in page.fields] == [("ciphertext", 0, 1000)]
    assert page.fields[0].value == f"1000 bytes, {shannon_entropy(body):.2f} bits/byte"
    sized = SqlitePageDecoder().decode(random.Random(5).randbytes(1024), 3)
    assert [(f.name, f.start, f.end) for f in sized.fields] == [("ciphertext", 0, 944), ("reserved space", 944, 1024)]


def test_a_database_of_64_kib_pages(tmp_path):
    """The largest page size: the header stores it as 1, and a page's content may start at 65536 (stored 0)."""
    path = tmp_path / "big.db"
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size=65536")
    conn.execute("CREATE TABLE t(x)")
    conn.execute("CREATE TABLE empty(x)")
    conn.executemany("INSERT INTO t VALUES (?)", [(f"row {i}",) for i in range(50)])
    conn.commit()
    root = conn.execute("SELECT rootpage FROM sqlite_schema WHERE name='empty'").fetchone()[0]
    conn.close()
    data = path.read_bytes()
    pages = [data[i:i + 65536] for i in range(0, len(data), 65536)]
    dec = SqlitePageDecoder()
    first = dec.decode(pages[0], 1)
    header = next(f for f in first.fields if f.name == "database header")
    assert next(c.value for c in header.children if c.name == "page size") == "65536"
    assert first.page_type == "table leaf" and not first.problems
    leaf = dec.decode(pages[1], 2)
    assert (leaf.page_type, leaf.cells, leaf.problems) == ("table leaf", 50, ())
    assert [r[1] for r in leaf.records] == [f"row {i}" for i in range(50)]
    assert "usable size 65536 (reserve 0: the last 80 bytes" in leaf.fields[0].value  # measured, not unknown
    cipher = dec.decode(random.Random(6).randbytes(65536), 2)  # SQLCipher's IV + HMAC end a 64 KiB page too
    assert [(f.name, f.start, f.end) for f in cipher.fields] == [("ciphertext", 0, 65456),
                                                                 ("reserved space", 65456, 65536)]
    empty = dec.decode(pages[root - 1], root)
    assert (empty.page_type, empty.cells, empty.problems) == ("table leaf", 0, ())
    start = next(c for c in empty.fields[0].children if c.name == "cell content area start")
    assert start.value == "0 (65536)"
    gap = next(f for f in empty.fields if f.name == "unallocated space")  # up to the page's very end
    assert (gap.start, gap.end, gap.value) == (8, 65536, "65528 bytes, all zero")


def test_the_sqlite_version_number_is_spelt_out(pages):
    p1 = bytearray(pages[0])
    for number, text in ((3045001, "3.45.1"), (3000002, "3.0.2"), (3999999, "3.999.999")):
        struct.pack_into(">I", p1, 96, number)
        header = next(f for f in SqlitePageDecoder(reserve=0).decode(bytes(p1), 1).fields if f.name == "database header")
        assert header.children[-1].value == f"{number} ({text})"


def _interior(kind: int, right: int, ncells: int, cstart: int, size: int = 1024) -> bytes:
    """A hand-made interior page of ``ncells`` cells packed from ``cstart``, each with left child 7 and key
    ``i`` (a table page's rowid; an index page's one-column record holding ``i``).
    """
    data = bytearray(size)
    struct.pack_into(">BHHHBI", data, 0, kind, 0, ncells, cstart, 0, right)
    for i in range(ncells):
        at = cstart + 8 * i
        struct.pack_into(">H", data, 12 + 2 * i, at)
        key = bytes([i]) if kind == 0x05 else bytes([3, 2, 1, i])  # rowid varint / payload 3: header 2, INT8
        data[at:at + 4 + len(key)] = struct.pack(">I", 7) + key
    return bytes(data)


@pytest.mark.parametrize("kind", [0x02, 0x05], ids=["index", "table"])
def test_interior_pages_a_right_most_child_of_zero_and_a_full_pointer_array(kind):
    dec = SqlitePageDecoder(reserve=0)
    page = dec.decode(_interior(kind, 0, 2, 900), 3)
    assert "looks like a b-tree page but right-most child page is 0" in page.problems
    # content right after the pointer array (no unallocated space): the 12-byte header leaves room for it
    ncells = 100
    full = dec.decode(_interior(kind, 9, ncells, 12 + 2 * ncells), 3)
    assert full.page_type == ("index interior" if kind == 0x02 else "table interior") and full.cells == ncells
    assert not full.problems, full.problems
    assert full.records == (tuple((i,) for i in range(ncells)) if kind == 0x02 else ())
    first = next(f for f in full.fields if f.name == "cell 0")
    kids = [(k.name, k.start, k.end, k.value) for k in first.children][:2]
    assert kids == [("left child page", 212, 216, "7"),
                    ("rowid (key)", 216, 217, "0") if kind == 0x05 else ("payload size", 216, 217, "3")]


def test_a_capture_of_the_btree_header_alone():
    header = bytes([0x0D, 0, 0, 0, 0, 0, 8, 0])  # no cells, content area at 8: the header is the whole page
    page = SqlitePageDecoder(reserve=0).decode(header, 2)
    assert (page.page_type, page.cells) == ("table leaf", 0)
    assert "too short for a b-tree page header" not in " ".join(page.problems)


def test_a_capture_of_the_database_header_alone(pages):
    """Page 1 cut at 100 bytes: the header is all there, the b-tree header is not."""
    page = SqlitePageDecoder(reserve=0).decode(pages[0][:100], 1)
    assert page.page_type == "unknown"
    header = next(f for f in page.fields if f.name == "database header")
    assert next(c.value for c in header.children if c.name == "page size") == str(PAGE)
    assert "b-tree header at offset 100: too short for a b-tree page header" in page.problems


def test_summarize_never_raises_on_a_short_page_one_and_agrees_with_decode(pages):
    dec = SqlitePageDecoder(reserve=0)
    for n in (0, 1, 16, 84, 91, 92, 99, 100, 101, 107):
        data = pages[0][:n]
        page = dec.decode(data, 1)
        assert dec.summarize(data, 1) == (page.page_type, page.cells), n


def test_a_decoder_error_is_a_problem_not_an_exception(pages):
    """The contract: whatever goes wrong inside, decode returns an "unknown" page that says what."""
    leaf = next(p for n, p in enumerate(pages, 1) if n > 1 and p[0] == 0x0D)  # its rows hold TEXT
    page = SqlitePageDecoder(reserve=0, encoding="no-such-codec").decode(leaf)
    assert page.page_type == "unknown" and page.fields == ()
    assert page.problems == ("decoder error: LookupError: unknown encoding: no-such-codec",)


def test_a_64_kib_page_size_field_in_a_shorter_buffer_is_no_page_one_tail():
    """Unknown page number: a buffer is taken for page 1 minus its salt only when its length fits the header's
    page size (1 stands for 65536)."""
    tail = bytearray(4096 - 16)
    struct.pack_into(">HBBBBB", tail, 0, 1, 1, 1, 0, 0x40, 0x20)
    tail[7] = 0x20
    page = SqlitePageDecoder().decode(bytes(tail), -1)
    assert not any(f.name == "database header" for f in page.fields)
    struct.pack_into(">H", tail, 0, 4096)
    assert any(f.name == "database header" for f in SqlitePageDecoder().decode(bytes(tail), -1).fields)


def test_the_summary_needs_the_btree_header_only():
    """Eight bytes of an empty table leaf (content area at 4096) are enough for the cheap summary."""
    header = bytes([0x0D, 0, 0, 0, 0, 0x10, 0, 0])
    assert SqlitePageDecoder().summarize(header, 2) == ("table leaf", 0)
    assert SqlitePageDecoder().summarize(header[:7], 2) != ("table leaf", 0)  # one byte short: decode decides


@pytest.mark.parametrize("kind", [0x02, 0x05], ids=["index", "table"])
def test_an_interior_page_whose_last_cell_reaches_into_a_random_looking_tail(kind):
    """No reserve is assumed when the highest cell (here the last pointer's) ends in the last 80 bytes,
    although those bytes look like an IV + HMAC (leftovers of deleted cells)."""
    data = bytearray(_interior(kind, 9, 10, 500))
    tail_cells = [(i, 1008 - 8 * (9 - i)) for i in (8, 9)]  # the last two cells move to the page's end
    for i, at in tail_cells:
        data[at:at + 8] = data[500 + 8 * i:508 + 8 * i]
        data[500 + 8 * i:508 + 8 * i] = bytes(8)
        struct.pack_into(">H", data, 12 + 2 * i, at)
    data[944:1008] = random.Random(9).randbytes(64)
    page = SqlitePageDecoder().decode(bytes(data), 3)
    assert page.cells == 10 and "(reserve 0: cells reach into the last 80 bytes" in page.fields[0].value
    assert not any(f.name == "reserved space" for f in page.fields)


@pytest.mark.parametrize("serial", [10, 11])
def test_a_reserved_serial_type_is_named_and_reported(serial):
    data = bytearray(1024)
    struct.pack_into(">BHHHB", data, 0, 0x0D, 0, 1, 900, 0)
    struct.pack_into(">H", data, 8, 900)
    data[900:905] = bytes([3, 1, 2, serial, 0])  # payload 3, rowid 1: header of 2, serial type 10 or 11
    page = SqlitePageDecoder(reserve=0).decode(bytes(data), 2)
    field = next(f for top in page.fields for f in top.walk() if f.name == "serial type 0")
    assert field.value == f"{serial} (reserved({serial}))"
    assert f"cell 0: reserved serial type {serial} in column 0" in page.problems


def test_an_all_zero_page_is_empty_even_as_page_one_and_an_all_ones_page_is_not():
    dec = SqlitePageDecoder()
    for pgno in (1, 2, -1):
        assert dec.decode(bytes(4096), pgno) == dec.decode(b"", pgno)  # "empty", nothing else said
        assert dec.decode(b"\x01" * 4096, pgno).page_type != "empty"


def test_reserve_reasons_and_a_reserve_that_leaves_too_little(pages):
    leaf = next(p for n, p in enumerate(pages, 1) if n > 1 and p[0] == 0x0D)
    too_big = SqlitePageDecoder(reserve=600).decode(leaf)
    assert "reserve of 600 bytes leaves less than 480 usable bytes; using 0" in too_big.problems
    assert "(reserve 0: forced)" in too_big.fields[0].value
    cut = SqlitePageDecoder().decode(leaf[:1000])  # no page size: nothing to measure a tail against
    assert "(reserve 0: unknown page geometry)" in cut.fields[0].value
    cipher = SqlitePageDecoder(reserve=80).decode(random.Random(3).randbytes(1024))
    assert [(f.name, f.value) for f in cipher.fields][-1] == ("reserved space", "80 bytes (given)")


def test_page_one_of_a_salt_and_zeros_is_empty_and_of_plain_garbage_unknown():
    dec = SqlitePageDecoder()
    salted = dec.decode(b"\x07" * 16 + bytes(4080), 1)  # (the salt says nothing about the rest)
    assert salted.page_type == "empty" and salted.problems[0].startswith("page 1 has no readable database header")
    assert dec.decode(b"\x07" * 4096, 1).page_type == "unknown"


def test_each_record_header_starts_with_its_size(pages):
    dec = SqlitePageDecoder(reserve=0)
    seen = 0
    for pgno, data in enumerate(pages, 1):
        page = dec.decode(data, pgno)
        for cell in (f for f in page.fields if f.name.startswith("cell ")):
            record = next((k for k in cell.children if k.name == "record"), None)
            if record is None:
                continue
            size = record.children[0].children[0]
            assert (size.name, size.start, size.end, size.value) == (
                "header size", record.start, record.start + 1, str(data[record.start])), (pgno, cell.name)
            seen += 1
    assert seen > 100


def test_a_reserve_of_16_is_an_iv_alone():
    """SQLCipher with cipher_use_hmac off reserves 16 bytes: the IV, and no HMAC bytes."""
    body = random.Random(4).randbytes(1024)
    page = SqlitePageDecoder(reserve=16).decode(body, 3)
    reserved = page.fields[-1]
    assert [(k.name, k.start, k.end, k.value) for k in reserved.children] == [
        ("IV", 1008, 1024, body[1008:].hex()), ("HMAC", 1024, 1024, "")]


def test_a_record_header_too_big_for_its_payload_still_shows_its_size():
    data = bytearray(1024)
    struct.pack_into(">BHHHB", data, 0, 0x0D, 0, 1, 900, 0)
    struct.pack_into(">H", data, 8, 900)
    data[900:905] = bytes([3, 1, 9, 1, 1])  # payload 3, rowid 1, a header of 9
    page = SqlitePageDecoder(reserve=0).decode(bytes(data), 2)
    header = next(f for top in page.fields for f in top.walk() if f.name == "record header")
    assert [(k.name, k.start, k.end, k.value) for k in header.children] == [("header size", 902, 903, "9")]
