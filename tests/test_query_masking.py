"""Secrets on screen and on disk: statement texts show their literals masked, as pg_stat_statements does.

A watched application's query can hold its pgcrypto key (``pgp_sym_decrypt(pan, 'hunter2')``): the
Change target… dialog, the session file and the report show ``pgp_sym_decrypt(pan, $1)`` unless the
user reveals it in the dialog.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

psycopg = pytest.importorskip("psycopg")

SECRET = "hunter2"
QUERY = f"SELECT length(pgp_sym_decrypt(pan, '{SECRET}')) FROM cards"


@pytest.fixture
def cards(pg_cluster):
    """A table of pgcrypto'ed card numbers and a backend whose last query holds the key, as an app's would."""
    pg_cluster.psql("CREATE EXTENSION IF NOT EXISTS pgcrypto; DROP TABLE IF EXISTS cards; "
                    f"CREATE TABLE cards (id int, pan bytea); INSERT INTO cards SELECT g, "
                    f"pgp_sym_encrypt('4111-' || g, '{SECRET}') FROM generate_series(1, 5) g")
    with psycopg.connect(pg_cluster.dsn(), autocommit=True, application_name="shop") as app:
        pid = app.info.backend_pid
        app.execute(QUERY).fetchall()
        yield pid


@pytest.mark.parametrize("dialect, text, masked", [
    ("postgres", "SELECT pgp_sym_decrypt(pan, 'hunter2') FROM cards", "SELECT pgp_sym_decrypt(pan, $1) FROM cards"),
    ("postgres", "SELECT 'it''s', E'a\\'b', $$x'y$$, $q$ z $q$", "SELECT $1, $2, $3, $4"),
    ("postgres", "SELECT t1.c2, 3.5e-2, .5, 0x1F FROM t1", "SELECT t1.c2, $1, $2, $3 FROM t1"),
    ("postgres", "UPDATE t SET a = $1 WHERE b = 'x'", "UPDATE t SET a = $1 WHERE b = $2"),  # after its own params
    ("postgres", "SELECT \"it's\" -- 'no'\n/* 'c' /* nested */ */ 1",
     "SELECT \"it's\" -- 'no'\n/* 'c' /* nested */ */ $1"),
    ("postgres", "SELECT U&'d\\0061t', B'101', X'1F', N'x'", "SELECT $1, $2, $3, $4"),
    ("postgres", "SELECT pgp_sym_decrypt(pan, 'hunter2 truncat", "SELECT pgp_sym_decrypt(pan, $1"),  # cut short
    ("postgres", "", ""),
    ("mysql", "SELECT AES_DECRYPT(pan, \"hunter2\") FROM `t1` # 'c'", "SELECT AES_DECRYPT(pan, ?) FROM `t1` # 'c'"),
    ("mysql", "INSERT INTO t VALUES (1, 'a\\'b', 2.5)", "INSERT INTO t VALUES (?, ?, ?)"),
])
def test_mask_literals(dialect, text, masked):
    from tdescope.app.system.statement_text import mask_literals

    assert mask_literals(text, dialect) == masked
    assert mask_literals(masked, dialect) == masked  # masking twice changes nothing


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "tdescope", *argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ})


def _texts(table) -> list[str]:
    out = []
    for r in range(table.rowCount()):
        for c in range(table.columnCount()):
            item = table.item(r, c)
            out += [item.text(), item.toolTip()]
    return out


def test_the_target_dialog_masks_query_literals_unless_revealed(qtbot, pg_cluster, cards):
    from tdescope.app.engines import ConnectParams
    from tdescope.plugins.postgres import ENGINE
    from tdescope.ui.dialogs.target import TargetDialog

    session = ENGINE.connect(ConnectParams(dsn=pg_cluster.dsn()))
    try:
        choices = session.targets()
    finally:
        session.close()
    assert any(c.pid == cards and SECRET in c.activity for c in choices)  # the server does show it
    dialog = TargetDialog(choices, None)
    qtbot.addWidget(dialog)
    texts = _texts(dialog.table)
    assert not [t for t in texts if SECRET in t], "the key is on screen"
    assert any("pgp_sym_decrypt(pan, $1)" in t for t in texts), texts
    assert not dialog.reveal.isChecked()
    dialog.reveal.setChecked(True)
    assert any(f"pgp_sym_decrypt(pan, '{SECRET}')" in t for t in _texts(dialog.table))
    dialog.reveal.setChecked(False)
    assert not [t for t in _texts(dialog.table) if SECRET in t]


def test_a_recorded_session_and_its_report_hold_no_query_literal(pg_cluster, cards, tmp_path):
    path = tmp_path / "case.tds"
    out = _cli("record", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--sql", QUERY, "--seconds", "1",
               "--captures", "0", "--no-hotspots", "--no-waits", "-o", str(path))
    assert out.returncode == 0, out.stderr
    report = tmp_path / "case.html"
    done = _cli("report", str(path), "-o", str(report))
    assert done.returncode == 0, done.stderr
    assert "pgp_sym_decrypt(pan, $1)" in report.read_text()
    for f in tmp_path.iterdir():
        assert SECRET.encode() not in f.read_bytes(), f"the key is in {f.name}"


def test_a_failed_statements_error_keeps_no_literal_of_it(pg_cluster):
    """The user's --sql failing: the driver's message quotes the statement's text, and that message becomes
    a Problem in the session file and its report. PostgreSQL quotes the token (``at or near "'hunter2'"``),
    MariaDB the rest of the statement (``near ''hunter2')' at line 1``, recorded text)."""
    import psycopg

    from tdescope.app.errors import UserError
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.plugins.postgres.workloads import run_sql

    with psycopg.connect(pg_cluster.dsn(), autocommit=True) as conn:
        for sql in ("SELECT pgp_sym_decrypt(x, 'hunter2' FROM t", "SELECT 1 'hunter2'", "SELECT $$hunter2"):
            with pytest.raises(UserError) as err:
                run_sql(conn, {"sql": sql}, WorkloadControl())
            assert str(err.value).startswith("SQL failed: ") and "hunter2" not in str(err.value), err.value
    from tdescope.plugins.mariadb.workloads import failed_sql_message

    said = failed_sql_message("You have an error in your SQL syntax; check the manual that corresponds to your "
                              "MariaDB server version for the right syntax to use near ''hunter2')' at line 1")
    assert said.startswith("SQL failed: You have an error in your SQL syntax") and "hunter2" not in said


@pytest.mark.parametrize("text, masked", [
    ("SELECT q'[se'cret]', 'x''y', 42, :B1 FROM v$session", "SELECT ?, ?, ?, :B1 FROM v$session"),
    ("WHERE a = Nq'{k}' AND b = q'!a'b!' AND c = :B2", "WHERE a = ? AND b = ? AND c = :B2"),
    ("SELECT sys$x, \"Q'A\" FROM dual", "SELECT sys$x, \"Q'A\" FROM dual"),
])
def test_oracle_alternative_quoting_is_masked_whole(text, masked):
    from tdescope.app.system.statement_text import mask_literals

    assert mask_literals(text, "oracle") == masked
