"""The InnoDB page decoder's fields by name and span, and the branches real pages do not reach (edited
copies of the real pages from ``innodb_pages_data``: a deleted flag, a broken chain, a wrong page number,
an unknown page type, layouts that do not fit, the layout loader's throttle).
"""

from __future__ import annotations

import struct
import zlib

import pytest

from innodb_pages_data import ReplayConnection, innodb_pages
from tdescope.plugins.mariadb.pages import InnoDbPageDecoder
from tdescope.plugins.mariadb.records import index_layouts


@pytest.fixture(scope="module")
def facts():
    return innodb_pages()


@pytest.fixture(scope="module")
def decoder(facts):
    return InnoDbPageDecoder(index_layouts(ReplayConnection(facts.dictionary)))


FIL_FIELDS = [("checksum or key version", 0, 4), ("page number", 4, 8), ("previous page", 8, 12), ("next page", 12, 16),
              ("LSN", 16, 24), ("page type", 24, 26), ("flush LSN or key version", 26, 34), ("space id", 34, 38)]
INDEX_FIELDS = [("directory slots", 38, 40), ("heap top", 40, 42), ("records in heap", 42, 44),
                ("first free record", 44, 46), ("garbage bytes", 46, 48), ("last insert", 48, 50),
                ("direction", 50, 52), ("inserts in that direction", 52, 54), ("user records", 54, 56),
                ("max transaction id", 56, 64), ("level", 64, 66), ("index id", 66, 74),
                ("leaf segment header", 74, 84), ("non-leaf segment header", 84, 94)]


def test_header_field_names_spans_and_values(facts, decoder):
    data = facts.page("big_plain", 3)
    page = decoder.decode(data, 3)
    fil, index = page.fields[0], page.fields[1]
    assert [(c.name, c.start, c.end) for c in fil.children] == FIL_FIELDS
    assert [(c.name, c.start, c.end) for c in index.children] == INDEX_FIELDS
    assert (index.name, index.start, index.end) == ("INDEX header", 38, 94)
    values = {c.name: c.value for c in (*fil.children, *index.children)}
    assert values["previous page"] == values["next page"] == "none"  # the root of a two-level index
    assert values["flush LSN or key version"] == "0" and values["checksum or key version"] == "0x00000000"
    assert values["records in heap"] == f"{struct.unpack_from('>H', data, 42)[0] & 0x7FFF} (COMPACT format)"
    assert values["heap top"] == f"0x{struct.unpack_from('>H', data, 40)[0]:04x}"
    assert values["leaf segment header"] == data[74:84].hex() and values["non-leaf segment header"] == data[84:94].hex()
    assert index.value == f"8 records, level 1, index {facts.indexes[('big_plain', 'PRIMARY')][0]}"
    assert [(f.name, f.start, f.end, f.value) for f in page.fields[2:4]] == [
        ("infimum", 94, 107, "system record"), ("supremum", 107, 120, "system record")]
    leaf = decoder.decode(facts.page("big_plain", 5), 5)
    kids = {c.name: c.value for c in leaf.fields[0].children}
    assert kids["previous page"] == "4" and kids["next page"] == "6" and "(leaf)" in leaf.fields[1].value
    assert decoder.summarize(data, 3) == ("INDEX", 8)
    assert decoder.summarize(facts.page("big_plain", 0)) == ("FSP_HDR", 0)
    assert decoder.summarize(data[:93]) == ("unknown", 0)
    assert decoder.summarize(bytes(24) + b"\x12\x34" + bytes(100)) == ("unknown", 0)


def test_redundant_pages_are_walked_to_their_column_values(facts, decoder):
    """Issue #23 item 6: the old row format (the change buffer, the dictionary, ROW_FORMAT=REDUNDANT) is
    walked and decoded like COMPACT, without a red problem."""
    root = facts.indexes[("red_plain", "PRIMARY")][1]
    page = decoder.decode(facts.page("red_plain", root), root)
    assert page.problems == () and page.cells == 2
    assert page.fields[1].children[2].value.endswith(" (REDUNDANT)")
    records = [f for f in page.fields if f.name.startswith("record ")]
    assert [r.value.split(", ")[0] for r in records] == ["1", "2"]
    assert [(r[0], r[-1]) for r in page.records] == [("1", "one"), ("2", "two")]
    named = {c.name: c.value for c in records[1].children}
    assert named["id"] == "2" and named["v"] == "two" and "DB_TRX_ID" in named
    unnamed = InnoDbPageDecoder().decode(facts.page("red_plain", root), root)  # no layout: fields by number
    second = next(f for f in unnamed.fields if f.name == "record 2")
    assert not unnamed.problems and "two" in [c.value for c in second.children if c.name.startswith("field ")]


def test_the_change_buffers_index_id_is_named_not_shown_as_a_number(facts, decoder):
    data = bytearray(facts.page("red_plain", facts.indexes[("red_plain", "PRIMARY")][1]))
    struct.pack_into(">Q", data, 66, 0xFFFFFFFF00000000)  # the change buffer tree of space 0
    struct.pack_into(">I", data, 34, 0)
    page = decoder.decode(bytes(data), -1)
    assert page.page_type == "INDEX (change buffer)" and not page.problems
    assert "18446744069414584320" not in page.fields[1].value and "the change buffer of space 0" in page.fields[1].value
    assert decoder.summarize(bytes(data)) == ("INDEX (change buffer)", 2)


def test_records_without_a_layout_show_their_bytes(facts):
    data = facts.page("big_plain", 5)
    page = InnoDbPageDecoder().decode(data, 5)
    records = [f for f in page.fields if f.name.startswith("record ")]
    assert len(records) == page.cells == 89 and not page.problems
    first = records[0]
    assert [c.name for c in first.children] == ["info bits, owned", "heap number, type", "next record", "data"]
    body = first.children[3]
    nxt = struct.unpack_from(">h", data, first.start + 3)[0]
    assert (body.start, body.end) == (first.start + 5, first.start + 5 + nxt) == (first.start + 5, first.end)
    assert body.value == "".join(chr(b) if 32 <= b < 127 else "." for b in data[body.start:body.end][:80])
    assert page.records[0] == (body.value,)
    for a, b in zip(records, records[1:]):  # each record's bytes run to the next record's origin
        assert a.children[3].end == b.start + 5 and a.children[3].value == "".join(
            chr(x) if 32 <= x < 127 else "." for x in data[a.start + 5:b.start + 5][:80])
    edited = bytearray(data)
    struct.pack_into(">h", edited, first.start + 3, 8192)
    far = [f for f in InnoDbPageDecoder().decode(bytes(edited), 5).fields if f.name == "record 1"][0]
    assert far.children[3].end == first.start + 5 + 8192
    struct.pack_into(">h", edited, first.start + 3, 8193)
    far = [f for f in InnoDbPageDecoder().decode(bytes(edited), 5).fields if f.name == "record 1"][0]
    assert far.children[3].end == first.start + 5 + 64  # a next pointer that far is not believed
    last = records[-1]
    assert last.end == int(page.fields[1].children[1].value, 16) or last.end - last.start <= 69


def test_a_deleted_record_and_the_owned_count(facts, decoder):
    data = bytearray(facts.page("big_plain", 5))
    page = decoder.decode(bytes(data), 5)
    first = [f for f in page.fields if f.name.startswith("record ")][0]
    data[first.start] |= 0x20
    edited = decoder.decode(bytes(data), 5)
    info = [f for f in edited.fields if f.name.startswith("record ")][0].children[0]
    assert info.value == f"0x{data[first.start]:02x} deleted, owns {data[first.start] & 0x0F}"
    assert [f for f in page.fields if f.name.startswith("record ")][0].children[0].value == \
        f"0x{facts.page('big_plain', 5)[first.start]:02x}, owns 0"
    heap = first.children[1]
    raw = struct.unpack_from(">H", data, first.start + 1)[0]
    assert heap.value == f"{raw >> 3}, type {raw & 7}" and raw >> 3 > 1
    struct.pack_into(">H", data, first.start + 1, 0x8003)
    high = [f for f in decoder.decode(bytes(data), 5).fields if f.name.startswith("record ")][0]
    assert high.children[1].value == "4096, type 3"


def test_a_broken_chain_and_a_wrong_count_are_problems(facts, decoder):
    data = bytearray(facts.page("big_plain", 5))
    page = decoder.decode(bytes(data), 5)
    third = [f for f in page.fields if f.name.startswith("record ")][2]
    struct.pack_into(">h", data, third.start + 3, 0)  # next 0: a chain that stops
    broken = decoder.decode(bytes(data), 5)
    assert broken.cells == 89 and len(broken.records) == 3
    assert broken.problems == (f"record chain broken after offset 0x{third.start + 5:04x} (next 0x0000)",
                               "walked 3 records, the header says 89")
    last = [f for f in page.fields if f.name.startswith("record ")][-1]
    tail = bytearray(facts.page("big_plain", 5))
    struct.pack_into(">h", tail, last.start + 3, 0)
    raw = InnoDbPageDecoder().decode(bytes(tail), 5)
    heap_top = int(raw.fields[1].children[1].value, 16)
    assert [f for f in raw.fields if f.name == last.name][0].end == heap_top  # no next: the data runs to the heap top
    for target in (100, 120, len(data) - 8, len(data) - 6):  # the infimum, the supremum's bytes, the directory
        struct.pack_into(">h", data, third.start + 3, target - (third.start + 5))
        edited = decoder.decode(bytes(data), 5)
        assert edited.problems[0] == f"record chain broken after offset 0x{third.start + 5:04x} (next 0x{target:04x})"
        assert len(edited.records) == 3
    data = bytearray(facts.page("big_plain", 5))
    loop = [f for f in page.fields if f.name.startswith("record ")][1]
    struct.pack_into(">h", data, third.start + 3, loop.start - third.start)  # a cycle
    cycle = decoder.decode(bytes(data), 5)
    assert "record chain broken" in cycle.problems[0] and len(cycle.records) == 3


def test_short_pages_wrong_numbers_and_unknown_types(facts, decoder):
    assert decoder.decode(bytes(45)).problems == ("45 bytes: too short for an InnoDB page",)
    assert decoder.decode(bytes(45)).page_type == "unknown" and decoder.decode(bytes(46)).page_type == "ALLOCATED"
    page = decoder.decode(facts.page("big_plain", 5), 6)
    assert page.problems == ("page number 5 in the header, 6 from the probe: still encrypted?",)
    odd = bytearray(facts.page("types_plain", 0))
    odd[24:26] = b"\x12\x34"
    page = decoder.decode(bytes(odd), 0)
    assert page.page_type == "type 4660" and page.problems == (
        "unknown page type 4660: encrypted bytes, or not an InnoDB page",)


def test_an_unknown_index_asks_the_loader_at_most_every_reload(facts, monkeypatch):
    from tdescope.plugins.mariadb import pages

    layouts = index_layouts(ReplayConnection(facts.dictionary))
    calls = []
    clock = [100.0]
    monkeypatch.setattr(pages.time, "monotonic", lambda: clock[0])

    def loader():
        calls.append(clock[0])
        return layouts

    dec = InnoDbPageDecoder({}, loader)
    page = dec.decode(facts.page("big_plain", 5), 5)
    assert calls == [100.0] and page.records[0][-1].startswith("row")
    dec.decode(facts.page("big_plain", 5), 5)
    clock[0] += pages.RELOAD_S * 3
    dec.decode(facts.page("big_plain", 5), 5)
    assert calls == [100.0]  # known now: not asked again, however long after
    dec.layouts = {}
    dec.decode(facts.page("big_plain", 5), 5)
    assert calls == [100.0, clock[0]]  # unknown again, long enough after: asked
    calls.clear()
    dec.layouts = {}
    clock[0] += pages.RELOAD_S - 0.01
    assert dec.decode(facts.page("big_plain", 5), 5).records[0][0].startswith(".")  # raw bytes shown
    assert calls == []
    clock[0] += 0.01
    dec.decode(facts.page("big_plain", 5), 5)
    assert len(calls) == 1

    def gone():
        raise OSError("server gone")

    quiet = InnoDbPageDecoder(None, gone)
    assert quiet.layouts == {} and not quiet.decode(facts.page("big_plain", 5), 5).problems
    static = InnoDbPageDecoder(layouts)
    assert static.decode(facts.page("big_plain", 5), 5).records[0][-1].startswith("row")


def test_a_record_that_does_not_fit_its_layout_keeps_its_bytes(facts):
    from tdescope.plugins.mariadb.records import Column, IndexLayout

    index_id = facts.indexes[("big_plain", "PRIMARY")][0]
    huge = (Column("id", 6, 256 | 512, 4), Column("blob", 3, 256, 20000))
    page = InnoDbPageDecoder({index_id: IndexLayout("pages/big_plain", "PRIMARY", huge, huge[:1])}).decode(
        facts.page("big_plain", 5), 5)
    assert len(page.problems) == 89 and all(p.startswith("record at 0x") and p.endswith(
        "does not fit pages/big_plain.PRIMARY: field runs past the page") for p in page.problems)
    raw = InnoDbPageDecoder().decode(facts.page("big_plain", 5), 5)
    assert page.records == raw.records  # the bytes, as without a layout


def test_encrypted_and_compressed_field_names(facts, decoder):
    enc = decoder.decode(facts.page("types_enc", 3), 3)
    assert [(f.name, f.start) for f in enc.fields] == [("FIL header (clear part)", 0), ("encrypted", 26),
                                                      ("FIL trailer", len(facts.page("types_enc", 3)) - 4)]
    assert [c.name for c in enc.fields[-1].children] == ["checksum / LSN"]
    root = facts.indexes[("pc_plain", "PRIMARY")][1]
    data = facts.page("pc_plain", root)
    page = decoder.decode(data, root)
    stored = (struct.unpack_from(">H", data, 24)[0] & 0xFF) << 8
    payload = page.fields[1]
    inner = decoder.decode(zlib.decompressobj().decompress(data[26:stored]), root)
    assert (payload.name, payload.start, payload.end) == ("compressed payload", 26, stored)
    assert payload.value == (f"zlib, {stored} bytes stored, {len(data)} inflated: "
                             f"{inner.fields[0].value}; {inner.fields[1].value}")
    assert [c.name for c in payload.children] == [f"inflated {f.name}" for f in inner.fields]
    bad = bytearray(data)
    bad[26:stored] = bytes(range(256))[: stored - 26]
    broken = decoder.decode(bytes(bad), root)
    assert broken.page_type == "PAGE_COMPRESSED"
    assert [(f.name, f.start, f.end) for f in broken.fields[:2]] == [("FIL header (clear part)", 0, 26),
                                                                    ("compressed payload", 26, stored)]
    assert broken.fields[1].value.startswith(f"{stored - 26} bytes stored, ") and broken.problems == (
        "page-compressed payload that does not inflate to a page with zlib (another algorithm, or still encrypted)",)


def test_the_old_page_compressed_format(facts, decoder):
    """Before full_crc32: type 34354, the FIL header clear, a 2-byte header at 38, the zlib stream from 40."""
    body = zlib.compress(b"tdescope" * 100)
    page = bytearray(facts.page("big_plain", 5))
    page[24:26] = struct.pack(">H", 34354)
    page[38:] = bytes(len(page) - 38)
    page[40:40 + len(body)] = body
    got = decoder.decode(bytes(page), 5)
    assert got.page_type == "PAGE_COMPRESSED" and not got.problems
    payload = got.fields[1]
    assert (payload.name, payload.start, payload.end) == ("compressed payload", 40, len(page))
    assert payload.value == f"zlib, {len(page) - 40} bytes stored, 800 inflated"
    assert payload.children[0].name == "inflated (page bytes 40..)" and payload.children[0].value == "tdescope" * 25
    page[40:42] = b"\xff\xff"
    bad = decoder.decode(bytes(page), 5)
    assert bad.fields[1].value == "not zlib" and bad.problems == (
        "page-compressed payload that does not inflate with zlib (another algorithm, or still encrypted)",)


def test_a_new_index_is_learnt_at_its_first_page_however_recent_the_last_read(facts, monkeypatch):
    """Issue #23 item 7: a lesson drops and creates its table again; its new index is read from the
    dictionary at once, not 2 s after a dictionary or change buffer page made us read it; the change
    buffer's reserved ids never make us read it."""
    from tdescope.plugins.mariadb import pages

    layouts = index_layouts(ReplayConnection(facts.dictionary))
    clock = [100.0]
    monkeypatch.setattr(pages.time, "monotonic", lambda: clock[0])
    calls = []
    big_id = facts.indexes[("big_plain", "PRIMARY")][0]
    first = {k: v for k, v in layouts.items() if k != big_id}  # the dictionary before big_plain was made

    def loader():
        calls.append(clock[0])
        return first if len(calls) == 1 else layouts

    dec = InnoDbPageDecoder({}, loader)
    red_root = facts.indexes[("red_plain", "PRIMARY")][1]
    assert dec.decode(facts.page("red_plain", red_root), red_root).records[0][-1] == "one"
    clock[0] += 0.1
    page = dec.decode(facts.page("big_plain", 5), 5)  # another unknown index, 0.1 s later
    assert len(calls) == 2 and page.records[0][-1].startswith("row")
    ibuf = bytearray(facts.page("red_plain", red_root))
    struct.pack_into(">Q", ibuf, 66, pages.IBUF_ID_MIN)
    dec.decode(bytes(ibuf), -1)
    assert len(calls) == 2


def test_redundant_record_headers_field_by_field(facts, decoder):
    """The 6-byte REDUNDANT header (rem0rec.h: info bits and n_owned, 13-bit heap number, 10-bit field count,
    the 1-byte-offsets flag, the absolute next offset) read from the bytes here, checked against the
    server's facts: heap numbers from 2 (0 and 1 are the system records), four fields (id, DB_TRX_ID,
    DB_ROLL_PTR, v), the chain ending at the supremum (116)."""
    root = facts.indexes[("red_plain", "PRIMARY")][1]
    data = facts.page("red_plain", root)
    page = decoder.decode(data, root)
    system = [(f.name, f.start, f.end, f.value) for f in page.fields if f.name in ("infimum", "supremum")]
    assert system == [("infimum", 95, 109, "system record (REDUNDANT)"),
                      ("supremum", 110, 125, "system record (REDUNDANT)")]
    records = [f for f in page.fields if f.name.startswith("record ")]
    origin = struct.unpack_from(">H", data, 99)[0]  # the infimum's next
    for i, (rec, row) in enumerate(zip(records, page.records)):
        info, hi, lo, nxt = data[origin - 6], data[origin - 5], data[origin - 4], struct.unpack_from(">H", data,
                                                                                                      origin - 2)[0]
        heap_no, n_fields = (hi << 5) | (lo >> 3), ((lo & 0x07) << 7) | (data[origin - 3] >> 1)
        assert (heap_no, n_fields) == (2 + i, 4)
        assert [(c.name, c.start, c.end, c.value) for c in rec.children[:3]] == [
            ("info bits, owned", origin - 6, origin - 5, f"0x{info:02x}, owns {info & 0x0F}"),
            ("heap number, fields", origin - 5, origin - 2, f"{heap_no}, {n_fields}"),
            ("next record", origin - 2, origin, f"0x{nxt:04x}")]
        assert (rec.start, rec.end) == (origin - 6, rec.children[-1].end)
        assert rec.value == ", ".join(row) and rec.children[3].start == origin
        origin = nxt
    assert origin == 116 and len(records) == 2


def test_compact_record_summaries_are_their_values(facts, decoder):
    page = decoder.decode(facts.page("types_plain", 3), 3)
    records = [f for f in page.fields if f.name.startswith("record ")]
    assert [r.value for r in records] == [", ".join("NULL" if v is None else v for v in row) for row in page.records]


def test_the_inflated_text_shows_printable_ascii_only():
    from tdescope.plugins.mariadb.pages import _compressed

    problems: list[str] = []
    field = _compressed(b"\x00" * 40 + zlib.compress(bytes([31, 32, 33, 126, 127, 65, 200]) * 40), 40, problems)
    assert field.children[0].value == (". !~.A." * 40)[:200] and problems == []


def test_text_with_invalid_utf8_is_replaced_and_off_page_prefixes_are_set_apart(facts, decoder):
    from tdescope.plugins.mariadb.records import Column, _value

    assert _value(Column("c", 12, 45 << 16, 4), b"a\xff") == "a\ufffd"  # utf8mb4_general_ci VARCHAR
    assert _value(Column("c", 12, 8 << 16, 4), b"a\xff") == "a\xff"  # latin1
    compact = decoder.decode(facts.page("types_compact", 3), 3)
    rec = [f for f in compact.fields if f.name.startswith("record ")][2]
    blob = {c.name: c for c in rec.children}["bl"]
    assert blob.value.startswith("62" * 768 + " (20000 bytes, off-page from page ")


def test_redundant_records_with_two_byte_offsets_and_nulls(facts, decoder):
    """Records over 127 bytes keep 2-byte end offsets (their top bit the NULL flag); a NULL is None."""
    root = facts.indexes[("red_wide", "PRIMARY")][1]
    data = facts.page("red_wide", root)
    page = decoder.decode(data, root)
    assert page.problems == () and page.cells == 2
    assert [(r[0], r[3], r[4]) for r in page.records] == [("1", "w" * 150, None), ("2", None, "5")]
    first = next(f for f in page.fields if f.name == "record 1")
    origin = first.children[3].start
    assert data[origin - 3] & 1 == 0  # the 1-byte-offsets flag is clear: 2-byte offsets
    fields = {c.name: c for c in first.children[3:]}
    assert (fields["v"].end - fields["v"].start, fields["v"].value) == (150, "w" * 150)
    assert fields["n"].value == "NULL" and first.value.endswith(", NULL")


def _red(facts):
    root = facts.indexes[("red_plain", "PRIMARY")][1]
    return root, bytearray(facts.page("red_plain", root))


def test_redundant_headers_with_every_bit_and_a_deleted_record(facts, decoder):
    root, data = _red(facts)
    first = struct.unpack_from(">H", data, 99)[0]
    data[first - 6] = 0x20 | 0x0F  # deleted, owns 15
    data[first - 5], data[first - 4] = 0xFF, 0xF8 | (data[first - 4] & 0x07)  # heap number 8191
    rec = next(f for f in decoder.decode(bytes(data), root).fields if f.name == "record 1")
    info, heap = rec.children[0].value, rec.children[1].value
    assert info == "0x2f deleted, owns 15" and heap.startswith("8191, ")
    data[first - 4] = (data[first - 4] & 0xF8) | 0x07  # the field count's top bits: 896 + its low 7
    page = decoder.decode(bytes(data), root)  # (the record no longer fits its layout: a problem, no fields)
    assert page.problems[0].startswith(f"record at 0x{first:04x}: field ")


@pytest.mark.parametrize("nxt, why", [(130, "before the first record can start"), (16384 - 8, "in the trailer"),
                                      (None, "a loop")])
def test_a_broken_redundant_chain_is_a_problem(facts, decoder, nxt, why):
    root, data = _red(facts)
    first = struct.unpack_from(">H", data, 99)[0]
    target = first if nxt is None else nxt
    struct.pack_into(">H", data, first - 2, target)  # record 1's next
    page = decoder.decode(bytes(data), root)
    assert page.problems == (f"record chain broken after offset 0x{first:04x} (next 0x{target:04x})",
                             "walked 1 records, the header says 2"), why
    assert [f.name for f in page.fields if f.name.startswith("record ")] == ["record 1"]
    struct.pack_into(">H", data, first - 2, 131)  # the first place a record can start: not a problem by itself
    assert not any(p.startswith("record chain broken") for p in decoder.decode(bytes(data), root).problems)


def test_unnamed_redundant_fields_show_printable_ascii(facts):
    root, data = _red(facts)
    first = struct.unpack_from(">H", data, 99)[0]
    data[first + 4 + 6 + 7:first + 4 + 6 + 7 + 3] = bytes([32, 126, 127])  # v = ' ~\x7f'
    page = InnoDbPageDecoder().decode(bytes(data), root)
    rec = next(f for f in page.fields if f.name == "record 1")
    values = [c.value for c in rec.children if c.name.startswith("field ")]
    assert values[0] == "...." and values[-1] == " ~."
