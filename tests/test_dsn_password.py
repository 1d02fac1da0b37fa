"""A password in ``--dsn`` is refused with a hint naming the engine's own ways (issue #27, item 12).

The refusal comes before any connection, so no server is needed: the commands run as a user runs them.
"""

from __future__ import annotations

import pytest

from conftest import assert_one_line_error, run_tdescope

MARIADB_DSNS = ("mariadb://root:s3cret@127.0.0.1:1/db", "host=127.0.0.1 port=1 user=root password=s3cret")


@pytest.mark.parametrize("dsn", MARIADB_DSNS)
@pytest.mark.parametrize("command", ["capture", "record", "gui"])
def test_mariadb_refusal_names_mariadbs_ways(command, dsn, tmp_path):
    extra = ["-o", str(tmp_path / "s.tds"), "--seconds", "1"] if command == "record" else []
    result = run_tdescope(command, "--engine", "mariadb", "--dsn", dsn, *extra)
    assert_one_line_error(result, "put no password in --dsn")
    line = result.stderr.strip()
    assert "MYSQL_PWD" in line and "keyring" in line and "asks" in line, line
    assert "PGPASSWORD" not in line and "s3cret" not in line, line
    assert not (tmp_path / "s.tds").exists()


def test_postgres_refusal_still_names_libpqs_ways():
    result = run_tdescope("capture", "--engine", "postgres", "--dsn", "host=127.0.0.1 port=1 password=s3cret")
    assert_one_line_error(result, "put no password in --dsn")
    assert "PGPASSWORD" in result.stderr and "MYSQL_PWD" not in result.stderr
