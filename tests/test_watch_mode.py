"""Watch mode: with --dsn and --target-pid and no SQL, tdescope runs nothing and observes a backend that
the server's own clients keep busy (a support engineer on a live server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from tdescope.app.session.reader import SessionReader
from tdescope.app.events import WaitSample
from tdescope.app.session.codec import short_kind

psycopg = pytest.importorskip("psycopg")


@pytest.fixture
def busy_backend(pg_cluster):
    """A client backend decrypting with pgcrypto in a loop, as an application would: its pid."""
    pg_cluster.psql("CREATE EXTENSION IF NOT EXISTS pgcrypto;"
                    "DROP TABLE IF EXISTS watched; CREATE TABLE watched (id int, s bytea);"
                    "INSERT INTO watched SELECT g, pgp_sym_encrypt('CARD-' || g || repeat('x', 200), 'k') "
                    "FROM generate_series(1, 200) g;")
    stop = threading.Event()
    conn = psycopg.connect(pg_cluster.dsn(), autocommit=True)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def loop() -> None:
        while not stop.is_set():
            conn.execute("SELECT sum(length(pgp_sym_decrypt(s, 'k'))) FROM watched").fetchone()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield pid
    stop.set()
    thread.join(30)
    conn.close()


def _cli(*argv):
    return subprocess.run([sys.executable, "-m", "tdescope", *argv], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, env={**os.environ})


def test_waits_and_top_watch_a_backend_tdescope_does_not_drive(pg_cluster, busy_backend):
    common = ("--engine", "postgres", "--dsn", pg_cluster.dsn(), "--target-pid", str(busy_backend), "--seconds", "3")
    waits = _cli("waits", *common, "--json")
    assert waits.returncode == 0, waits.stderr
    rows = [json.loads(line) for line in waits.stdout.splitlines() if line.startswith("{")]
    assert rows and sum(r["samples"] for r in rows if r["class"] == "CPU" and r["event"] != "idle") > 20, rows[:5]
    top = _cli("top", *common, "--json")
    assert top.returncode == 0, top.stderr
    symbols = [json.loads(line).get("symbol", "") for line in top.stdout.splitlines() if line.startswith("{")]
    assert symbols, top.stdout


@pytest.mark.ebpf
def test_capture_watches_a_backend_with_no_sql(pg_cluster, busy_backend):
    out = _cli("capture", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--target-pid", str(busy_backend),
               "--count", "3", "--timeout", "30", "--backend", "ebpf", "--json")
    assert out.returncode == 0, out.stderr
    lines = [json.loads(ln) for ln in out.stdout.splitlines() if ln.startswith("{")]
    assert len([ln for ln in lines if not ln.get("summary")]) == 3


def test_record_with_dsn_keeps_inventory_version_and_engine_waits(pg_cluster, busy_backend, tmp_path):
    path = tmp_path / "watch.tds"
    out = _cli("record", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--target-pid", str(busy_backend),
               "--seconds", "3", "--captures", "0", "--no-hotspots", "-o", str(path))
    assert out.returncode == 0, out.stderr
    with SessionReader(path) as reader:
        meta = reader.meta
        assert meta.engine == "postgres" and meta.inventory
        assert meta.versions.get("version", "").startswith("15."), meta.versions  # the server's version
        assert meta.params["target_pid"] == busy_backend and meta.params["workload"] is None
        counts = reader.summary().counts
        assert counts.get(short_kind("WaitSample"), 0) > 10, counts
        engine_waits = [ev for ev in reader.events(kinds=[WaitSample]) if ev.source == "postgres"]
    assert engine_waits and {ev.pid for ev in engine_waits} == {busy_backend}  # the watched backend's own


def _capture_then_kill(pg_cluster, backend: str, kill) -> None:
    """``capture`` on tdescope's own pgcrypto workload; once a capture came, ``kill(capture_pid, backend_pid)``
    ends the backend. The promise: one line naming the pid, never a driver's traceback, exit 2."""
    proc = subprocess.Popen([sys.executable, "-m", "tdescope", "capture", "--engine", "postgres", "--dsn",
                             pg_cluster.dsn(), "--sql", "SELECT sum(length(pgp_sym_decrypt(s, 'k'))) FROM watched",
                             "--count", "100000", "--timeout", "60", "--backend", backend, "--stop-budget", "100"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline(), "no capture came"
        pid = int(pg_cluster.psql("SELECT pid FROM pg_stat_activity WHERE application_name = 'tdescope workload' "
                                  "LIMIT 1").strip())
        kill(proc.pid, pid)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"pid {pid} exited while armed" in lines[0], err


@pytest.mark.parametrize("backend", ["ebpf", "gdb"])
def test_a_backend_that_exits_mid_capture_is_one_line(pg_cluster, busy_backend, backend):
    """A server restart or a killed backend mid-capture: one line naming the pid, never a driver's traceback."""
    _capture_then_kill(pg_cluster, backend, lambda _capture, pid: pg_cluster.psql(f"SELECT pg_terminate_backend({pid})"))


@pytest.mark.gdb
def test_a_backend_killed_while_gdb_waits_for_a_cpu_is_still_its_exit(pg_cluster, busy_backend):
    """gdb descheduled (here: stopped) as the backend is terminated: the target waits in its signal's delivery,
    the watchdog detaches at 250 ms, the kill goes through. The line says the backend exited, not the workload's
    broken connection (a busy run's "SQL failed: terminating connection due to administrator command")."""
    import signal
    import time

    def kill(capture: int, pid: int) -> None:
        gdbs = [int(p) for p in subprocess.run(["pgrep", "-P", str(capture), "gdb"], capture_output=True,
                                               text=True).stdout.split()]
        assert gdbs, "no gdb under the capture"
        for g in gdbs:
            os.kill(g, signal.SIGSTOP)
        try:
            pg_cluster.psql(f"SELECT pg_terminate_backend({pid})")
            time.sleep(0.5)  # past the watchdog's 250 ms
        finally:
            for g in gdbs:
                os.kill(g, signal.SIGCONT)

    _capture_then_kill(pg_cluster, "gdb", kill)


@pytest.mark.ebpf
def test_pgcrypto_captures_are_data_buffers_not_pages(pg_cluster, busy_backend):
    out = _cli("capture", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--target-pid", str(busy_backend),
               "--count", "2", "--timeout", "30", "--backend", "ebpf")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len(lines) == 2 and all(" buffer " in ln and "page -1" not in ln and "cells" not in ln for ln in lines)
    assert out.stderr.startswith("2 buffer pairs captured")


def test_a_workload_says_what_it_creates_and_cleanup_drops_it(pg_cluster):
    pg_cluster.psql("CREATE EXTENSION IF NOT EXISTS pgcrypto")
    exists = "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'tdescope_ab_%'"
    common = ("ab", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--workload", "ab_dml", "--rounds", "1",
              "--warmup", "0", "--set", "groups=1", "--set", "ids_per_group=20")
    kept = _cli(*common)
    assert kept.returncode == 0, kept.stderr
    assert "ab_dml creates table tdescope_ab_encrypted, table tdescope_ab_plain on the server; --cleanup drops " \
           "it afterwards" in kept.stderr
    assert pg_cluster.psql(exists).strip() == "2"
    cleaned = _cli(*common, "--cleanup")
    assert cleaned.returncode == 0, cleaned.stderr
    assert "dropped table tdescope_ab_encrypted, table tdescope_ab_plain" in cleaned.stderr
    assert pg_cluster.psql(exists).strip() == "0"


def test_the_window_says_what_a_workload_creates_and_drops_it(qtbot, qsettings, pg_cluster, monkeypatch):
    from PySide6.QtWidgets import QMessageBox

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.window.main_window import MainWindow

    pg_cluster.psql("CREATE EXTENSION IF NOT EXISTS pgcrypto; CREATE TABLE IF NOT EXISTS tdescope_matrix (id int)")
    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.connect_engine(ConnectParams(dsn=pg_cluster.dsn()))
    qtbot.waitUntil(lambda: win.session is not None and win.workload_dock.combo.count() > 0, timeout=30000)
    dock = win.workload_dock
    dock.combo.setCurrentIndex(dock.combo.findData("matrix"))
    assert "Creates on the server: table tdescope_matrix" in dock.description.text()
    assert dock.drop_button.isVisibleTo(win)
    monkeypatch.setattr(QMessageBox, "question", lambda *a, **k: QMessageBox.StandardButton.Yes)
    dock.drop_button.click()
    qtbot.waitUntil(lambda: dock.status.text().startswith("Dropped"), timeout=10000)
    assert pg_cluster.psql("SELECT count(*) FROM pg_tables WHERE tablename = 'tdescope_matrix'").strip() == "0"
    win.shutdown()


def test_pgbench_runs_from_the_window(qtbot, qsettings, pg_cluster):
    from PySide6.QtCore import Qt

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.window.main_window import MainWindow

    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.connect_engine(ConnectParams(dsn=pg_cluster.dsn()))
    qtbot.waitUntil(lambda: win.session is not None and win.workload_dock.combo.count() > 0, timeout=30000)
    dock = win.workload_dock
    dock.combo.setCurrentIndex(dock.combo.findData("pgbench"))
    assert dock.params()["database"] == "tdescope_pgbench"  # a text parameter reaches the workload (KeyError before)
    for name, value in (("scale", 1), ("clients", 1), ("seconds", 1)):
        dock._spins[name].setValue(value)
    dock.capture.setChecked(False)
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=90000)
    table = dock.results.table
    rows = [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]
    assert [r[0] for r in rows] == ["read-only", "read-write"] and all(float(r[-1]) > 0 for r in rows), rows
    win.shutdown()
    pg_cluster.psql("DROP DATABASE IF EXISTS tdescope_pgbench")


def test_top_with_pgbench_watches_a_pgbench_client_backend(pg_cluster):
    out = _cli("top", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--workload", "pgbench", "--seconds", "3",
               "--json")
    pg_cluster.psql("DROP DATABASE IF EXISTS tdescope_pgbench")
    assert out.returncode == 0, out.stderr
    assert "watching pgbench's client backend pid" in out.stderr
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    # a busy backend, not tdescope's idle one (which perf never samples on the CPU): ~300 samples on a quiet
    # machine, 89 once beside two test runs; the server's own code among them
    assert sum(r.get("samples", 0) for r in rows) > 30, rows[:3]
    assert any(r.get("dso", "").endswith("/postgres") for r in rows), rows[:5]
