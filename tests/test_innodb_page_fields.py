"""What the InnoDB decoder shows field by field where the full mutation run (issue 24) found it unpinned,
on the real pages of ``innodb_pages_data`` (and edited copies of them): the index layouts a recording
keeps (``catalog``, ``layouts_from_json``), every INDEX header and record header value and span, the
system space and change buffer names, page-compressed pages (both formats) and off-page references.
"""

from __future__ import annotations

import json
import struct
import zlib

import pytest

from innodb_pages_data import ReplayConnection, innodb_pages
from tdescope.app.probe.entropy import shannon_entropy
from tdescope.plugins.mariadb import pages as innodb
from tdescope.plugins.mariadb import records
from tdescope.plugins.mariadb.pages import InnoDbPageDecoder
from tdescope.plugins.mariadb.records import index_layouts
from tdescope.plugins.mariadb.statements import DICTIONARY_COLUMNS, DICTIONARY_INDEXES


@pytest.fixture(scope="module")
def facts():
    return innodb_pages()


@pytest.fixture(scope="module")
def layouts(facts):
    return index_layouts(ReplayConnection(facts.dictionary))


@pytest.fixture(scope="module")
def decoder(layouts):
    return InnoDbPageDecoder(layouts)


def _records(page):
    return [f for f in page.fields if f.name.startswith("record ")]


# -- the layouts a recording keeps (catalog / layouts_from_json): a report decodes records with them too --

def test_catalog_layouts_survive_json_and_decode_every_page_the_same(facts, layouts, decoder):
    catalog = json.loads(json.dumps(decoder.catalog()))  # what a recording writes and a report reads
    assert list(catalog) == ["layouts"] and len(catalog["layouts"]) == len(layouts) > 20
    again = records.layouts_from_json(catalog["layouts"])
    assert again == layouts  # every index: table, index name, and each field's name, mtype, prtype and len
    assert all(type(k) is int for k in again)
    first_id, first = next(iter(layouts.items()))
    assert catalog["layouts"][str(first_id)] == {
        "table": first.table, "index": first.index, "leaf": [[c.name, c.mtype, c.prtype, c.length] for c in first.leaf],
        "node": [[c.name, c.mtype, c.prtype, c.length] for c in first.node]}
    replayed = InnoDbPageDecoder(again)
    for table in ("types_plain", "types_compact", "cs_plain", "cs_wide", "nopk_plain", "red_wide"):
        for pgno in facts.pages(table):
            assert replayed.decode(facts.page(table, pgno), pgno) == decoder.decode(facts.page(table, pgno), pgno)


def test_unreadable_catalog_entries_are_left_out_one_by_one(layouts):
    good = records.layouts_to_json(layouts)
    first, lay = next(iter(good.items()))
    bad = {
        "x1": lay,  # not an index id (ValueError)
        "2": {**lay, "leaf": 5},  # leaf not a list (TypeError)
        "3": {k: v for k, v in lay.items() if k != "node"},  # no node (KeyError)
        "4": {**lay, "leaf": [["c", "six", 0, 4]]},  # mtype not a number (ValueError)
        "5": {**lay, "node": [["c", 6, 0]]},  # a field short of its length (ValueError)
        "6": {k: v for k, v in lay.items() if k != "table"},  # no table (KeyError)
        "7": {k: v for k, v in lay.items() if k != "index"},  # no index name (KeyError)
        "8": {k: v for k, v in lay.items() if k != "leaf"},  # no leaf (KeyError)
    }
    got = records.layouts_from_json({**bad, first: lay, "9": {**lay, "table": 12, "index": 7}})
    assert got == {int(first): layouts[int(first)], 9: records.IndexLayout(
        "12", "7", layouts[int(first)].leaf, layouts[int(first)].node)}  # each bad entry alone is dropped
    assert records.layouts_from_json(None) == {} and records.layouts_from_json({}) == {}
    named = records.layouts_from_json({"1": {**lay, "leaf": [[5, "6", "256", "4"]], "node": []}})
    assert named[1].leaf == (records.Column("5", 6, 256, 4),) and named[1].node == ()


def test_catalog_reads_the_server_when_it_knows_no_layout(layouts):
    calls = []

    def loader():
        calls.append(1)
        return layouts

    dec = InnoDbPageDecoder(None, loader)
    assert dec.catalog() == {"layouts": records.layouts_to_json(layouts)} and calls == [1]
    assert dec.catalog() == {"layouts": records.layouts_to_json(layouts)} and calls == [1]  # known: not read again
    assert InnoDbPageDecoder(layouts, lambda: {}).catalog() == {"layouts": records.layouts_to_json(layouts)}

    def gone():
        raise OSError("server gone")

    assert InnoDbPageDecoder(None, gone).catalog() == {}
    assert InnoDbPageDecoder().catalog() == {}
    assert InnoDbPageDecoder(None, dict).catalog() == {}  # the server has no user index


def test_layouts_of_tables_the_dictionary_gives_no_columns_or_no_clustered_index(facts, layouts):
    """An index of a table with no columns is left out (not the indexes after it); a table whose clustered
    index is missing from the reply has its secondary indexes end in DB_ROW_ID."""
    log = {k: list(v) for k, v in facts.dictionary.items()}
    big_pk = facts.indexes[("big_plain", "PRIMARY")][0]
    log[DICTIONARY_INDEXES] = [(1, 999999, "ORPHAN", 3, "a")] + log[DICTIONARY_INDEXES]
    got = index_layouts(ReplayConnection(log))
    assert 1 not in got and got == layouts
    cs_pk = facts.indexes[("cs_plain", "PRIMARY")][0]
    log[DICTIONARY_INDEXES] = [r for r in facts.dictionary[DICTIONARY_INDEXES] if r[0] != cs_pk]
    got = index_layouts(ReplayConnection(log))
    unique = got[facts.indexes[("cs_plain", "u_l48")][0]]
    assert [(c.name, c.length) for c in unique.leaf] == [("l48", 5), ("DB_ROW_ID", 6)]
    assert got[big_pk] == layouts[big_pk] and cs_pk not in got


# -- headers: every value from the bytes --

def test_every_index_header_value_and_the_page_directory(facts, decoder):
    for pgno, leaf in ((3, False), (5, True)):
        data = facts.page("big_plain", pgno)
        page = decoder.decode(data, pgno)
        (slots, heap_top, n_heap, free, garbage, last_insert, direction, n_direction, n_recs, max_trx, level,
         index_id) = struct.unpack_from(">HHHHHHHHHQHQ", data, 38)
        header = page.fields[1]
        assert [c.value for c in header.children] == [
            str(slots), f"0x{heap_top:04x}", f"{n_heap & 0x7FFF} (COMPACT format)", f"0x{free:04x}", str(garbage),
            f"0x{last_insert:04x}", str(direction), str(n_direction), str(n_recs), str(max_trx), str(level),
            str(index_id), data[74:84].hex(), data[84:94].hex()]
        assert header.value == f"{n_recs} records, level {level}{' (leaf)' if leaf else ''}, index {index_id}"
        directory = page.fields[-2]
        assert (directory.name, directory.start, directory.end, directory.value) == (
            "page directory", len(data) - 8 - 2 * slots, len(data) - 8, f"{slots} slots")
        fil, trailer = page.fields[0], page.fields[-1]
        assert (fil.name, fil.start, fil.end) == ("FIL header", 0, 38)
        assert (trailer.name, trailer.start, trailer.end, trailer.value) == (
            "FIL trailer", len(data) - 4, len(data), "CRC-32C (full_crc32) or the old format's LSN low half")
        assert [(c.name, c.start, c.end, c.value) for c in trailer.children] == [
            ("checksum / LSN", len(data) - 4, len(data), f"0x{data[-4:].hex()}")]
    fsp = decoder.decode(facts.page("big_plain", 0), 0)
    assert fsp.page_type == "FSP_HDR" and fsp.cells == 0 and fsp.records == ()


def test_the_change_buffer_and_the_system_space_are_named(facts, decoder):
    data = bytearray(facts.page("big_plain", 5))
    for index_id, shown in ((innodb.IBUF_ID_MIN, "0xffffffff00000000: the change buffer of space 0"),
                            (innodb.IBUF_ID_MIN + 7, "0xffffffff00000007: the change buffer of space 7"),
                            (innodb.IBUF_ID_MIN - 1, str(innodb.IBUF_ID_MIN - 1))):
        struct.pack_into(">Q", data, 66, index_id)
        assert InnoDbPageDecoder().decode(bytes(data), 5).fields[1].children[11].value == shown
    struct.pack_into(">Q", data, 66, 18)
    for space, kind in ((0, "INDEX (system)"), (1, "INDEX"), (2, "INDEX")):
        struct.pack_into(">I", data, 34, space)
        assert InnoDbPageDecoder().decode(bytes(data), 5).page_type == kind
        assert InnoDbPageDecoder().summarize(bytes(data)) == (kind, 89)
        assert InnoDbPageDecoder().summarize(bytes(data[:94])) == (kind, 89)  # the page header is all it reads


def test_the_probes_page_number_is_checked_from_page_0(facts, decoder):
    assert decoder.decode(facts.page("big_plain", 5), 0).problems == (
        "page number 5 in the header, 0 from the probe: still encrypted?",)
    assert decoder.decode(facts.page("big_plain", 0), 0).problems == ()
    assert decoder.decode(facts.page("big_plain", 5), -1).problems == ()


def test_every_record_header_field_and_odd_owned_counts(facts, decoder):
    data = bytearray(facts.page("big_plain", 5))
    first = _records(decoder.decode(bytes(data), 5))[0].start + 5
    data[first - 5] = 0x05  # owns 5, not deleted
    page = decoder.decode(bytes(data), 5)
    recs = _records(page)
    assert len(recs) == 89 and sum(r.children[0].value.endswith("owns 4") for r in recs) > 10
    for rec in recs:
        o = rec.start + 5
        info, heap = data[o - 5], struct.unpack_from(">H", data, o - 4)[0]
        rel = struct.unpack_from(">h", data, o - 2)[0]
        assert [(c.name, c.start, c.end, c.value) for c in rec.children[:3]] == [
            ("info bits, owned", o - 5, o - 4, f"0x{info:02x}{' deleted' if info & 0x20 else ''}, owns {info & 0x0F}"),
            ("heap number, type", o - 4, o - 2, f"{heap >> 3}, type {heap & 7}"),
            ("next record", o - 2, o, f"{rel:+d}")]
    assert recs[0].children[0].value == "0x05, owns 5"


def test_a_chain_that_runs_backwards(facts, decoder):
    """Records linked against their order in the page: negative next offsets, shown signed."""
    data = bytearray(facts.page("big_plain", 5))
    o1, o2 = [r.start + 5 for r in _records(decoder.decode(bytes(data), 5))[:2]]
    struct.pack_into(">h", data, innodb.INFIMUM - 2, o2 - innodb.INFIMUM)
    struct.pack_into(">h", data, o2 - 2, o1 - o2)
    struct.pack_into(">h", data, o1 - 2, innodb.SUPREMUM - o1)
    page = decoder.decode(bytes(data), 5)
    assert [r.start + 5 for r in _records(page)] == [o2, o1]
    assert [r.children[2].value for r in _records(page)] == [f"{o1 - o2:+d}", f"{innodb.SUPREMUM - o1:+d}"]
    assert page.problems == ("walked 2 records, the header says 89",)


def test_where_a_compact_record_may_start(facts):
    """A next pointer below 125 (the supremum's end plus a 5-byte header) or in the trailer breaks the chain."""
    data = bytearray(facts.page("big_plain", 5))
    for target, broken in ((124, True), (125, False), (126, False), (len(data) - 9, False), (len(data) - 8, True)):
        struct.pack_into(">h", data, innodb.INFIMUM - 2, target - innodb.INFIMUM)
        problems = InnoDbPageDecoder().decode(bytes(data), 5).problems
        assert (f"record chain broken after offset 0x{innodb.INFIMUM:04x} (next 0x{target:04x})" in problems) is broken


def test_a_chain_longer_than_a_page_can_hold_is_cut(facts):
    """A page of 00 02 pairs links a record every 2 bytes: the walk stops after size // 5 records."""
    data = bytearray(facts.page("big_plain", 5))
    data[124:len(data) - 8] = b"\x00\x02" * ((len(data) - 132) // 2)
    struct.pack_into(">h", data, innodb.INFIMUM - 2, 126 - innodb.INFIMUM)
    page = InnoDbPageDecoder().decode(bytes(data), 5)
    recs = _records(page)
    assert len(recs) == len(data) // 5 + 1
    last = recs[-1].start + 5
    assert page.problems[0] == f"record chain broken after offset 0x{last:04x} (next 0x{last + 2:04x})"


# -- page-compressed pages --

def _pc(facts):
    root = facts.indexes[("pc_plain", "PRIMARY")][1]
    return root, facts.page("pc_plain", root)


def test_full_crc32_compressed_pages_field_by_field(facts, decoder):
    root, data = _pc(facts)
    ptype = struct.unpack_from(">H", data, 24)[0]
    stored = (ptype & 0xFF) << 8
    page = decoder.decode(data, root)
    inner = decoder.decode(zlib.decompressobj().decompress(data[26:stored]), root)
    clear, payload, trailer = page.fields
    assert (clear.start, clear.end, clear.value) == (0, 26, f"PAGE_COMPRESSED, page {root}")
    assert [(c.name, c.value) for c in clear.children] == [
        ("checksum or key version", f"0x{data[:4].hex()}"), ("page number", str(root)),
        ("previous page", "none"), ("next page", "none"), ("LSN", str(struct.unpack_from(">Q", data, 16)[0])),
        ("page type", f"PAGE_COMPRESSED ({ptype})")]
    assert [(c.name, c.start, c.end, c.value) for c in payload.children] == [
        (f"inflated {f.name}", 26, stored, f.value) for f in inner.fields]
    assert trailer.name == "FIL trailer" and page.problems == () and page.cells == inner.cells > 0
    wrong = decoder.decode(data, root + 7)  # the inflated page is checked against the probe's number too
    assert wrong.problems == (f"page number {root} in the header, {root + 7} from the probe: still encrypted?",)
    whole = bytearray(data)
    whole[25] = 0  # no stored size: the stream runs to the page end (zlib stops at its own end)
    got = decoder.decode(bytes(whole), root)
    assert got.fields[1].end == len(data) and got.records == page.records
    bad = bytearray(data)
    bad[26:stored] = bytes(range(256))[: stored - 26]
    broken = decoder.decode(bytes(bad), root).fields[1]
    assert broken.value == f"{stored - 26} bytes stored, {shannon_entropy(bytes(bad[26:stored])):.2f} bits/byte"


def test_old_format_compressed_pages_field_by_field(facts, decoder):
    body = zlib.compress(b"tdescope" * 100)
    page = bytearray(facts.page("big_plain", 5))
    page[38:] = bytes(len(page) - 38)
    page[40:40 + len(body)] = body
    for ptype, name in ((34354, "PAGE_COMPRESSED"), (37401, "PAGE_COMPRESSED_ENCRYPTED")):
        page[24:26] = struct.pack(">H", ptype)
        got = decoder.decode(bytes(page), 5)
        assert got.page_type == name and got.problems == ()
        assert [(c.name, c.start, c.end) for c in got.fields[1].children] == [
            ("inflated (page bytes 40..)", 40, len(page))]
        assert decoder.summarize(bytes(page)) == (name, 0)
    page[40:42] = b"\xff\xff"
    bad = decoder.decode(bytes(page), 5).fields[1]
    assert (bad.name, bad.start, bad.end, bad.value) == ("compressed payload", 40, len(page), "not zlib")


def test_an_encrypted_pages_clear_part(facts, decoder):
    data = facts.page("types_enc", 3)
    page = decoder.decode(data, 3)
    clear = page.fields[0]
    ptype = struct.unpack_from(">H", data, 24)[0]
    assert clear.value == f"{innodb.PAGE_TYPES.get(ptype, f'type {ptype}')}, page 3"
    assert [c.name for c in clear.children] == ["checksum or key version", "page number", "previous page",
                                               "next page", "LSN", "page type"]


# -- records: off-page references, DB_ROW_ID --

def _blob(facts, decoder, table):
    rec = _records(decoder.decode(facts.page(table, 3), 3))[2]
    return {c.name: c for c in rec.children}["bl"]


def test_off_page_references_byte_by_byte(facts, decoder):
    data = bytearray(facts.page("types_plain", 3))
    blob = _blob(facts, decoder, "types_plain")
    ref = data[blob.end - 20:blob.end]
    page_no = struct.unpack_from(">I", ref, 4)[0]
    assert blob.value == f"(20000 bytes, off-page from page {page_no})"  # DYNAMIC: no local prefix
    data[blob.end - 20 + 4] = 0x01  # a page number past 2^24
    data[blob.end - 20 + 12] |= 0xC0  # the owner and inherited flags: not part of the length
    edited = {c.name: c for c in _records(decoder.decode(bytes(data), 3))[2].children}["bl"]
    assert edited.value == f"(20000 bytes, off-page from page {(1 << 24) + page_no})"


def test_db_row_id_is_the_number_in_its_bytes(facts, decoder):
    root = facts.indexes[("nopk_plain", "GEN_CLUST_INDEX")][1]
    data = facts.page("nopk_plain", root)
    for rec in _records(decoder.decode(data, root)):
        f = {c.name: c for c in rec.children}["DB_ROW_ID"]
        assert f.value == str(int.from_bytes(data[f.start:f.end], "big"))


def test_the_first_dictionary_read_is_not_held_back_by_the_throttle(facts, layouts, monkeypatch):
    monkeypatch.setattr(innodb.time, "monotonic", lambda: 0.5)  # a clock that started just now
    calls = []
    dec = InnoDbPageDecoder({}, lambda: calls.append(1) or layouts)
    assert dec.decode(facts.page("big_plain", 5), 5).records[0][-1].startswith("row") and calls == [1]
