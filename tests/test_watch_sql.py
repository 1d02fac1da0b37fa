"""What tdescope runs on a server it did not start: catalogs and statistics views only, each statement listed.

A real PostgreSQL with ``log_statement=all`` and a real MariaDB with its general log, each with a role that
may read no table (and a table of cards it may not read): a watch-mode ``record --target-pid`` must leave
only the listed statements in the server's log (the same lists the README shows) and no ERROR. Also here:
the end of the watched backend (``pg_ctl restart``) ends a recording with the promised line, and the one-line
refusals of watch mode (a wrong MariaDB pid, tdescope's own idle backend, MariaDB's waits switched off).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import assert_one_line_error

psycopg = pytest.importorskip("psycopg")

WATCHER = "watcher"


def _cli(*argv, timeout=180):
    return subprocess.run([sys.executable, "-m", "tdescope", *argv], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env={**os.environ})


def _as_logged(statement: str) -> str:
    """A psycopg statement as the server logs it: ``%s`` becomes ``$1``, ``$2``... and ``%%`` is ``%``."""
    n = [0]

    def number(_m) -> str:
        n[0] += 1
        return f"${n[0]}"
    return re.sub(r"%s", number, statement).replace("%%", "%")


# -- PostgreSQL ------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def logged_pg():
    """A cluster of the test's own logging every statement (user first), a role with pg_monitor and no table
    privileges, and a table of cards only the superuser may read."""
    from pgcluster import PgCluster

    if not Path("/usr/lib/postgresql/15/bin/initdb").exists():
        pytest.skip("PostgreSQL server binaries (initdb) are not installed")
    cluster = PgCluster().start()
    cluster.wait_sampling = Path("/usr/lib/postgresql/15/lib/pg_wait_sampling.so").exists()
    try:
        if cluster.wait_sampling:  # the server samples waits itself: its history, in a database of its own
            cluster.psql("ALTER SYSTEM SET shared_preload_libraries = 'pg_wait_sampling'")
            cluster.restart()
            cluster.psql("CREATE DATABASE sampled")
            cluster.psql("CREATE EXTENSION pg_wait_sampling", dbname="sampled")
        cluster.psql("ALTER SYSTEM SET log_statement = 'all'")
        cluster.psql("ALTER SYSTEM SET log_line_prefix = '[%u] '")
        cluster.psql("SELECT pg_reload_conf()")
        cluster.psql(f"CREATE ROLE {WATCHER} LOGIN; GRANT pg_monitor TO {WATCHER}; "
                     "CREATE TABLE cards (id int, pan bytea); INSERT INTO cards SELECT g, "
                     "pgp_sym_encrypt('4111-' || g, 'k') FROM generate_series(1, 50) g; "
                     "REVOKE ALL ON cards FROM PUBLIC")
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def app_backend(logged_pg):
    """An application's backend decrypting cards in a loop (the superuser's); its pid."""
    stop = threading.Event()
    conn = psycopg.connect(logged_pg.dsn(), autocommit=True, application_name="shop")
    pid = conn.info.backend_pid

    def loop() -> None:
        try:
            while not stop.is_set():
                conn.execute("SELECT sum(length(pgp_sym_decrypt(pan, 'k'))) FROM cards").fetchone()
        except psycopg.Error:
            pass  # the server restarted under it

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield pid
    stop.set()
    thread.join(30)
    conn.close()


def _logged_by(log: str, user: str) -> tuple[list[str], list[str]]:
    """(statements ``user`` ran, every ERROR line) in a server log with ``[%u] `` prefixes."""
    statements, errors = [], []
    for line in log.splitlines():
        m = re.match(r"\[([^\]]*)\] (\w+):\s+(.*)", line)
        if not m:
            continue
        who, level, text = m.groups()
        if level in ("ERROR", "FATAL", "PANIC"):
            errors.append(line)
        elif level == "LOG" and who == user:
            s = re.match(r"(?:statement|execute [^:]+):\s(.*)", text)
            if s:
                statements.append(s.group(1))
        elif level == "STATEMENT" and who == user:  # the text of one that failed (an ERROR), maybe before it ran
            statements.append(text)
    return statements, errors


def test_watch_mode_runs_only_the_listed_statements_on_postgres(logged_pg, app_backend, tmp_path):
    from tdescope.plugins.postgres.statements import WATCH_STATEMENTS

    log_path = logged_pg.root / "server.log"
    start = log_path.stat().st_size
    out = _cli("record", "--engine", "postgres", "--dsn", logged_pg.dsn(user=WATCHER), "--target-pid",
               str(app_backend), "--seconds", "2", "--captures", "0", "--no-hotspots", "-o", str(tmp_path / "w.tds"))
    assert out.returncode == 0, out.stderr
    assert f"engine waits: pg_stat_activity, the row of pid {app_backend}; polled every 200 ms" in out.stderr
    with open(log_path, errors="replace") as fh:
        fh.seek(start)
        statements, errors = _logged_by(fh.read(), WATCHER)
    allowed = {_as_logged(s) for s in WATCH_STATEMENTS}
    assert statements, "the log shows none of tdescope's statements: is log_statement on?"
    assert [s for s in statements if s not in allowed] == []
    assert errors == []
    polls = statements.count(_as_logged(WATCH_STATEMENTS[WATCH_STATEMENTS.index(
        "SELECT wait_event_type, wait_event, state FROM pg_stat_activity WHERE pid = %s")]))
    assert 3 <= polls <= 15, polls  # 5 a second for 2 s: the stated rate, not 10 or 20


@pytest.mark.ebpf
def test_a_watch_mode_capture_runs_only_the_listed_statements(logged_pg, app_backend):
    from tdescope.plugins.postgres.statements import WATCH_STATEMENTS

    log_path = logged_pg.root / "server.log"
    start = log_path.stat().st_size
    out = _cli("capture", "--engine", "postgres", "--dsn", logged_pg.dsn(user=WATCHER), "--target-pid",
               str(app_backend), "--count", "2", "--timeout", "30", "--backend", "ebpf")
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("2 buffer pairs captured"), out.stderr
    with open(log_path, errors="replace") as fh:
        fh.seek(start)
        statements, errors = _logged_by(fh.read(), WATCHER)
    assert statements and [s for s in statements if s not in {_as_logged(s) for s in WATCH_STATEMENTS}] == []
    assert errors == []


def test_the_window_watching_runs_only_the_listed_statements(qtbot, qsettings, logged_pg, app_backend,
                                                            monkeypatch):
    """The window connected to a backend it watches: the engine-wait rate on screen and adjustable, sampling
    offered with what it reads (declined here), and nothing outside the list in the server's log."""
    from PySide6.QtWidgets import QMessageBox

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.plugins.postgres.statements import WATCH_STATEMENTS
    from tdescope.ui.window.main_window import MainWindow

    log_path = logged_pg.root / "server.log"
    start = log_path.stat().st_size
    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.observation.hotspots_action.setChecked(False)
    win.connect_engine(ConnectParams(dsn=logged_pg.dsn(user=WATCHER), pid=app_backend))
    qtbot.waitUntil(lambda: win.session is not None, timeout=30000)
    waits = win.observation.waits_dock
    qtbot.waitUntil(lambda: "polled every 200 ms" in waits.engine_poll.text(), timeout=15000)
    assert f"the row of pid {app_backend}" in waits.engine_poll.text()
    win.observation.set_engine_hz(1.0)  # Observe ▸ Engine wait polling ▸ every 1000 ms
    qtbot.waitUntil(lambda: "polled every 1000 ms" in waits.engine_poll.text(), timeout=15000)
    assert win.engine_dock.sample_columns.isVisibleTo(win)
    assert win.session.inventory().get("pgcrypto columns").startswith("not sampled (1 bytea column(s)")
    asked: list[str] = []
    monkeypatch.setattr(QMessageBox, "question",
                        lambda _parent, _title, text, *a, **k: asked.append(text) or QMessageBox.StandardButton.No)
    win.engine_dock.sample_columns.click()
    qtbot.waitUntil(lambda: bool(asked), timeout=15000)
    assert "public.cards.pan" in asked[0] and "first 64 bytes of up to 20 rows" in asked[0]
    win.shutdown()
    with open(log_path, errors="replace") as fh:
        fh.seek(start)
        statements, errors = _logged_by(fh.read(), WATCHER)
    allowed = {_as_logged(s) for s in WATCH_STATEMENTS}
    assert statements and [s for s in statements if s not in allowed] == []
    assert errors == []


def test_with_pg_wait_sampling_its_history_is_read_once_a_second(logged_pg):
    from tdescope.plugins.postgres.statements import WAIT_HISTORY, WAIT_POLL, WATCH_STATEMENTS

    if not logged_pg.wait_sampling:
        pytest.skip("pg_wait_sampling is not installed (apt-get install postgresql-15-pg-wait-sampling)")
    sleeper = psycopg.connect(logged_pg.dsn(), autocommit=True)  # waits on PgSleep: what 1.1 samples (not CPU)
    pid = sleeper.info.backend_pid
    thread = threading.Thread(target=lambda: sleeper.execute("SELECT pg_sleep(8)"), daemon=True)
    thread.start()
    log_path = logged_pg.root / "server.log"
    start = log_path.stat().st_size
    try:
        out = _cli("waits", "--engine", "postgres", "--dsn", logged_pg.dsn("sampled", user=WATCHER), "--target-pid",
                   str(pid), "--seconds", "3", "--json", "--idle")
    finally:
        thread.join(30)
        sleeper.close()
    assert out.returncode == 0, out.stderr
    assert f"pg_wait_sampling_history of pid {pid}, read once a second" in out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    engine = {r["event"]: r["samples"] for r in rows if r["source"] == "postgres"}
    assert engine.get("PgSleep", 0) > 50, rows  # the server's own samples, every 10 ms
    with open(log_path, errors="replace") as fh:
        fh.seek(start)
        statements, errors = _logged_by(fh.read(), WATCHER)
    allowed = {_as_logged(s) for s in WATCH_STATEMENTS}
    assert [s for s in statements if s not in allowed] == [] and errors == []
    assert statements.count(_as_logged(WAIT_POLL)) == 0
    assert 2 <= statements.count(_as_logged(WAIT_HISTORY)) <= 5  # once a second, not at the poll rate


def test_sample_columns_in_the_engine_dock_reads_when_told(qtbot, qsettings, logged_pg, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.window.main_window import MainWindow

    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.observation.hotspots_action.setChecked(False)
    win.connect_engine(ConnectParams(dsn=logged_pg.dsn()))
    qtbot.waitUntil(lambda: win.session is not None, timeout=30000)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    tree = win.engine_dock.tree

    def rows() -> dict:
        return {tree.topLevelItem(i).child(j).text(0): tree.topLevelItem(i).child(j).text(1)
                for i in range(tree.topLevelItemCount()) for j in range(tree.topLevelItem(i).childCount())}
    assert "public.cards.pan" not in rows()
    win.engine_dock.sample_columns.click()
    qtbot.waitUntil(lambda: "public.cards.pan" in rows(), timeout=15000)
    assert "AES" in rows()["public.cards.pan"]
    win.shutdown()


def test_the_readme_lists_exactly_the_watch_statements():
    from tdescope.plugins.mariadb.statements import WATCH_STATEMENTS as MARIADB
    from tdescope.plugins.postgres.statements import WATCH_STATEMENTS as POSTGRES

    readme = (Path(__file__).parents[1] / "README.md").read_text()
    listed = set(re.findall(r"^(SELECT .*|SHOW .*|SET NAMES .*)$", readme, re.M))
    assert listed == {_as_logged(s) for s in POSTGRES} | {s for s in MARIADB}, listed


def test_sampling_columns_is_asked_for_and_says_what_it_reads(logged_pg, tmp_path):
    out = _cli("record", "--engine", "postgres", "--dsn", logged_pg.dsn(), "--seconds", "1", "--captures", "0",
               "--no-hotspots", "--no-waits", "--sample-columns", "-o", str(tmp_path / "s.tds"))
    assert out.returncode == 0, out.stderr
    assert "Sampling reads the first 64 bytes of up to 20 rows of each of 1 bytea column(s) of user tables " \
           "(public.cards.pan)" in out.stderr
    from tdescope.app.session.reader import SessionReader

    with SessionReader(tmp_path / "s.tds") as reader:
        rows = {name: value for _, name, value in reader.meta.inventory}
    assert "AES" in rows["public.cards.pan"], rows


def test_capture_on_tdescopes_own_idle_backend_says_so(logged_pg):
    out = _cli("capture", "--engine", "postgres", "--dsn", logged_pg.dsn(), "--count", "1", "--timeout", "1",
               "--backend", "ebpf")
    assert out.returncode == 2, out.stderr
    first = out.stderr.splitlines()[0]
    assert "is tdescope's own idle connection" in first and "--target-pid" in first and "--sql" in first, first


def test_record_ends_with_the_promised_line_when_the_server_restarts(logged_pg, app_backend, tmp_path):
    proc = subprocess.Popen([sys.executable, "-m", "tdescope", "record", "--engine", "postgres", "--dsn",
                             logged_pg.dsn(), "--target-pid", str(app_backend), "--seconds", "120", "--captures", "0",
                             "--no-hotspots", "-o", str(tmp_path / "r.tds")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        first = proc.stderr.readline()  # said once the engine's wait source is connected
        assert first.startswith("tdescope: engine waits:"), first
        t0 = time.monotonic()
        logged_pg.restart()
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"pid {app_backend} exited while armed (0 pages captured)" in lines[0], err
    assert time.monotonic() - t0 < 60


# -- MariaDB ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def logged_mariadb():
    """A private MariaDB with InnoDB encryption (the lab's server) logging every statement to its general log, a
    user with PROCESS and SELECT on performance_schema only, and an encrypted table of cards it may not read."""
    import pymysql

    from tdescope.plugins.mariadb.lab import MariaLab

    try:
        lab = MariaLab()
    except Exception as exc:  # noqa: BLE001 - no server installed
        pytest.skip(f"MariaDB lab unavailable: {exc}")
    try:
        root = pymysql.connect(unix_socket=lab.socket, user="root", autocommit=True)
        with root.cursor() as cur:
            for stmt in (f"CREATE USER {WATCHER}@localhost", f"GRANT PROCESS ON *.* TO {WATCHER}@localhost",
                         f"GRANT SELECT ON performance_schema.* TO {WATCHER}@localhost",
                         "CREATE DATABASE shop", "CREATE TABLE shop.cards (id INT PRIMARY KEY, pan VARBINARY(64)) "
                         "ENCRYPTED=YES", "INSERT INTO shop.cards VALUES (1, 'x'), (2, 'y')",
                         f"SET GLOBAL general_log_file = '{lab.dir}/general.log'", "SET GLOBAL log_output = 'FILE'",
                         "SET GLOBAL general_log = ON"):
                cur.execute(stmt)
        lab.root = root
        yield lab
        root.close()
    finally:
        lab.close()


def _general_log_by(text: str, user: str) -> list[str]:
    """The queries ``user``'s connections sent, from a general log."""
    ids, queries = set(), []
    for line in text.splitlines():
        m = re.match(r"^(?:\d{6}\s+[\d:]+)?\s+(\d+)\s+(\w+)\t?(.*)$", line)
        if not m:
            continue
        conn_id, command, rest = m.groups()
        if command == "Connect" and rest.startswith(f"{user}@"):
            ids.add(conn_id)
        elif command == "Query" and conn_id in ids:
            queries.append(rest.strip())
    return queries


def test_watch_mode_runs_only_the_listed_statements_on_mariadb(logged_mariadb, tmp_path):
    from tdescope.plugins.mariadb.statements import WATCH_STATEMENTS

    log = Path(logged_mariadb.dir) / "general.log"
    start = log.stat().st_size
    out = _cli("record", "--engine", "mariadb", "--dsn", f"socket={logged_mariadb.socket} user={WATCHER}",
               "--seconds", "2", "--captures", "0", "--no-hotspots", "-o", str(tmp_path / "m.tds"))
    assert out.returncode == 0, out.stderr
    assert "engine waits: performance_schema.events_waits_current" in out.stderr
    out = _cli("capture", "--engine", "mariadb", "--dsn", f"socket={logged_mariadb.socket} user={WATCHER}",
               "--count", "1", "--timeout", "1", "--backend", "ebpf")  # nothing scans: armed, then no hit
    assert out.returncode == 2 and "no decrypt hit on encryption_scheme_decrypt within 1 s" in out.stderr, out.stderr
    with open(log, errors="replace") as fh:
        fh.seek(start)
        queries = _general_log_by(fh.read(), WATCHER)
    assert queries, "the general log shows none of tdescope's statements"
    assert [q for q in queries if q not in WATCH_STATEMENTS] == []
    assert 3 <= queries.count(WATCH_STATEMENTS[-1]) <= 15  # the poll, 5 a second


def test_a_mariadb_target_pid_other_than_the_servers_is_refused(logged_mariadb):
    result = _cli("capture", "--engine", "mariadb", "--dsn", f"socket={logged_mariadb.socket} user={WATCHER}",
                  "--target-pid", "999999", "--count", "1", "--backend", "ebpf")
    assert_one_line_error(result, f"pid 999999 is not this MariaDB server: one process, mariadbd pid "
                                  f"{logged_mariadb.pid}, serves every connection")


def test_mariadb_waits_switched_off_are_said_with_the_fix(logged_mariadb, tmp_path):
    from tdescope.app.engines import ConnectParams
    from tdescope.plugins.mariadb import ENGINE

    fix = "UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN"
    with logged_mariadb.root.cursor() as cur:
        cur.execute("UPDATE performance_schema.setup_consumers SET ENABLED = 'NO' WHERE NAME = 'events_waits_current'")
    try:
        out = _cli("waits", "--engine", "mariadb", "--dsn", f"socket={logged_mariadb.socket} user={WATCHER}",
                   "--seconds", "1")
        assert out.returncode == 0, out.stderr  # the OS view still answers
        notes = [ln for ln in out.stderr.splitlines() if "events_waits_current is off" in ln]
        assert len(notes) == 1 and fix in notes[0], out.stderr
        out = _cli("record", "--engine", "mariadb", "--dsn", f"socket={logged_mariadb.socket} user={WATCHER}",
                   "--seconds", "1", "--captures", "0", "--no-hotspots", "-o", str(tmp_path / "off.tds"))
        assert out.returncode == 0 and fix in out.stderr, out.stderr
        session = ENGINE.connect(ConnectParams(dsn=f"socket={logged_mariadb.socket} user={WATCHER}"))
        try:
            assert fix in session.inventory().get("engine waits")  # the Engine dock's row
        finally:
            session.close()
    finally:
        with logged_mariadb.root.cursor() as cur:
            cur.execute("UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' "
                        "WHERE NAME = 'events_waits_current'")
