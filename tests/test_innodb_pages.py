"""The InnoDB page decoder against MariaDB's own view of real pages (decoder only, no probe).

The pages come from ``.ibd`` files a private MariaDB wrote (``innodb_pages_data``, made once per
test process): FIL header fields, page types, index ids, root pages and space ids are compared with
``information_schema``, ``INNODB_TABLESPACES_ENCRYPTION`` and ``innochecksum -D``; the decoded
records with the rows the server returns.
"""

from __future__ import annotations

import datetime
import struct
import zlib

import pytest

from innodb_pages_data import BIG_ROWS, ReplayConnection, innodb_pages
from tdescope.plugins.mariadb.pages import InnoDbPageDecoder
from tdescope.plugins.mariadb.records import index_layouts

PLAIN_TYPES = ("types_plain", "types_compact")
#: innochecksum's page type labels, by the decoder's names.
CHECKSUM_TYPES = {"File Space Header": "FSP_HDR", "Insert Buffer Bitmap": "IBUF_BITMAP", "Inode page": "INODE",
                  "Index page": "INDEX", "BLOB page": "BLOB", "Freshly allocated page": "ALLOCATED",
                  "Encrypted Index page": "INDEX"}
ENUM = ("a", "b", "c")


@pytest.fixture(scope="module")
def facts():
    return innodb_pages()


@pytest.fixture(scope="module")
def decoder(facts):
    return InnoDbPageDecoder(index_layouts(ReplayConnection(facts.dictionary)))


def _shown(value) -> str:
    """A server value as the decoder shows it."""
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, datetime.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, datetime.date):
        return value.isoformat()
    return str(value)


def _records(page):
    """Each record of a decoded page as {field name: shown value} (the record header left out)."""
    out = []
    for f in page.fields:
        if f.name.startswith("record "):
            out.append({c.name: c.value for c in f.children[3:]})
    return out


def test_layouts_come_from_the_data_dictionary(facts):
    layouts = index_layouts(ReplayConnection(facts.dictionary))
    ids = {key: v[0] for key, v in facts.indexes.items()}
    primary = layouts[ids[("types_plain", "PRIMARY")]]
    assert primary.table == "pages/types_plain" and primary.index == "PRIMARY"
    names = [c.name for c in primary.leaf]
    assert names[:3] == ["id", "DB_TRX_ID", "DB_ROLL_PTR"] and names[3:] == list(facts.rows["types_plain"][1])[1:]
    assert [c.name for c in primary.node] == ["id"]
    secondary = layouts[ids[("types_plain", "k_vc")]]
    assert [c.name for c in secondary.leaf] == [c.name for c in secondary.node] == ["vc", "id"]
    by_name = {c.name: c for c in primary.leaf}
    assert not by_name["id"].nullable and not by_name["nn"].nullable and by_name["ti"].nullable
    assert by_name["vc"].variable and by_name["vc"].wide and not by_name["vl"].wide
    assert by_name["ch"].variable and not by_name["cl"].variable  # utf8mb4 CHAR is stored variable-length
    assert by_name["bl"].variable and by_name["bl"].wide and not by_name["bi"].variable
    assert by_name["DB_ROLL_PTR"].length == 7 and by_name["DB_TRX_ID"].length == 6


@pytest.mark.parametrize("table", ["types_plain", "types_compact", "types_enc", "big_plain"])
def test_fil_header_and_page_types_match_innochecksum(facts, decoder, table):
    report = facts.checksum_report[table]
    if not report:
        pytest.skip("innochecksum not installed")
    assert facts.checksum_ok[table] == 0  # every page's checksum is right: these are the server's bytes
    space = facts.tables[table][0]
    for pgno, (label, extra) in report.items():
        data = facts.page(table, pgno)
        page = decoder.decode(data, pgno)
        fil = page.fields[0]
        assert fil.name.startswith("FIL header") and fil.start == 0
        kids = {c.name: c for c in fil.children}
        if label == "Freshly allocated page":  # never written: zeros, page number 0 included
            assert data == bytes(len(data)) and page.page_type == "ALLOCATED" and not page.problems
            continue
        assert kids["page number"].value == str(pgno) and (kids["page number"].start, kids["page number"].end) == (4, 8)
        assert kids["page type"].value.startswith(CHECKSUM_TYPES[label])
        assert kids["page type"].value.endswith(f"({struct.unpack_from('>H', data, 24)[0]})")
        assert kids["LSN"].value == str(struct.unpack_from(">Q", data, 16)[0])
        if table == "types_enc" and pgno > 0:  # innochecksum says "Encrypted" of index pages only
            assert data[:4] == struct.pack(">I", facts.encryption[table][1])  # the key version
            assert page.page_type == "encrypted" and page.space_id is None and not page.records
            assert "space id" not in kids and fil.end == 26
            continue
        assert page.page_type == CHECKSUM_TYPES[label]
        assert page.space_id == space and kids["space id"].value == str(space) and not page.problems
        assert fil.value == f"{page.page_type}, page {pgno}, space {space}"
        trailer = page.fields[-1]
        assert (trailer.start, trailer.end) == (len(data) - 4, len(data))
        assert trailer.children[0].value == f"0x{data[-4:].hex()}"
        if label == "Index page":
            want = dict(kv.split("=") for kv in extra.split(", ")[:4])
            header = {c.name: c.value for c in page.fields[1].children}
            assert header["index id"] == want["index id"]
            assert header["level"] == want["page level"]
            assert header["user records"] == want["No. of records"] == str(page.cells)
            assert header["garbage bytes"] == want["garbage"]
            assert len(_records(page)) == page.cells


def test_root_pages_and_index_ids_are_the_data_dictionarys(facts, decoder):
    for (table, index), (index_id, root, space) in facts.indexes.items():
        page = decoder.decode(facts.page(table, root), root)
        if table == "types_enc":
            assert page.page_type == "encrypted"
            continue
        if table == "pc_plain":
            assert page.page_type == "PAGE_COMPRESSED" and f"index {index_id}" in page.fields[1].value
            assert page.space_id == space
            continue
        header = {c.name: c.value for c in page.fields[1].children}
        assert header["index id"] == str(index_id) and page.space_id == space, (table, index)


def test_encrypted_pages_carry_the_key_version_and_hide_the_rest(facts, decoder):
    scheme, key_version = facts.encryption["types_enc"]
    assert scheme == 1 and facts.encryption["types_plain"][0] == 0
    for pgno in (3, 4):
        data = facts.page("types_enc", pgno)
        page = decoder.decode(data, pgno)
        assert page.page_type == "encrypted" and not page.problems
        fil, body, trailer = page.fields
        assert fil.children[0].value == f"0x{key_version:08x}"  # full_crc32: the key version in bytes 0-3
        assert (body.start, body.end) == (26, len(data) - 4) and body.value.startswith(f"{len(data) - 30} bytes")
        assert b"hello" not in data and b"hello" in facts.page("types_plain", 3)


@pytest.mark.parametrize("table", PLAIN_TYPES)
def test_clustered_leaf_records_are_the_rows(facts, decoder, table):
    page = decoder.decode(facts.page(table, 3), 3)
    assert not page.problems, page.problems
    rows = facts.rows[table]
    got = _records(page)
    assert [r["id"] for r in got] == [str(k) for k in sorted(rows)]
    for rec in got:
        row = rows[int(rec["id"])]
        for name, value in row.items():
            shown = rec[name]
            if value is None:
                assert shown == "NULL", (name, row["id"])
            elif name in ("db", "fl"):
                assert float(shown) == value, (name, shown)
            elif name == "en":
                assert shown == str(ENUM.index(value) + 1)
            elif name == "yr":
                assert shown == f"{value:04d}"
            elif name == "bl" and len(value) > 1000:
                assert shown.endswith(f"({len(value)} bytes, off-page from page 5)"), shown
            else:
                assert shown == _shown(value), (name, row["id"], shown)
        assert int(rec["DB_TRX_ID"]) > 0 and len(rec["DB_ROLL_PTR"]) == 14
    assert page.records == tuple(tuple(None if v == "NULL" else v for v in r.values()) for r in got)


@pytest.mark.parametrize("table", PLAIN_TYPES)
def test_record_spans_and_headers(facts, decoder, table):
    data = facts.page(table, 3)
    page = decoder.decode(data, 3)
    records = [f for f in page.fields if f.name.startswith("record ")]
    assert [f.name for f in page.fields[2:4]] == ["infimum", "supremum"]
    heaps = []
    for f in records:
        info, heap, nxt = f.children[:3]
        assert (info.start, heap.start, nxt.start, nxt.end) == (f.start, f.start + 1, f.start + 3, f.start + 5)
        assert heap.value.endswith("type 0")  # ordinary records on a leaf
        heaps.append(int(heap.value.split(",")[0]))
        cols = f.children[3:]
        assert cols[0].start == f.start + 5 and f.end == cols[-1].end
        for a, b in zip(cols, cols[1:]):
            assert a.end == b.start  # fields follow each other
        by = {c.name: c for c in cols}
        assert data[by["id"].start:by["id"].end] == struct.pack(">I", int(by["id"].value) ^ 0x80000000)
    assert sorted(heaps) == list(range(2, 2 + len(records)))  # heap numbers 0, 1: infimum, supremum
    slots = int(page.fields[1].children[0].value)
    directory = [f for f in page.fields if f.name == "page directory"][0]
    assert (directory.start, directory.end) == (len(data) - 8 - 2 * slots, len(data) - 8)


@pytest.mark.parametrize("table", PLAIN_TYPES)
def test_secondary_index_records_are_key_and_primary_key(facts, decoder, table):
    page = decoder.decode(facts.page(table, 4), 4)
    assert not page.problems
    want = sorted(((r["vc"] or "")[:20], r["id"]) for r in facts.rows[table].values())
    got = [(rec["vc"] if rec["vc"] != "NULL" else "", int(rec["id"])) for rec in _records(page)]
    assert sorted(got) == want
    assert [rec["vc"] for rec in _records(page)][0] == "NULL"  # NULL sorts first


def test_off_page_value_points_at_its_blob_pages(facts, decoder):
    page = decoder.decode(facts.page("types_plain", 3), 3)
    rec = [f for f in page.fields if f.name.startswith("record ")][2]
    blob = {c.name: c for c in rec.children}["bl"]
    assert blob.end - blob.start == 20  # DYNAMIC: only the 20-byte reference stays in the record
    assert decoder.decode(facts.page("types_plain", 5), 5).page_type == "BLOB"
    compact = decoder.decode(facts.page("types_compact", 3), 3)
    rec = [f for f in compact.fields if f.name.startswith("record ")][2]
    blob = {c.name: c for c in rec.children}["bl"]
    assert blob.end - blob.start == 768 + 20  # COMPACT: a 768-byte prefix, then the reference
    assert blob.value.startswith("62" * 768)


def test_a_big_table_walks_from_its_root_through_every_leaf(facts, decoder):
    root = facts.indexes[("big_plain", "PRIMARY")][1]
    page = decoder.decode(facts.page("big_plain", root), root)
    assert "level 1" in page.fields[1].value and not page.problems
    children = [int(rec["child page"]) for rec in _records(page)]
    keys = [int(rec["id"]) for rec in _records(page)]
    assert keys == sorted(keys) and keys[0] == 1
    ids, pgno, prev = [], children[0], "none"
    while pgno is not None:
        leaf = decoder.decode(facts.page("big_plain", pgno), pgno)
        kids = {c.name: c.value for c in leaf.fields[0].children}
        assert kids["previous page"] == prev and not leaf.problems
        assert "(leaf)" in leaf.fields[1].value
        got = [int(r[0]) for r in leaf.records]
        assert got[0] == keys[children.index(pgno)]
        ids += got
        assert all(r[-1] == f"row{r[0]}" + "." * 140 for r in leaf.records)
        prev = str(pgno)
        pgno = None if kids["next page"] == "none" else int(kids["next page"])
    assert ids == list(range(1, BIG_ROWS + 1)) and len(children) == 8


def test_page_compressed_pages_are_inflated_to_the_page_the_server_wrote(facts, decoder):
    space = facts.tables["pc_plain"][0]
    root = facts.indexes[("pc_plain", "PRIMARY")][1]
    data = facts.page("pc_plain", root)
    ptype = struct.unpack_from(">H", data, 24)[0]
    assert ptype & 0x8000  # full_crc32's marker of a compressed page
    page = decoder.decode(data, root)
    assert page.page_type == "PAGE_COMPRESSED" and not page.problems
    assert page.space_id == space and page.cells == 50
    assert [r[0] for r in page.records] == [str(i) for i in range(1, 51)]
    assert page.records[0][-1] == "b" * 100
    fil = page.fields[0]
    assert fil.end == 26 and "space id" not in {c.name for c in fil.children}  # bytes 26.. are compressed
    payload = page.fields[1]
    assert payload.start == 26 and "INDEX" in payload.value and f"{(ptype & 0xFF) << 8} bytes stored" in payload.value
    inflated = zlib.decompressobj().decompress(data[26:])
    assert struct.unpack_from(">I", inflated, 34)[0] == space and len(inflated) == len(data)

