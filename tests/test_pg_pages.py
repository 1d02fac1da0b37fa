"""The PostgreSQL page decoder against pageinspect, field by field, on pages built to cover the format.

Each page is read once with ``get_raw_page`` and the same bytes go to the decoder
and to pageinspect's bytea functions (``page_header``, ``heap_page_items``,
``heap_page_item_attrs``, ``bt_page_items``, ``bt_metap``), so hint bits set between
two reads cannot make them disagree. Every field the decoder shows is compared:
the page header, every line pointer, every tuple header field, the NULL bitmap,
each attribute's bytes and value (checked against ``SELECT`` by ctid as well),
TOAST pointers and inline-compressed values, and the b-tree meta page, special
space and index tuples. A few pages are edited afterwards (ctid blocks >= 65536,
a high LSN, a checksum with its top bit set) and handed to pageinspect as bytea:
a relation of 65536 blocks (512 MB) would take too long to build in the suite.
"""

from __future__ import annotations

import struct

import pytest

from tdescope.app.engines.api import ConnectParams
from tdescope.plugins.postgres import ENGINE
from tdescope.plugins.postgres._tuples import PgColumn, decode_tuple, format_value
from tdescope.plugins.postgres.pages import PgPageDecoder

# Written from src/include/access/htup_details.h and storage/itemid.h, not from the decoder.
INFOMASK = {0x0001: "HASNULL", 0x0002: "HASVARWIDTH", 0x0004: "HASEXTERNAL", 0x0008: "HASOID_OLD",
            0x0010: "XMAX_KEYSHR_LOCK", 0x0020: "COMBOCID", 0x0040: "XMAX_EXCL_LOCK", 0x0080: "XMAX_LOCK_ONLY",
            0x0100: "XMIN_COMMITTED", 0x0200: "XMIN_INVALID", 0x0400: "XMAX_COMMITTED", 0x0800: "XMAX_INVALID",
            0x1000: "XMAX_IS_MULTI", 0x2000: "UPDATED", 0x4000: "MOVED_OFF", 0x8000: "MOVED_IN"}
INFOMASK2 = {0x2000: "KEYS_UPDATED", 0x4000: "HOT_UPDATED", 0x8000: "ONLY_TUPLE"}
LP_FLAGS = ["LP_UNUSED", "LP_NORMAL", "LP_REDIRECT", "LP_DEAD"]
PD_FLAGS = {0x1: "PD_HAS_FREE_LINES", 0x2: "PD_PAGE_FULL", 0x4: "PD_ALL_VISIBLE"}
BTP_FLAGS = {0x1: "LEAF", 0x2: "ROOT", 0x4: "DELETED", 0x8: "META", 0x10: "HALF_DEAD", 0x20: "SPLIT_END",
             0x40: "HAS_GARBAGE", 0x80: "INCOMPLETE_SPLIT", 0x100: "HAS_FULLXID"}
# Types whose Python value the decoder gives and psycopg returns alike.
COMPARABLE = {"bool", "int2", "int4", "int8", "oid", "float4", "float8", "text", "varchar", "bpchar", "name",
              "bytea", "char"}

SETUP = r"""
DROP TABLE IF EXISTS pp_types, pp_lens, pp_dropped, pp_mvcc, pp_pruned, pp_idx;
CREATE TABLE pp_types (b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, o oid, t text, vc varchar(300),
    bc char(5), n name, by bytea, num numeric, d date, ts timestamptz, u uuid, j jsonb, c "char");
INSERT INTO pp_types VALUES
    (true, -2, 42, -9000000000, 1.5, -2.25, 4000000000, 'hello', 'varying', 'ab', 'a_name', '\x00ff', 3.14,
     '2024-01-02', '2024-01-02 03:04:05+00', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{"a": [1, 2]}', 'x'),
    (NULL, 7, 8, 9, 0.25, 1e300, 1, 'first null', '', 'abcde', '', '', -1.5e-7, '1999-12-31',
     '1970-01-01 00:00:00+00', '00000000-0000-0000-0000-000000000000', 'null', 'y'),
    (false, 1, 2, 3, -0.0, 3.5, 2, 'last null', 'v', 'a', 'n', '\xdeadbeef', 0, '2000-01-01',
     '2000-01-01 00:00:00+00', 'ffffffff-ffff-ffff-ffff-ffffffffffff', '[]', NULL),
    (true, NULL, 5, 6, 7, 8, 9, 'nulls at 2, 9 and 17', NULL, 'x', 'm', 'b', 1, '2001-02-03',
     '2001-02-03 04:05:06+00', NULL, '{}', 'z'),
    (NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
    (false, 0, 0, 0, 0, 0, 0, '', '', '', '', '', 0, '2024-02-29', '2024-02-29 12:00:00+00',
     '12345678-1234-1234-1234-123456789abc', '""', ' ');

CREATE TABLE pp_lens (id int, t text, b bytea, e text);
ALTER TABLE pp_lens ALTER COLUMN e SET STORAGE EXTERNAL;
INSERT INTO pp_lens SELECT n, repeat('t', n), decode(repeat('ab', n), 'hex'), repeat('e', least(n, 200))
    FROM unnest(ARRAY[0, 1, 126, 127, 128, 129, 200, 252, 253]) n;
INSERT INTO pp_lens VALUES
    (3000, repeat('x', 3000), NULL, NULL),
    (6000, (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 190) g),
     gen_random_bytes(1024) || gen_random_bytes(1024) || gen_random_bytes(1024), repeat('e', 4000)),
    (1, NULL, NULL, repeat('small but external', 2)),
    (96000, (SELECT string_agg(md5((g % 50)::text), '') FROM generate_series(1, 3000) g), NULL, NULL);

CREATE TABLE pp_dropped (a int, b text, c int8, d text);
INSERT INTO pp_dropped VALUES (1, 'dropped text', 10, 'd1'), (2, NULL, 20, 'd2'), (3, repeat('z', 300), 30, NULL);
ALTER TABLE pp_dropped DROP COLUMN b;
INSERT INTO pp_dropped VALUES (4, 40, 'after the drop');
ALTER TABLE pp_dropped ADD COLUMN e int2 DEFAULT 5;
INSERT INTO pp_dropped VALUES (5, 50, 'after the add', 6);

CREATE TABLE pp_mvcc (id int PRIMARY KEY, v text) WITH (fillfactor = 50);
BEGIN;
INSERT INTO pp_mvcc SELECT g, 'v' || g FROM generate_series(1, 10) g;
INSERT INTO pp_mvcc VALUES (11, 'second command');
UPDATE pp_mvcc SET v = 'updated in the inserting transaction' WHERE id = 11;
COMMIT;
UPDATE pp_mvcc SET v = 'hot update' WHERE id = 2;
UPDATE pp_mvcc SET id = 100 WHERE id = 3;
DELETE FROM pp_mvcc WHERE id = 4;
BEGIN;
SELECT * FROM pp_mvcc WHERE id = 5 FOR SHARE;
SELECT * FROM pp_mvcc WHERE id = 6 FOR UPDATE;
COMMIT;

CREATE TABLE pp_pruned (id int PRIMARY KEY, v text) WITH (fillfactor = 50);
INSERT INTO pp_pruned SELECT g, 'v' || g FROM generate_series(1, 20) g;
UPDATE pp_pruned SET v = v || ' again' WHERE id % 3 = 0;
UPDATE pp_pruned SET v = v || ' and again' WHERE id % 3 = 0;
DELETE FROM pp_pruned WHERE id % 5 = 0;

CREATE TABLE pp_idx (id int PRIMARY KEY, t text, k int);
INSERT INTO pp_idx SELECT g, CASE WHEN g % 7 = 0 THEN NULL ELSE 'key ' || g END, g % 5
    FROM generate_series(1, 3000) g;
CREATE INDEX pp_idx_t ON pp_idx (t);
CREATE INDEX pp_idx_k ON pp_idx (k);
CREATE INDEX pp_idx_kt ON pp_idx (k, t);
CREATE INDEX pp_idx_h ON pp_idx USING hash (k);
CREATE TABLE pp_wide (t text);
INSERT INTO pp_wide SELECT (SELECT string_agg(md5(g || '-' || i), '') FROM generate_series(1, 20) i)
    FROM generate_series(1, 400) g;  -- 640 bytes of hex each: too big to share an interior page with many
CREATE INDEX pp_wide_t ON pp_wide (t);
"""

HEAP_CASES = [  # id: (relation, block)
    pytest.param("pp_types", 0, id="every common type, NULLs first/middle/last/all, empty values"),
    pytest.param("pp_lens", 0, id="lengths 0..253, inline compressed, TOAST pointers"),
    pytest.param("pp_dropped", 0, id="dropped column, added column (natts < relation)"),
    pytest.param("pp_mvcc", 0, id="xmax, cid, combo cid, HOT chain, locks, delete"),
    pytest.param("pp_pruned", 0, id="vacuumed: redirect, unused and dead line pointers"),
]
INDEX_CASES = [  # id: (index, which page)
    pytest.param("pp_idx_pkey", "meta", id="b-tree meta page"),
    pytest.param("pp_idx_pkey", "root", id="b-tree root (interior, pivot tuples)"),
    pytest.param("pp_idx_pkey", "leaf", id="b-tree leaf, int4 keys"),
    pytest.param("pp_idx_t", "leaf", id="b-tree leaf, text keys and NULL keys"),
    pytest.param("pp_idx_k", "leaf", id="b-tree leaf, posting lists (deduplicated)"),
    pytest.param("pp_idx_kt", "last leaf", id="b-tree rightmost leaf, two columns with NULLs"),
    pytest.param("pp_wide_t", "interior", id="b-tree interior page below the root (wide keys, 3 levels)"),
]


@pytest.fixture(scope="module")
def pg(pg_cluster):
    """A session on the test cluster with the tables above."""
    if pg_cluster.psql("SELECT to_regclass('pp_idx_kt') IS NULL").strip() == "t":  # (a shared cluster has them)
        pg_cluster.psql(SETUP)
        # (psql -c runs its statements in one transaction: VACUUM on its own; without index cleanup it leaves
        # the deleted rows' line pointers LP_DEAD, and makes HOT chains LP_REDIRECT and LP_UNUSED)
        pg_cluster.psql("VACUUM (INDEX_CLEANUP OFF) pp_pruned")
    s = ENGINE.connect(ConnectParams(dsn=pg_cluster.dsn()))
    yield s
    s.close()


def _raw(pg, relation: str, block: int) -> bytes:
    return bytes(pg.control.execute("SELECT get_raw_page(%s, %s)", (relation, block)).fetchone()[0])


def _names(table: dict, mask: int) -> list[str]:
    return [name for bit, name in table.items() if mask & bit]


def _child(field, name):
    return next(c for c in field.children if c.name == name)


def _top(page, name):
    return next(f for f in page.fields if f.name == name)


def _check_header(pg, raw: bytes, page) -> None:
    lsn, checksum, flags, lower, upper, special, size, version, prune = pg.control.execute(
        "SELECT lsn::text, checksum, flags, lower, upper, special, pagesize, version, prune_xid::text "
        "FROM page_header(%s)", (raw,)).fetchone()
    header = _top(page, "PageHeaderData")
    assert (header.start, header.end) == (0, 24)
    got = {c.name: (c.start, c.end, c.value) for c in header.children}
    assert got == {
        "pd_lsn": (0, 8, lsn),
        "pd_checksum": (8, 10, f"0x{checksum & 0xFFFF:04x}"),
        "pd_flags": (10, 12, f"0x{flags:04x} " + "|".join(_names(PD_FLAGS, flags))),
        "pd_lower": (12, 14, str(lower)),
        "pd_upper": (14, 16, str(upper)),
        "pd_special": (16, 18, str(special)),
        "pd_pagesize_version": (18, 20, f"size {size}, layout version {version}"),
        "pd_prune_xid": (20, 24, prune),
    }
    if upper > lower:
        free = _top(page, "free space")
        assert (free.start, free.end, free.value) == (lower, upper, f"{upper - lower} bytes")


def _check_line_pointers(page, items) -> None:
    """``items``: (lp, lp_off, lp_flags, lp_len) rows."""
    group = _top(page, "line pointers")
    assert (group.start, group.end, group.value) == (24, 24 + 4 * len(items), str(len(items)))
    assert page.cells == len(items)
    got = [(c.name, c.start, c.end, c.value) for c in group.children]
    assert got == [(f"lp {lp}", 24 + 4 * (lp - 1), 28 + 4 * (lp - 1), f"off {off}, len {length}, {LP_FLAGS[flags]}")
                   for lp, off, flags, length in items]


@pytest.mark.parametrize(("relation", "block"), HEAP_CASES)
def test_heap_page_against_pageinspect(pg, relation, block):
    ctl = pg.control
    raw = _raw(pg, relation, block)
    columns = pg.columns(relation)
    page = PgPageDecoder(columns).decode(raw, block)
    assert page.page_type == "heap" and page.problems == ()
    _check_header(pg, raw, page)
    items = ctl.execute(
        "SELECT lp, lp_off, lp_flags, lp_len, t_xmin::text, t_xmax::text, t_field3, t_ctid::text, t_infomask2, "
        "t_infomask, t_hoff, t_bits FROM heap_page_items(%s) ORDER BY lp", (raw,)).fetchall()
    attrs = dict(ctl.execute("SELECT lp, t_attrs FROM heap_page_item_attrs(%s, %s::regclass) ORDER BY lp",
                             (raw, relation)).fetchall())
    assert len(items) >= 5
    _check_line_pointers(page, [r[:4] for r in items])
    tuples = [f for f in page.fields if f.name.startswith("tuple ")]
    assert [t.name for t in tuples] == [f"tuple {r[0]}" for r in sorted(items, key=lambda r: r[1])
                                        if r[2] == 1 and r[3]]
    assert [t.start for t in tuples] == sorted(t.start for t in tuples)
    by_offset = iter(page.records)
    for lp, off, flags, length, xmin, xmax, cid, ctid, mask2, mask, hoff, bits in sorted(items, key=lambda r: r[1]):
        if flags != 1 or not length:
            continue
        tup = _top(page, f"tuple {lp}")
        assert (tup.start, tup.end) == (off, off + length)
        header = tup.children[0]
        assert (header.name, header.start, header.end) == ("tuple header", off, off + hoff)
        got = {c.name: (c.start - off, c.end - off, c.value) for c in header.children}
        natts = mask2 & 0x7FF
        expected = {
            "t_xmin": (0, 4, xmin), "t_xmax": (4, 8, xmax), "t_cid": (8, 12, str(cid)), "t_ctid": (12, 18, ctid),
            "t_infomask2": (18, 20, f"natts {natts}" + "".join(" " + n for n in _names(INFOMASK2, mask2))),
            "t_infomask": (20, 22, f"0x{mask & 0xFFFF:04x} " + "|".join(_names(INFOMASK, mask))),
            "t_hoff": (22, 23, str(hoff)),
        }
        if bits is not None:
            expected["t_bits"] = (23, 23 + len(bits) // 8, bits[:natts] + " (1 = not null)")
        assert got == expected, f"lp {lp}"
        # attributes: the bytes of each non-NULL one are pageinspect's, NULLs are where t_attrs has them
        shown = tup.children[1:]
        values = list(next(by_offset))
        # pageinspect pads a tuple older than an ADD COLUMN with NULLs; the decoder shows what the tuple holds
        assert len(values) == natts and len(attrs[lp]) == len(columns)
        assert [v is None for v in values] == [a is None for a in attrs[lp][:natts]]
        assert all(a is None for a in attrs[lp][natts:])
        present = [(col, a) for col, a in zip(columns, attrs[lp]) if a is not None]
        assert [f.name for f in shown] == [f"{col.name} ({col.typname})" for col, _ in present]
        assert [raw[f.start:f.end] for f in shown] == [bytes(a) for _, a in present], f"lp {lp}"
        _check_values(pg, relation, block, lp, columns, values, shown, raw)
        assert tup.value == ", ".join(format_value(v) for v in values)
    # without the relation's columns: the same headers, each tuple shown by its length, no records
    bare = PgPageDecoder().decode(raw, block)
    assert bare.records == () and bare.problems == ()
    for lp, off, flags, length, *_ in items:
        if flags == 1 and length:
            tup = _top(bare, f"tuple {lp}")
            assert tup.value == f"{length} bytes" and [c.name for c in tup.children] == ["tuple header"]
            assert tup.children[0] == _top(page, f"tuple {lp}").children[0]


def _check_values(pg, relation, block, lp, columns, values, shown, raw) -> None:
    """Each decoded value equals what SELECT returns for the tuple (when it is the visible version)."""
    live = [(i, c) for i, c in enumerate(columns[:len(values)]) if c.name != "(dropped)"]
    row = pg.control.execute(
        f"SELECT {', '.join(c.name for _, c in live)} FROM {relation} WHERE ctid = %s",
        (f"({block},{lp})",)).fetchone()
    fields = iter(shown)
    by_column = {}
    for i, v in enumerate(values):
        if v is not None:
            by_column[i] = next(fields)
    for (i, col), want in zip(live, row or ()):
        got = values[i]
        if want is None:
            if col.typname in COMPARABLE:  # (psycopg reads the jsonb 'null' as None too)
                assert got is None
            continue
        label = by_column[i].value
        if "[toast pointer" in label or "[compressed" in label:
            _check_stored_large_value(pg, relation, col, block, lp, label)
            continue
        if col.typname not in COMPARABLE:
            continue
        if col.typname == "bytea":
            want = bytes(want)
        if col.typname == "float4":
            want = struct.unpack("<f", struct.pack("<f", want))[0]
        assert got == want, f"{relation} ({block},{lp}) {col.name}"


def _check_stored_large_value(pg, relation, col, block, lp, label) -> None:
    size, stored, method = pg.control.execute(
        f"SELECT octet_length({col.name}), pg_column_size({col.name}), pg_column_compression({col.name}) "
        f"FROM {relation} WHERE ctid = %s", (f"({block},{lp})",)).fetchone()
    if "[compressed" in label:
        assert f"[compressed {method}, raw size {size}]" in label
        return
    toast, = pg.control.execute("SELECT reltoastrelid::int FROM pg_class WHERE oid = %s::regclass",
                                (relation,)).fetchone()
    relid, = pg.control.execute("SELECT %s::regclass::oid::int", (relation,)).fetchone()
    chunk_ids = {r[0] for r in pg.control.execute(f"SELECT DISTINCT chunk_id::int FROM pg_toast.pg_toast_{relid}")}
    how = f"compressed {method}" if method else "uncompressed"
    prefix = "[toast pointer: value "
    start = label.index(prefix) + len(prefix)
    value_id = int(label[start:].split()[0])
    assert value_id in chunk_ids
    assert label[start:].endswith(
        f"in toast relation {toast}, {how}, raw size {size}, stored {stored}]"), label


def _index_block(pg, index: str, which: str) -> int:
    ctl = pg.control
    if which == "meta":
        return 0
    if which == "root":
        return ctl.execute("SELECT root FROM bt_metap(%s)", (index,)).fetchone()[0]
    nblocks = ctl.execute("SELECT pg_relation_size(%s::regclass) / 8192", (index,)).fetchone()[0]
    if which == "interior":
        return next(b for b in range(1, nblocks)
                    if ctl.execute("SELECT type FROM bt_page_stats(%s, %s)", (index, b)).fetchone()[0] == "i")
    leaves = [b for b in range(1, nblocks)
              if ctl.execute("SELECT type FROM bt_page_stats(%s, %s)", (index, b)).fetchone()[0] == "l"]
    if which == "last leaf":
        return next(b for b in leaves
                    if ctl.execute("SELECT btpo_next FROM bt_page_stats(%s, %s)", (index, b)).fetchone()[0] == 0)
    return leaves[0]


@pytest.mark.parametrize(("index", "which"), INDEX_CASES)
def test_btree_page_against_pageinspect(pg, index, which):
    ctl = pg.control
    block = _index_block(pg, index, which)
    raw = _raw(pg, index, block)
    page = PgPageDecoder().decode(raw, block)
    assert page.problems == ()
    _check_header(pg, raw, page)
    special = _top(page, "BTPageOpaqueData")
    assert (special.start, special.end) == (8176, 8192)
    prev, nxt, level, flags, cycle = struct.unpack_from("<IIIHH", raw, 8176)
    got = {c.name: (c.start, c.end, c.value) for c in special.children}
    assert got == {
        "btpo_prev": (8176, 8180, str(prev)), "btpo_next": (8180, 8184, str(nxt)),
        "btpo_level": (8184, 8188, str(level)),
        "btpo_flags": (8188, 8190, f"0x{flags:04x} " + "|".join(_names(BTP_FLAGS, flags))),
        "btpo_cycleid": (8190, 8192, str(cycle)),
    }
    if which == "meta":
        assert page.page_type == "b-tree meta" and page.cells == 0
        assert not any(f.name == "line pointers" for f in page.fields)
        meta = ctl.execute("SELECT magic, version, root, level, fastroot, fastlevel, last_cleanup_num_delpages, "
                           "last_cleanup_num_tuples, allequalimage FROM bt_metap(%s)", (index,)).fetchone()
        got = {c.name: (c.start, c.end, c.value) for c in _top(page, "BTMetaPageData").children}
        assert got == {
            "btm_magic": (24, 28, f"0x{meta[0]:06x}"), "btm_version": (28, 32, str(meta[1])),
            "btm_root": (32, 36, str(meta[2])), "btm_level": (36, 40, str(meta[3])),
            "btm_fastroot": (40, 44, str(meta[4])), "btm_fastlevel": (44, 48, str(meta[5])),
            "btm_last_cleanup_num_delpages": (48, 52, str(meta[6])),
            "btm_last_cleanup_num_heap_tuples": (56, 64, str(meta[7])),
            "btm_allequalimage": (64, 65, str(meta[8]).lower()),
        }
        return
    stats = ctl.execute("SELECT btpo_prev, btpo_next, btpo_level, btpo_flags, type FROM bt_page_stats(%s, %s)",
                        (index, block)).fetchone()
    assert stats[:4] == (prev, nxt, level, flags)
    assert page.page_type == {"l": "b-tree leaf", "i": "b-tree interior", "r": "b-tree root"}[stats[4]]
    items = ctl.execute("SELECT itemoffset, ctid::text, itemlen, nulls, vars, data, dead, htid::text, tids::text[] "
                        "FROM bt_page_items(%s) ORDER BY itemoffset", (raw,)).fetchall()
    lps = ctl.execute("SELECT lp, lp_off, lp_flags, lp_len FROM heap_page_items(%s) ORDER BY lp", (raw,)).fetchall()
    _check_line_pointers(page, lps)
    assert len(items) == len(lps) >= 2
    for (lp, ctid, length, nulls, varw, data, dead, htid, tids), (_, off, lp_flags, lp_len) in zip(items, lps):
        item = _top(page, f"item {lp}")
        assert (item.start, item.end) == (off, off + lp_len)
        got = {c.name: (c.start - off, c.end - off, c.value) for c in item.children}
        pivot = level > 0 or (lp == 1 and nxt != 0)  # downlinks, and the high key of a page with a right sibling
        data_start = 16 if nulls else 8
        key_end = data_start + len(data.replace(" ", "")) // 2
        expected = {
            "t_tid": (0, 6, ctid),
            "t_info": (6, 8, f"size {length}" + (" HAS_NULLS" if nulls else "") + (" HAS_VARWIDTH" if varw else "")
                       + (" ALT_TID" if pivot or tids else "")),
        }
        if nulls:
            expected["null bitmap"] = (8, 12, raw[off + 8:off + 12].hex())
        if data:
            expected["key data"] = (data_start, key_end, data.replace(" ", ""))
        if tids:
            expected["posting list"] = (key_end, key_end + 6 * len(tids), " ".join(tids))
        elif pivot and htid:
            expected["heap TID"] = (length - 6, length, htid)
        assert got == expected, f"item {lp}"
        assert raw[off + data_start:off + key_end].hex(" ") == data
        assert dead in (None, lp_flags == 3)


def test_the_pages_cover_the_format(pg):
    """The cases above hold what they claim: a check on the fixture, so that a change to it cannot hollow them."""
    def shown(relation):
        page = PgPageDecoder(pg.columns(relation)).decode(_raw(pg, relation, 0), 0)
        return [f for top in page.fields for f in top.walk()]

    lens = shown("pp_lens")
    labels = " ".join(f.value for f in lens)
    for kind in ("uncompressed, raw size 6080", "compressed pglz, raw size 96000", "[compressed pglz, raw size 3000]"):
        assert kind in labels
    sizes = {f.end - f.start for f in lens if f.name == "t (text)"}
    assert {1, 2, 127, 131, 132, 18} <= sizes  # 1-byte headers up to 126 bytes of data, 4-byte from 127
    assert {"LP_UNUSED", "LP_REDIRECT", "LP_DEAD", "LP_NORMAL"} == {
        f.value.split(", ")[-1] for f in shown("pp_pruned") if f.name.startswith("lp ")}
    bits = {f.value.split()[0] for f in shown("pp_types") if f.name == "t_bits"}
    assert bits == {"011111111111111111", "111111111111111110", "101111110111111011", "000000000000000000"}
    mvcc = " ".join(f.value for f in shown("pp_mvcc"))
    for flag in ("COMBOCID", "HOT_UPDATED", "ONLY_TUPLE", "KEYS_UPDATED", "XMAX_LOCK_ONLY", "XMAX_KEYSHR_LOCK",
                 "XMAX_EXCL_LOCK"):
        assert flag in mvcc


def test_edited_page_against_pageinspect(pg):
    """A ctid block >= 65536, a high LSN, a checksum with its top bit, a prune xid over 2^31: as pageinspect."""
    raw = bytearray(_raw(pg, "pp_mvcc", 0))
    struct.pack_into("<IIH", raw, 0, 0xABCDEF01, 0x10, 0xBEEF)
    struct.pack_into("<I", raw, 20, 4_000_000_000)
    offsets = [struct.unpack_from("<I", raw, 24 + 4 * i)[0] & 0x7FFF for i in range(3)]
    for i, (hi, lo, pos) in enumerate(((0x0001, 0x0000, 1), (0xFFFF, 0xFFFE, 0x1234), (0x8000, 0x0001, 2))):
        struct.pack_into("<HHH", raw, offsets[i] + 12, hi, lo, pos)
    raw = bytes(raw)
    page = PgPageDecoder(pg.columns("pp_mvcc")).decode(raw, 0)
    _check_header(pg, raw, page)
    ctids = dict(pg.control.execute("SELECT lp, t_ctid::text FROM heap_page_items(%s) WHERE lp <= 3", (raw,)))
    assert ctids == {1: "(65536,1)", 2: "(4294967294,4660)", 3: "(2147483649,2)"}
    for lp, ctid in ctids.items():
        assert _child(_child(_top(page, f"tuple {lp}"), "tuple header"), "t_ctid").value == ctid


def test_tuples_outside_the_tuple_area_are_problems(pg):
    raw = bytearray(_raw(pg, "pp_types", 0))
    lower, upper = struct.unpack_from("<HH", raw, 12)
    word = struct.unpack_from("<I", raw, 24)[0]
    struct.pack_into("<I", raw, 24, (word & ~0x7FFF) | (upper - 8))  # lp 1 starts in the free space
    struct.pack_into("<I", raw, 28, (60 << 17) | (1 << 15) | (8192 - 56))  # lp 2 runs past the page end
    page = PgPageDecoder(pg.columns("pp_types")).decode(bytes(raw), 0)
    assert page.problems[:2] == (f"lp 1: tuple at {upper - 8}+{word >> 17} lies outside the tuple area",
                                 "lp 2: tuple at 8136+60 lies outside the tuple area")
    assert not any(f.name in ("tuple 1", "tuple 2") for f in page.fields)
    assert len(page.records) == 4


def test_hash_index_page_is_a_generic_index_page(pg):
    """Special space ending in a page id (0xFF80: hash) is not taken for a b-tree."""
    nblocks, = pg.control.execute("SELECT pg_relation_size('pp_idx_h') / 8192").fetchone()
    block = next(b for b in range(1, nblocks) if pg.control.execute(
        "SELECT count(*) FROM heap_page_items(get_raw_page('pp_idx_h', %s))", (b,)).fetchone()[0] >= 2)
    raw = _raw(pg, "pp_idx_h", block)
    page = PgPageDecoder().decode(raw, block)
    assert page.page_type == "index (special space 16 bytes)" and page.problems == ()
    _check_header(pg, raw, page)
    assert [(f.name, f.start, f.end, f.value) for f in page.fields if f.name == "special space"] == [
        ("special space", 8176, 8192, "16 bytes")]
    lps = pg.control.execute("SELECT lp, lp_off, lp_flags, lp_len FROM heap_page_items(%s) ORDER BY lp",
                             (raw,)).fetchall()
    _check_line_pointers(page, lps)
    assert [(f.name, f.start, f.end, f.value) for f in page.fields if f.name.startswith("item ")] == [
        (f"item {lp}", off, off + length, f"{length} bytes") for lp, off, _, length in sorted(lps, key=lambda r: r[1])]


def test_edited_index_tuple_tid_against_pageinspect(pg):
    """t_tid halves with their top bit set (block >= 2^31, offset >= 2^15) read unsigned, as pageinspect does."""
    block = _index_block(pg, "pp_idx_pkey", "leaf")
    raw = bytearray(_raw(pg, "pp_idx_pkey", block))
    off = struct.unpack_from("<I", raw, 28)[0] & 0x7FFF  # lp 2: a leaf item (lp 1 is the high key)
    struct.pack_into("<HHH", raw, off, 0x8001, 0xFFFE, 0x8002)
    raw = bytes(raw)
    ctid, = pg.control.execute("SELECT ctid::text FROM bt_page_items(%s) WHERE itemoffset = 2", (raw,)).fetchone()
    assert ctid == f"({0x8001FFFE},{0x8002})"
    assert _child(_top(PgPageDecoder().decode(raw, block), "item 2"), "t_tid").value == ctid


def test_buffers_that_are_no_page():
    assert PgPageDecoder().decode(b"x" * 100) == PgPageDecoder().decode(b"x" * 100, 3)
    page = PgPageDecoder().decode(b"x" * 100)
    assert (page.page_type, [(f.name, f.start, f.end, f.value) for f in page.fields]) == (
        "data buffer", [("buffer", 0, 100, "100 bytes")])
    assert PgPageDecoder().decode(b"x" * 8190).page_type == "data buffer"  # not a multiple of 1 KB
    zero = PgPageDecoder().decode(bytes(8192), 0)
    assert (zero.page_type, [(f.name, f.start, f.end, f.value) for f in zero.fields]) == (
        "new (all zeros)", [("zero page", 0, 8192, "never written")])


def test_empty_page_and_bad_headers(pg):
    raw = bytearray(_raw(pg, "pp_types", 0))
    struct.pack_into("<HH", raw, 12, 24, 8192)  # PageInit's empty page: no line pointers, all free
    page = PgPageDecoder().decode(bytes(raw), 0)
    assert page.page_type == "heap" and page.problems == () and page.cells == 0
    assert [f.name for f in page.fields] == ["PageHeaderData", "free space"]
    for offset, fmt, value, why in ((18, "<H", 0x2005, "version 5"), (18, "<H", 0x1004, "size 4096"),
                                    (12, "<H", 20, "lower 20"), (14, "<H", 10, "upper 10"),
                                    (16, "<H", 9000, "special 9000")):
        bad = bytearray(_raw(pg, "pp_types", 0))
        struct.pack_into(fmt, bad, offset, value)
        page = PgPageDecoder().decode(bytes(bad), 0)
        assert page.page_type == "unknown" and [f.name for f in page.fields] == ["PageHeaderData"]
        assert len(page.problems) == 1 and page.problems[0].startswith("not a valid page header (")
        assert why in page.problems[0] and page.problems[0].endswith(", 8192 bytes)")


def _lp(raw: bytes, lp: int) -> tuple[int, int]:
    word = struct.unpack_from("<I", raw, 24 + 4 * (lp - 1))[0]
    return word & 0x7FFF, word >> 17


@pytest.mark.parametrize("damage, problem", [
    ("hoff", "t_hoff 250 outside the tuple at {off}"),
    ("short", "tuple at {off} is 20 bytes, shorter than a tuple header"),
    ("natts", "tuple has 30 attributes, the relation 18"),
    ("cut", "column e of the tuple at {off}: varlena of 131 bytes runs past the tuple end"),
])
def test_damaged_tuples_are_problems(pg, damage, problem):
    relation, lp = ("pp_lens", 4) if damage == "cut" else ("pp_types", 1)
    raw = bytearray(_raw(pg, relation, 0))
    off, length = _lp(raw, lp)
    if damage == "hoff":
        raw[off + 22] = 250
    elif damage == "short":
        struct.pack_into("<I", raw, 24 + 4 * (lp - 1), (20 << 17) | (1 << 15) | off)
    elif damage == "natts":
        struct.pack_into("<H", raw, off + 18, (struct.unpack_from("<H", raw, off + 18)[0] & ~0x7FF) | 30)
    else:  # the 127-byte text loses its end
        struct.pack_into("<I", raw, 24 + 4 * (lp - 1), ((length - 60) << 17) | (1 << 15) | off)
    page = PgPageDecoder(pg.columns(relation)).decode(bytes(raw), 0)
    want = f"lp {lp}: " + problem.format(off=off)
    assert any(p.startswith(want) for p in page.problems), page.problems
    header = _child(_top(page, f"tuple {lp}"), "tuple header") if damage != "short" else None
    if damage == "hoff":
        assert (header.start, header.end) == (off, off + 23) and len(header.children) == 7


def test_cstring_attributes():
    """typlen -2 (cstring): up to its NUL; a missing NUL is a problem, not a read past the tuple."""
    header = struct.pack("<IIIHHHHHB", 5, 0, 0, 0, 0, 1, 2, 0x0802, 24) + b"\x00"
    page = header + b"abc\x00" + b"\x01\x00\x00\x00"
    res = decode_tuple(page, 0, len(page), (PgColumn("c", "cstring", -2, "c"), PgColumn("i", "int4", 4, "i")))
    assert res.values == ["abc", 1] and res.problems == []
    assert [(f.name, f.start, f.end, f.value) for f in res.fields[1:]] == [
        ("c (cstring)", 24, 28, "'abc'"), ("i (int4)", 28, 32, "1")]
    cut = decode_tuple(header + b"abc", 0, 27, (PgColumn("c", "cstring", -2, "c"),))
    assert cut.values == [] and cut.problems == ["column c of the tuple at 0: cstring without its terminating zero"]
    text = decode_tuple(header + "é\udcff".encode("utf-8", "surrogatepass") + b"\x00", 0, 30,
                        (PgColumn("c", "cstring", -2, "c"),))
    assert text.values == ["é\ufffd\ufffd\ufffd"]
