"""The pg-tde engine on a real PostgreSQL 16.2 with Percona pg_tde 1.0.0-beta2 (the lab, built and started here).

``pg_tde_crypt_tuple`` is caught in the backend with both probe backends while a scan reads the encrypted
table: the tuple as it sits in the shared buffer before (the marker nowhere in it, nor in any file of the data
directory), the row after, decoded with the table's columns. Also: the lab's private files, a second start
from the cache, the one line when the source is missing, and watch mode on a backend tdescope did not start.
"""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import assert_one_line_error, probe_backend, probe_in_code, probe_taken_out, run_tdescope, tracer_pid
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureContext, ContextKind
from tdescope.app.probe.limits import StopLimits
from tdescope.app.probe.window import CaptureLimits, CaptureWindow
from tdescope.plugins.pgtde import build
from tdescope.plugins.pgtde.lab import ENCRYPTED_TABLE, MARKER, PLAIN_MARKER, PLAIN_TABLE, ROWS
from tdescope.plugins.pgtde.recipes import TUPLE_DECRYPT

psycopg = pytest.importorskip("psycopg")


def _captured_during(session, backend: str, action, count: int = 50) -> list:
    """Decrypt captures (at most ``count``) while ``action()`` runs on the lab's workload connection; run again
    (twice at most) when the kernel took gdb's probe out meanwhile (design notes): what the action did then was
    not all seen."""
    for _attempt in range(3):
        got, taken_out = _one_window(session, backend, action, count)
        if not taken_out:
            break
    return got


def _one_window(session, backend: str, action, count: int) -> tuple[list, bool]:
    got = []
    limits = CaptureLimits(max_captures=count, max_seconds=60, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    window = CaptureWindow(session.server_pid(), TUPLE_DECRYPT, limits, "pg-tde", got.append,
                           backend=probe_backend(backend))
    summary = []
    thread = threading.Thread(target=lambda: summary.append(window.run()))
    thread.start()
    assert window.armed.wait(30)
    where = "not read"
    try:
        action()
        where = probe_in_code(window)
    finally:
        window.cancel("the workload finished", drain=True)  # all it caught, however far behind
        thread.join(60)
    assert summary[0].error is None, summary[0].error
    print(f"{backend} window: {summary[0]}; after the action: {where}")  # shown when a test fails (its counts say where the hits went)
    return got, probe_taken_out(summary[0], where)


def test_the_marker_is_in_no_file_of_the_data_directory_only_in_the_plain_twin(pgtde_lab):
    lab = pgtde_lab.lab
    lab.psql("CHECKPOINT")
    files = {p: p.read_bytes() for p in lab.data.rglob("*") if p.is_file()}
    assert [p for p, data in files.items() if MARKER.encode() in data] == []  # WAL included
    plain = {p for p, data in files.items() if PLAIN_MARKER.encode() in data}  # the same search finds the twin
    assert {p.resolve() for p in lab.relation_files(PLAIN_TABLE)} & {p.resolve() for p in plain}
    assert lab.psql(f"SELECT count(*) FROM {ENCRYPTED_TABLE} WHERE name LIKE '{MARKER}-%'").strip() == str(ROWS)
    assert lab.psql(f"SELECT amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
                    f"WHERE relname = '{ENCRYPTED_TABLE}'").strip() == "tde_heap_basic"


def test_the_lab_is_private_and_leaves_nothing_behind():
    from tdescope.app.engines.api import ConnectParams
    from tdescope.plugins.pgtde import ENGINE

    session = ENGINE.connect(ConnectParams(lab=True))  # from the cache: no build
    lab, pid = session.lab, session.lab.pid
    assert oct(os.stat(lab.dir).st_mode & 0o777) == "0o700"
    assert oct(os.stat(lab.keyring).st_mode & 0o777) == "0o600"
    assert "listen_addresses = ''" in (lab.data / "postgresql.conf").read_text()  # the unix socket only
    session.close()
    assert not lab.dir.exists() and not os.path.exists(f"/proc/{pid}")


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["ebpf", "gdb"])
def test_the_tuple_decrypt_gives_the_row_after_and_ciphertext_before(pgtde_lab, backend):
    conn = pgtde_lab.conn
    caps = _captured_during(pgtde_lab, backend,
                            lambda: conn.execute(f"SELECT id, name FROM {ENCRYPTED_TABLE}").fetchall())
    assert len(caps) == 50
    decoder = pgtde_lab.catalog_decoder()
    oid = conn.execute("SELECT %s::regclass::oid", (ENCRYPTED_TABLE,)).fetchone()[0]
    assert {c.where for c in caps} == {CaptureContext(ContextKind.RELATION, oid)}  # the tuple's own t_tableOid
    for c in caps:
        assert len(c.before) == len(c.after)  # t_len of the tuple: its length came from the call
        hoff = c.after[22]
        assert c.before[:hoff] == c.after[:hoff]  # the tuple header stays plaintext
        assert MARKER.encode() not in c.before and MARKER.encode() in c.after
        assert c.pgno == 0 or c.pgno > 0  # a block number from t_self, never a made-up -1
        page = decoder.decode(c.after, c.pgno, c.where)
        assert page.page_type == "heap tuple" and not page.problems, page.problems
        assert page.fields[0].name == f"heap tuple (relation {ENCRYPTED_TABLE} (oid {oid}), block {c.pgno})"
        (row,) = page.records
        assert row[1] == f"{MARKER}-{row[0]}" and len(row[2]) == 128
        assert row not in decoder.decode(c.before, c.pgno).records  # the same header, the data encrypted
    ids = [decoder.decode(c.after).records[0][0] for c in caps]
    assert ids == list(range(1, 51))  # a seq scan's fetch order, each tuple decrypted once on this pass
    assert tracer_pid(pgtde_lab.server_pid()) == 0


@pytest.mark.ebpf
def test_a_tuple_of_another_table_decodes_with_that_tables_columns(pgtde_lab):
    # the capture names its table (t_tableOid): a second encrypted table with other columns decodes as itself,
    # not with the lab table's columns (which the decoder would otherwise assume)
    conn = pgtde_lab.conn
    conn.execute("CREATE TABLE tde_other (k int8, flag bool, note text) USING tde_heap_basic")
    try:
        conn.execute("INSERT INTO tde_other SELECT g, g % 2 = 0, 'OTHER-ROW-' || g FROM generate_series(1, 7) g")
        oid = conn.execute("SELECT 'tde_other'::regclass::oid").fetchone()[0]
        caps = _captured_during(pgtde_lab, "ebpf", lambda: conn.execute("SELECT * FROM tde_other").fetchall(), 7)
        decoder = pgtde_lab.catalog_decoder()
        assert len(caps) == 7 and {c.where for c in caps} == {CaptureContext(ContextKind.RELATION, oid)}
        rows = [decoder.decode(c.after, c.pgno, c.where).records for c in caps]
        assert rows == [((k, k % 2 == 0, f"OTHER-ROW-{k}"),) for k in range(1, 8)]
        assert not decoder.decode(caps[0].after, caps[0].pgno).records  # without its context: the lab's columns
        # a recording keeps the relations: the rebuilt decoder names and decodes the same
        from tdescope.plugins.pgtde import ENGINE

        again = ENGINE.decoder_from_catalog(decoder.catalog())
        assert [again.decode(c.after, c.pgno, c.where).records for c in caps] == rows
    finally:
        conn.execute("DROP TABLE tde_other")


@pytest.mark.ebpf
def test_a_warm_second_scan_decrypts_every_tuple_again(pgtde_lab):
    conn = pgtde_lab.conn
    scan = f"SELECT count(name) FROM {ENCRYPTED_TABLE}"
    conn.execute(scan).fetchone()  # now every page is in shared buffers
    caps = _captured_during(pgtde_lab, "ebpf", lambda: conn.execute(scan).fetchone(), count=10 * ROWS)
    assert len(caps) == ROWS  # warm, and still one decrypt per tuple: pages stay encrypted in shared buffers


def test_cli_capture_on_the_lab_names_the_blocks(pgtde_lab):
    result = run_tdescope("capture", "--engine", "pg-tde", "--lab", "--count", "5", "--json", timeout=240)
    assert result.returncode == 0, result.stderr
    import json

    *records, summary = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(records) == 5 and summary["backend"] == "ebpf" and summary["lost"] == 0
    assert all(r["page_type"] == "heap tuple" and r["pgno"] == 0 for r in records), records


def test_a_missing_source_is_one_line(tmp_path, monkeypatch):
    monkeypatch.setattr(build, "_VENDORED", tmp_path / "absent.tar.gz")
    monkeypatch.delenv(build.SOURCE_ENV, raising=False)
    with pytest.raises(UserError, match="needs Percona pg_tde 1.0.0-beta2's source"):
        build.find_source()
    env = {**os.environ, build.SOURCE_ENV: str(tmp_path / "nothing-here")}
    result = run_tdescope("capture", "--engine", "pg-tde", "--lab", "--count", "1", env=env)
    assert_one_line_error(result, "is not a pg_tde source tarball or folder")
    result = run_tdescope("--pg-tde-source", str(tmp_path / "elsewhere"), "capture", "--engine", "pg-tde", "--lab")
    assert_one_line_error(result, f"{tmp_path / 'elsewhere'} is not a pg_tde source tarball or folder")


def test_a_first_start_builds_with_progress_lines_and_a_second_finds_the_cache(tmp_path, monkeypatch):
    """A fresh cache: the build says what it does; the second start reuses it (no build line)."""
    from tdescope.plugins.pgtde.lab import PgTdeLab

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    said = []
    lab = PgTdeLab(said.append)
    lab.close()
    assert any("building pg_tde" in m for m in said) and said[-1].startswith("pg-tde lab: creating"), said
    assert oct(os.stat(lab.server.root).st_mode & 0o777) == "0o755" and lab.server.library.exists()
    again = []
    lab = PgTdeLab(again.append)
    lab.close()
    assert not any("building" in m for m in again) and lab.server.root == tmp_path / "tdescope" / "pg-tde" / \
        lab.server.root.name


def test_the_cache_is_keyed_by_the_source(pgtde_lab, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert build.cache_dir() == tmp_path / "tdescope" / "pg-tde"
    root = Path(pgtde_lab.lab.server.root)
    assert root.name == build._digest(build.find_source()) and (root / ".complete").exists()


@pytest.mark.ebpf
def test_watch_mode_captures_another_backends_decrypts_with_only_listed_statements(pgtde_lab):
    """A client backend loops over the encrypted table; ``capture --target-pid`` as a pg_monitor role
    catches its decrypts and leaves only the listed catalog statements in a ``log_statement=all`` log."""
    from test_watch_sql import _as_logged, _logged_by
    from tdescope.plugins.postgres.statements import WATCH_STATEMENTS

    lab = pgtde_lab.lab
    lab.psql("ALTER SYSTEM SET log_statement = 'all'", dbname="postgres")
    lab.psql("ALTER SYSTEM SET log_line_prefix = '[%u] '", dbname="postgres")
    lab.psql("SELECT pg_reload_conf(); DROP ROLE IF EXISTS watcher; CREATE ROLE watcher LOGIN; "
             "GRANT pg_monitor TO watcher", dbname="postgres")
    stop = threading.Event()
    conn = psycopg.connect(lab.dsn(), autocommit=True, application_name="shop")

    def loop() -> None:
        while not stop.is_set():
            conn.execute(f"SELECT count(name) FROM {ENCRYPTED_TABLE}").fetchone()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    log = lab.dir / "server.log"
    start = log.stat().st_size
    try:
        out = run_tdescope("capture", "--engine", "pg-tde", "--dsn", lab.dsn().replace(lab.superuser, "watcher"),
                           "--target-pid", str(conn.info.backend_pid), "--count", "3", "--timeout", "30",
                           "--backend", "ebpf", timeout=120)
    finally:
        stop.set()
        thread.join(30)
        conn.close()
        lab.psql("ALTER SYSTEM RESET log_statement", dbname="postgres")
        lab.psql("ALTER SYSTEM RESET log_line_prefix", dbname="postgres")
        lab.psql("SELECT pg_reload_conf()", dbname="postgres")
    assert out.returncode == 0, out.stderr
    assert out.stderr.startswith("3 "), out.stderr
    assert out.stdout.count("heap tuple") == 3 and "plaintext after" in out.stdout
    with open(log, errors="replace") as fh:
        fh.seek(start)
        statements, errors = _logged_by(fh.read(), "watcher")
    assert statements, "the log shows none of tdescope's statements: is log_statement on?"
    assert [s for s in statements if s not in {_as_logged(s) for s in WATCH_STATEMENTS}] == []
    assert errors == []


def _tree_texts(model) -> list[str]:
    out = []

    def walk(parent) -> None:
        for r in range(model.rowCount(parent)):
            for c in range(model.columnCount(parent)):
                out.append(str(model.index(r, c, parent).data() or ""))
            walk(model.index(r, 0, parent))
    from PySide6.QtCore import QModelIndex

    walk(QModelIndex())
    return out


@pytest.mark.ebpf
def test_the_window_shows_the_decoded_row(qtbot, qsettings, pgtde_lab):
    from PySide6.QtCore import Qt

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.window.main_window import MainWindow

    win = MainWindow(discover_engines()[0]["pg-tde"], qsettings)
    qtbot.addWidget(win)
    win.resize(1280, 720)
    win.show()
    win.connect_engine(ConnectParams(lab=True))
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=60000)
        dock = win.workload_dock
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=30000)
        dock.max_captures.setValue(20)
        qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: win.captures_dock.model.rowCount() == 20 and dock.run_button.isEnabled(),
                        timeout=90000)
        texts = _tree_texts(win.page_view.model)
        assert any(t.startswith(f"1, {MARKER}-1, ") or f"{MARKER}-1" in t for t in texts), texts[:40]
        assert any("heap tuple" in t for t in texts), texts[:40]
        assert any(f"relation {ENCRYPTED_TABLE} (oid " in t for t in texts), texts[:40]  # from the capture itself
        # the report made from this window decodes with the window's decoder: the same row (issue #22 item 7)
        from tdescope.app.report.captures import capture_section

        assert win.files.decoder is win.decoder
        cap, _record = win.captures_dock.model.row(0)
        section = capture_section(cap, win.files.decoder, True, [])
        assert section.page_type == "heap tuple"
        assert any(f"{MARKER}-" in cell for row in section.records for cell in row), section.records
        shots = os.environ.get("TDESCOPE_SCREENSHOTS")  # docs/screenshots/ when refreshing the README's pictures
        if shots:
            win.grab().save(str(Path(shots) / "pg-tde-window-1280x720.png"))
        recorded = win.recording.recorder.path
    finally:
        win.shutdown()
    # the window's autosave keeps its decoder's catalog: `tdescope report FILE`, with no server, decodes with the
    # window's columns (this file withholds the plaintext side: not tdescope's own server; the rows themselves
    # are checked on a --keep-plaintext recording in test_same_decoding.py)
    from tdescope.app.session.reader import SessionReader
    from tdescope.commands.report import decoder_for

    with SessionReader(recorded, writable=False) as reader:
        assert reader.meta.decoder["relation"] == ENCRYPTED_TABLE
        restored = decoder_for(reader.meta.engine, reader.meta.decoder)
    assert (restored.relation, restored.columns) == (win.decoder.relation, win.decoder.columns)


# -- lessons on real PostgreSQL encryption -----------------------------------------------------------------------
def _lesson(lesson_id: str, session):
    from tdescope.app.engines import discover_engines
    from tdescope.app.lessons import LessonRun, lesson_named, run_lesson

    card = run_lesson(LessonRun(lesson_named(lesson_id), discover_engines()[0]["pg-tde"], session, fast=True))
    assert "pg_tde 1.0.0-beta2" in card.note and "tde_heap_basic" in card.note  # which pg_tde, which model
    return card


@pytest.mark.ebpf
def test_io_path_on_pg_tde_decrypts_every_tuple_in_both_scans(pgtde_lab):
    card = _lesson("io-path", pgtde_lab)
    assert card.figures["first_scan_decrypts"] == card.figures["second_scan_decrypts"] == 500, card.text()
    assert card.verdict == "different"
    assert "warm scan: blocks read (EXPLAIN BUFFERS) 0" in card.evidence  # no I/O, and still every decrypt


def test_dml_lesson_on_pg_tde_gives_the_ratio_and_its_interval(pgtde_lab):
    card = _lesson("tde-dml-cost", pgtde_lab)
    f = card.figures
    assert f["rounds"] == 5 and f["ratio_ci_low"] <= f["ratio_median"] <= f["ratio_ci_high"]
    assert f["encrypted_median_s"] > 0 and f["plain_median_s"] > 0


def test_pgbench_lesson_on_pg_tde_compares_encrypted_and_plain_tables(pgtde_lab):
    card = _lesson("pgbench-tde", pgtde_lab)
    f = card.figures
    assert f["ro_tps_encrypted"] > 0 and f["ro_tps_plain"] > 0 and f["rw_tps_encrypted"] > 0
    assert f["ro_ratio_min"] <= f["ro_ratio_median"] <= f["ro_ratio_max"]
    assert card.verdict in ("same direction", "different", "inconclusive")
    amname = pgtde_lab.lab.psql("SELECT a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
                                "WHERE relname = 'pgbench_accounts'", dbname="tdescope_pgbench_tde").strip()
    assert amname == "tde_heap_basic"


def test_the_inventory_names_pg_tde_its_tables_access_methods_and_key_providers(pgtde_lab):
    from tdescope.app.engines.api import ConnectParams
    from tdescope.plugins.pgtde import ENGINE

    rows = {(s, n): v for s, n, v in pgtde_lab.inventory().rows}
    assert rows[("Extensions", "pg_tde")] == "installed 1.0"
    assert rows[("pg_tde tables", ENCRYPTED_TABLE)].startswith("tde_heap_basic: pg_tde 1.0 tuple-level")
    assert ("pg_tde tables", PLAIN_TABLE) not in rows
    assert rows[("pg_tde", "key providers")] == "file (file)"  # names and types: never the options (paths, tokens)
    assert "WAL encryption" in {n for _s, n in rows}
    # a role that may not list the key providers: said, and no ERROR for it
    lab = pgtde_lab.lab
    lab.psql("DROP ROLE IF EXISTS viewer; CREATE ROLE viewer LOGIN; GRANT pg_monitor TO viewer", dbname="postgres")
    lab.psql("REVOKE ALL ON FUNCTION pg_tde_list_all_key_providers() FROM PUBLIC")
    watcher = ENGINE.connect(ConnectParams(dsn=lab.dsn().replace(lab.superuser, "viewer")))
    try:
        rows = {(s, n): v for s, n, v in watcher.inventory().rows}
    finally:
        watcher.close()
    assert rows[("pg_tde", "key providers")].startswith("not listed: this role may not call")
    assert ("pg_tde tables", ENCRYPTED_TABLE) in rows


# -- page-level pg_tde (2.x / open_pg_tde): unverified on a real server, proven on a C stand-in --------------------
@pytest.fixture(scope="module")
def page_level_pg_tde(tmp_path_factory):
    """tests/clients/pg_tde_block.c: a pg_tde.so exporting tde_decrypt_smgr_block with pg_tde 2.x's signature,
    and a program decrypting an FSM block, then block 7 of the main fork, in place."""
    import shutil
    import subprocess

    from conftest import CLIENTS

    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc)")
    where = tmp_path_factory.mktemp("pg_tde_block")
    src = str(CLIENTS / "pg_tde_block.c")
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-DPG_TDE_LIBRARY", "-o", str(where / "pg_tde.so"), src],
                   check=True)
    subprocess.run(["cc", "-O1", "-o", str(where / "postgres"), src, str(where / "pg_tde.so"),
                    f"-Wl,-rpath,{where}"], check=True)
    proc = subprocess.Popen([str(where / "postgres"), "60"], stdout=subprocess.PIPE, text=True,
                            start_new_session=True)
    pid = int(proc.stdout.readline())
    yield where, pid
    proc.kill()
    proc.wait()


def test_the_page_level_symbol_resolves_in_the_built_library(page_level_pg_tde):
    from tdescope.app.system.elf import find_symbol
    from tdescope.plugins.pgtde.recipes import BLOCK_DECRYPT

    where, _pid = page_level_pg_tde
    assert find_symbol(str(where / "pg_tde.so"), BLOCK_DECRYPT.symbols[0]) is not None


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["ebpf", "gdb"])
def test_the_page_level_recipe_reads_its_arguments_where_pg_tde_2_passes_them(page_level_pg_tde, backend):
    from tdescope.plugins.pgtde.recipes import BLOCK_DECRYPT
    from tdescope.plugins.pgtde.tuples import PgTupleDecoder

    _where, pid = page_level_pg_tde
    got = []
    window = CaptureWindow(pid, BLOCK_DECRYPT, CaptureLimits(max_captures=3, max_seconds=20, first_hit_timeout=15),
                           "pg-tde", got.append, backend=probe_backend(backend))
    summary = window.run()
    assert summary.error is None, summary.error
    assert len(got) == 3
    for c in got:
        assert c.pgno == 7  # the main fork's block: the FSM block (fork 1) is skipped by the condition
        assert len(c.before) == len(c.after) == 8192
        assert b"PAGE-TDE-ROW-7" in c.after and b"PAGE-TDE-ROW-7" not in c.before  # in place: before, then after
        page = PgTupleDecoder().decode(c.after, c.pgno)
        assert page.page_type == "heap" and not page.problems, page.problems


def test_the_tuple_decrypt_is_a_local_symbol_of_the_built_pg_tde(pgtde_lab):
    from tdescope.app.system.elf import find_symbol

    library = str(pgtde_lab.lab.server.library)
    assert find_symbol(library, "pg_tde_crypt_tuple") is not None
    dynsym = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True).stdout
    assert " pg_tde_crypt_tuple\n" not in dynsym  # .symtab only: found without the dynamic symbol table


def test_a_capture_without_a_block_number_shows_no_page_minus_one(qtbot, qsettings):
    from tdescope.app.engines import discover_engines
    from tdescope.app.events import PageCapture
    from tdescope.app.probe.capture_record import describe_capture
    from tdescope.ui.window.main_window import MainWindow

    engine = discover_engines()[0]["postgres"]
    win = MainWindow(engine, qsettings)
    qtbot.addWidget(win)
    cap = PageCapture(0.0, 1, "pgp_cfb_decrypt", "decrypt", -1, bytes(range(18)), b"x" * 18, engine="postgres",
                      plaintext_side="after")
    win.show_capture(cap, describe_capture(cap, win.decoder, full=False)[0])
    qtbot.waitUntil(lambda: win.capture_presenter.shown is cap, timeout=5000)
    assert "page -1" not in win.page_view._header.text() and "decrypt · pgp_cfb_decrypt" in win.page_view._header.text()
    win.shutdown()


def test_a_killed_workbench_takes_its_pg_tde_lab_along(pgtde_lab):
    """kill -9 of the process that started the lab: the reaper stops the server and removes the dir (keyring
    included). The session fixture has built the cache: this start takes about a second."""
    import sys

    from conftest import wait_for

    code = ("from tdescope.app.engines.api import ConnectParams\n"
            "from tdescope.plugins.pgtde import ENGINE\n"
            "s = ENGINE.connect(ConnectParams(lab=True))\n"
            "print(s.lab.pid, s.lab.dir, flush=True)\n"
            "import time; time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid, folder = proc.stdout.readline().split()
    assert os.path.exists(os.path.join(folder, "keyring.per"))
    proc.kill()
    proc.wait()
    wait_for(lambda: not os.path.exists(f"/proc/{pid}") and not os.path.exists(folder), timeout=60,
             what="the lab's server and folder gone")


@pytest.mark.ebpf
def test_block_before_after_on_pg_tde_finds_the_marker_in_plaintext_only(pgtde_lab):
    card = _lesson("block-before-after", pgtde_lab)
    assert card.verdict == "same direction", card.verdict_text
    assert card.figures["marker_in_plaintext"] > 0 and card.figures["marker_in_ciphertext"] == 0


def test_doctor_with_a_dsn_names_pg_tde_on_the_server(pgtde_lab):
    lab = pgtde_lab.lab
    result = run_tdescope("doctor", "--engine", "pg-tde", "--dsn", lab.dsn(), "--json")
    assert result.returncode in (0, 1), result.stderr  # 1: something of the machine's own is missing
    import json

    lines = {c["name"]: c["value"] for c in json.loads(result.stdout)}
    assert lines["pg_tde tables: tdescope_tde_secret"].startswith("tde_heap_basic")
    assert lines["pg_tde: key providers"] == "file (file)" and "pg_tde: WAL encryption" in lines
    assert lines["Extensions: pg_tde"] == "installed 1.0"


# -- PostgreSQL 18's I/O workers (io_method=worker): watch mode follows them -----------------------------------
#: ``ps -eo pid,ppid,args`` on a PostgreSQL 18 server with io_method=worker (the default), io_workers=3, two
#: clusters on one host (one with cluster_name set), laid out as PostgreSQL 18's process titles are.
PG18_PS = """\
    PID    PPID COMMAND
      1       0 /sbin/init
   4100       1 /usr/lib/postgresql/18/bin/postgres -D /var/lib/postgresql/18/main
   4101    4100 postgres: io worker 0
   4102    4100 postgres: io worker 1
   4103    4100 postgres: io worker 2
   4104    4100 postgres: checkpointer
   4105    4100 postgres: background writer
   4107    4100 postgres: walwriter
   4108    4100 postgres: autovacuum launcher
   4200    4100 postgres: app shop [local] SELECT
   5100       1 /usr/lib/postgresql/18/bin/postgres -D /srv/other
   5101    5100 postgres: other: io worker 0
   5102    5100 postgres: other: checkpointer
   5200    5100 postgres: other: app shop 127.0.0.1(5432) idle
   5300    4200 psql -c select 'postgres: io worker 9'
"""


def test_watch_mode_finds_the_io_workers_of_the_backends_own_cluster():
    from tdescope.plugins.postgres.io_workers import io_workers, parse_ps

    rows = parse_ps(PG18_PS)
    assert io_workers(rows, 4200) == (4101, 4102, 4103)  # not the other cluster's, not a look-alike title
    assert io_workers(rows, 5200) == (5101,)
    assert io_workers(rows, 9999) == ()  # gone


def test_io_method_sync_or_postgres_before_18_has_no_workers_to_follow():
    from tdescope.plugins.postgres.io_workers import io_workers, parse_ps

    rows = [r for r in parse_ps(PG18_PS) if "io worker" not in r.title]
    assert io_workers(rows, 4200) == ()


def test_the_process_table_read_from_proc_holds_this_process_and_its_parent():
    from tdescope.plugins.postgres.io_workers import read_proc

    rows = {r.pid: r for r in read_proc()}
    assert rows[os.getpid()].ppid == os.getppid()
    assert "python" in rows[os.getpid()].title or "pytest" in rows[os.getpid()].title


@pytest.mark.ebpf
def test_a_capture_window_follows_a_second_process_with_the_same_probe(page_level_pg_tde):
    """An "io worker" stand-in decrypting block 9 beside the target decrypting block 7: with it as a follower
    both blocks are caught by one window (eBPF), without it only the target's."""
    import subprocess as sp

    from tdescope.plugins.pgtde.recipes import BLOCK_DECRYPT

    where, pid = page_level_pg_tde
    worker = sp.Popen([str(where / "postgres"), "30", "9"], stdout=sp.PIPE, text=True, start_new_session=True)
    try:
        worker_pid = int(worker.stdout.readline())
        seen = {}
        for followers in ((), (worker_pid,)):
            got = []
            window = CaptureWindow(pid, BLOCK_DECRYPT, CaptureLimits(max_captures=40, max_seconds=20,
                                                                     first_hit_timeout=15),
                                   "pg-tde", got.append, backend=probe_backend("ebpf"), followers=followers)
            summary = window.run()
            assert summary.error is None, summary.error
            seen[followers] = {c.pgno for c in got}
            assert all(b"PAGE-TDE-ROW-7" in c.after for c in got)
        assert seen[()] == {7}
        assert seen[(worker_pid,)] == {7, 9}
    finally:
        worker.kill()
        worker.wait()

