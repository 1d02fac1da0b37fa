"""InnoDB records the mutation audit found unpinned, against a real MariaDB (the pages of innodb_pages_data):
CHAR in single-byte collations (fixed-length) and in every charset of the server, a UNIQUE secondary
index, a table without a primary key (DB_ROW_ID), and the collation id tables compared with ``information_schema.COLLATIONS``.
"""

from __future__ import annotations

import pytest

from innodb_pages_data import ReplayConnection, innodb_pages
from tdescope.plugins.mariadb import records
from tdescope.plugins.mariadb.pages import InnoDbPageDecoder
from tdescope.plugins.mariadb.records import index_layouts

SINGLE_BYTE_COLUMNS = ("l8", "l5", "l15", "l31", "l47", "l48", "l49", "l94", "a11", "a65")


@pytest.fixture(scope="module")
def facts():
    return innodb_pages()


@pytest.fixture(scope="module")
def layouts(facts):
    return index_layouts(ReplayConnection(facts.dictionary))


@pytest.fixture(scope="module")
def decoder(layouts):
    return InnoDbPageDecoder(layouts)


def _one_width(cs: str, maxlen: int) -> bool:
    """Does every character of ``cs`` take the same bytes (InnoDB: mbminlen == mbmaxlen, so CHAR is fixed)?

    information_schema gives MAXLEN only; of the multi-byte charsets, ucs2 (2) and utf32 (4) are the ones
    whose characters all take MAXLEN bytes.
    """
    return maxlen == 1 or cs in ("ucs2", "utf32")


def test_collation_id_tables_are_the_servers(facts):
    c = facts.collations
    assert {i: c[i][0] for i in (48, 49, 65, 94)} == {48: "latin1_general_ci", 49: "latin1_general_cs",
                                                      65: "ascii_bin", 94: "latin1_spanish_ci"}
    assert records._LATIN1 == {i for i, (_name, cs, _maxlen) in c.items() if cs == "latin1"}
    assert records._ONE_WIDTH == {i for i, (_name, cs, maxlen) in c.items() if _one_width(cs, maxlen)}
    assert c[records._BINARY_COLLATION][:2] == ("binary", "binary")
    assert max(c) <= records._COLLATION_MASK  # every id fits the bits prtype keeps it in


def _records(page):
    return [{c.name: c for c in f.children[3:]} for f in page.fields if f.name.startswith("record ")]


def test_single_byte_char_is_fixed_length_and_utf8mb4_char_is_not(facts, layouts, decoder):
    index_id, root, _space = facts.indexes[("cs_plain", "PRIMARY")]
    cols = {c.name: c for c in layouts[index_id].leaf}
    assert [n for n in SINGLE_BYTE_COLUMNS if cols[n].variable] == []
    assert cols["u"].variable and not cols["n"].variable and not cols["id"].variable
    assert {n: (cols[n].prtype >> 16) & 0xFF for n in SINGLE_BYTE_COLUMNS} == {
        n: int(n[1:]) for n in SINGLE_BYTE_COLUMNS}  # each column has the collation its name says
    page = decoder.decode(facts.page("cs_plain", root), root)
    assert not page.problems and page.cells == 3
    rows = facts.rows["cs_plain"]
    for rec in _records(page):
        row = rows[int(rec["id"].value)]
        for name, value in row.items():
            shown = rec[name]
            if value is None:
                assert (shown.value, shown.end - shown.start) == ("NULL", 0)
                continue
            assert shown.value == str(value), (name, row["id"])  # latin1 decoded as latin1, padding gone
            if name in SINGLE_BYTE_COLUMNS:
                assert shown.end - shown.start == 5  # CHAR(5) in one byte a character: always 5 bytes
            if name == "u":
                assert shown.end - shown.start == max(3, len(value.encode()))  # utf8mb4 CHAR(3): 3 to 12 bytes


def test_unique_secondary_index_is_laid_out_as_a_secondary_index(facts, layouts, decoder):
    index_id, root, _space = facts.indexes[("cs_plain", "u_l48")]
    layout = layouts[index_id]
    assert [c.name for c in layout.leaf] == [c.name for c in layout.node] == ["l48", "id"]
    page = decoder.decode(facts.page("cs_plain", root), root)
    assert not page.problems
    got = sorted((r["l48"].value, int(r["id"].value)) for r in _records(page))
    assert got == sorted(("NULL" if r["l48"] is None else r["l48"], r["id"]) for r in facts.rows["cs_plain"].values())


def test_a_table_without_a_primary_key_is_clustered_on_db_row_id(facts, layouts, decoder):
    index_id, root, _space = facts.indexes[("nopk_plain", "GEN_CLUST_INDEX")]
    layout = layouts[index_id]
    assert [c.name for c in layout.leaf] == ["DB_ROW_ID", "DB_TRX_ID", "DB_ROLL_PTR", "v", "n"]
    assert [(c.name, c.length) for c in layout.node] == [("DB_ROW_ID", 6)]
    page = decoder.decode(facts.page("nopk_plain", root), root)
    assert not page.problems and page.cells == 3
    recs = _records(page)
    row_ids = [int(r["DB_ROW_ID"].value) for r in recs]
    assert row_ids == sorted(row_ids) and len(set(row_ids)) == 3 and row_ids[0] > 0
    assert all(r["DB_ROW_ID"].end - r["DB_ROW_ID"].start == 6 for r in recs)
    assert [(r["v"].value, r["n"].value) for r in recs] == [
        ("NULL" if row["v"] is None else row["v"], "NULL" if row["n"] is None else str(row["n"]))
        for row in facts.rows["nopk_plain"].values()]


# -- every charset of the server (issue 24: cp1250/koi8r CHAR read as variable-length; collation ids > 255) --

WIDE_FIXED = ("c1250", "k", "g", "l2", "uc", "u32")  # CHAR in charsets of one width: fixed-length


def test_char_is_fixed_length_exactly_in_the_servers_one_width_collations(facts):
    """Column.variable for a CHAR in each of the server's collations, against COLLATIONS and its MAXLEN."""
    assert len(facts.collations) > 300 and max(facts.collations) > 1024  # (the NO PAD ids and more)
    wrong = {i: (name, cs, maxlen) for i, (name, cs, maxlen) in facts.collations.items()
             if records.Column("c", 13, (i << 16) | 254, 8).variable == _one_width(cs, maxlen)}
    assert wrong == {}


def test_char_in_every_kind_of_charset_decodes_to_the_servers_rows(facts, layouts, decoder):
    index_id, root, _space = facts.indexes[("cs_wide", "PRIMARY")]
    cols = {c.name: c for c in layouts[index_id].leaf}
    assert {n: cols[n].prtype >> 16 for n in ("my", "u16")} == {"my": 577, "u16": 673}  # the whole id is kept
    page = decoder.decode(facts.page("cs_wide", root), root)
    assert not page.problems and page.cells == 3
    rows = facts.rows["cs_wide"]
    maxlen = {"c1250": 1, "k": 1, "g": 1, "l2": 1, "uc": 2, "u32": 4}
    width = {"c1250": 4, "k": 4, "g": 4, "l2": 4, "uc": 3, "u32": 2}
    for rec in _records(page):
        row = rows[int(rec["id"].value)]
        assert rec["n"].value == ("NULL" if row["n"] is None else str(row["n"]))  # nothing before it misread
        assert rec["my"].value == ("NULL" if row["my"] is None else row["my"])  # utf8mb3, 1 to 3 bytes a char
        for name in WIDE_FIXED:
            f = rec[name]
            assert f.end - f.start == (0 if row[name] is None else width[name] * maxlen[name]), (name, row["id"])
