"""The Oracle workloads' SQL and output parsing, checked against the seeds' own text."""

import glob
import re
from pathlib import Path

import pytest

from tdescope.app.errors import UserError
from tdescope.plugins.oracle.workload_columns import (
    ColumnVariant,
    column_variants,
    timing_table,
    variant_statements,
)
from tdescope.plugins.oracle.workload_lobs import CREATE_LOB_TEST, LOB_COLUMNS, REDO_SIZE_SQL, lob_table
from tdescope.plugins.oracle.workload_tde import parse_proc_output, setup_statements

SEEDS = Path("/work/shared/seeds")


def seed_text(prefix):
    files = glob.glob(str(SEEDS / f"{prefix}_*.txt"))
    if not files:
        pytest.skip(f"seed {prefix} not available")
    return Path(files[0]).read_text()


def norm(sql):
    return " ".join(sql.replace(";", " ").split()).lower()


@pytest.mark.parametrize("side,s", [("encrypted", "tde"), ("plain", "non")])
def test_seed_000_ddl_is_the_seeds_own(side, s):
    text = seed_text("000")
    stmts = setup_statements(side, "/oratestdb/oradata/testdb")
    for stmt in stmts[:-1]:  # drops, tablespace, table, indexes: each appears verbatim in the seed
        assert norm(stmt) in norm(text), stmt
    # the procedure, from "create or replace procedure test_tab_xxx_proc" to its "end;"
    start = text.index(f"create or replace procedure test_tab_{s}_proc")
    body = text[start: text.index("\n/\n", start)]
    assert stmts[-1] == body.strip()


def test_seed_000_without_a_folder_lets_oracle_name_the_datafile():
    ddl = setup_statements("encrypted")[1]
    assert ddl.startswith("create tablespace test_ts_tde datafile\nsize 10m")
    assert ddl.endswith("encryption default storage (encrypt)")
    with pytest.raises(UserError):
        setup_statements("plain", "/x'; drop user sys; --")


def test_seed_000_output_lines_parse():
    outcomes = [parse_proc_output([line]) for line in seed_text("000").splitlines()
                if line.startswith("test_tab_") and " elapsed=" in line]
    assert [(o.table, o.elapsed_s) for o in outcomes] == [
        ("test_tab_tde", 91.65), ("test_tab_non", 42.31), ("test_tab_tde", 24.86), ("test_tab_non", 18.54)]
    assert outcomes[0].counts() == {"Insert": 1000000, "Delete": 500000, "Update": 500000, "Select": 500000}
    assert outcomes[3].selected == 50000  # the seed's own line says 50000 here
    assert parse_proc_output(["nothing", None, ""]) is None


def test_seed_003_column_variants_and_sql():
    variants = column_variants()
    assert [v.label for v in variants] == [
        "no encryption", "3DES168", "3DES168 NOMAC", "AES128", "AES128 NOMAC", "AES192", "AES192 NOMAC",
        "AES256", "AES256 NOMAC"]
    nomac = ColumnVariant("AES192", True)
    assert variant_statements(nomac)[1] == (
        "create table tds_colenc_aes192_nomac (id number, a varchar2(10) encrypt using 'AES192' 'NOMAC')")
    assert "dbms_random.string('l', 10)" in variant_statements(nomac)[2]
    assert variant_statements(ColumnVariant(None))[1] == "create table tds_colenc_plain (id number, a varchar2(10))"
    with pytest.raises(UserError, match="unknown column encryption algorithm"):
        column_variants(("AES512",))


def test_seed_003_timing_table_uses_the_seeds_numbers():
    # seed 003: plain 0:03, AES192 1:06, AES192 NOMAC 0:23
    table = timing_table([(ColumnVariant(None), 3.0), (ColumnVariant("AES192"), 66.0),
                          (ColumnVariant("AES192", True), 23.0)])
    assert table[0] == ("Column", "Elapsed s", "x plain")
    assert table[2] == ("AES192", "66.000", "22.00")
    assert table[3] == ("AES192 NOMAC", "23.000", "7.67")


def test_seed_001_lob_table_ddl_is_the_seeds_own():
    text = seed_text("001")
    start = text.index("CREATE TABLE lob_test")
    seed_ddl = text[start: text.index(";", start)]
    assert norm(CREATE_LOB_TEST) == norm(seed_ddl)
    for col, storage in LOB_COLUMNS.items():
        kind, logging = storage.split(" ", 1)
        clause = re.search(rf"LOB\({col}\) STORE AS (\w+)\s*\(([^)]*)\)", CREATE_LOB_TEST)
        assert clause[1] == kind.upper() and logging in clause[2]
    assert "v$mystat" in REDO_SIZE_SQL and "'redo size'" in REDO_SIZE_SQL


def test_seed_001_lob_result_table():
    rows = lob_table({"lob1": {"load_s": 2.0, "unload_s": 1.0, "redo_bytes": 21_000_000, "mb": 20.0},
                      "lob5": {"load_s": 10.0, "unload_s": 4.0, "redo_bytes": 700_000, "mb": 20.0}})
    assert rows[1] == ("lob1", "SecureFile LOGGING", "2.000", "1.000", "21.0", "10.0")
    assert rows[2] == ("lob5", "BasicFile NOLOGGING", "10.000", "4.000", "0.7", "2.0")
