"""Secrets: a database password never shows in process arguments, children's environments,
session files, reports or settings. Real PostgreSQL role with a scram password (tests/pgcluster.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_tdescope
from pgcluster import PASSWORD, PASSWORD_ROLE

TDESCOPE = [sys.executable, "-m", "tdescope"]


def _descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _read(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def _guard_pids() -> list[int]:
    """Breakpoint guards: each runs in its own session (it must outlive the workbench), found by argv."""
    return [int(d.name) for d in Path("/proc").iterdir()
            if d.name.isdigit() and b"tdescope.app.gdb.guard" in _read(f"/proc/{d.name}/cmdline")]


@pytest.mark.gdb
def test_password_is_in_no_process_argument_nor_child_environment(pg_cluster):
    """``tdescope capture --engine postgres --dsn ...`` with a password role, the password in PGPASSWORD
    (libpq's own way): while armed, neither tdescope, gdb, the guard nor ``ps`` show it."""
    pg_cluster.psql(f"DROP TABLE IF EXISTS pw_secrets; CREATE TABLE pw_secrets (s bytea); "
                    f"INSERT INTO pw_secrets SELECT pgp_sym_encrypt('v' || g, 'k') FROM generate_series(1, 3) g; "
                    f"GRANT SELECT ON pw_secrets TO {PASSWORD_ROLE}")
    env = {**os.environ, "PGPASSWORD": PASSWORD}
    cli = subprocess.Popen([*TDESCOPE, "capture", "--backend", "gdb", "--engine", "postgres", "--dsn",
                            pg_cluster.dsn(user=PASSWORD_ROLE, host="127.0.0.1"), "--recipe", "page-read", "--sql",
                            "SELECT pg_sleep(0.1), count(*) FROM pw_secrets", "--count", "100000", "--timeout", "3"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, stdin=subprocess.DEVNULL)
    seen: set[str] = set()
    leaks: list[str] = []
    forked: dict[int, float] = {}  # children still running the workbench's own program: when first seen so
    deadline = time.monotonic() + 20
    while cli.poll() is None and time.monotonic() < deadline:
        pids = set(_descendants(cli.pid)) | set(_guard_pids())
        cli_cmdline = _read(f"/proc/{cli.pid}/cmdline")
        for p in pids:
            comm = _read(f"/proc/{p}/comm").strip().decode()
            cmdline = _read(f"/proc/{p}/cmdline")
            if b"guard" in cmdline:
                comm = "guard"
            seen.add(comm)
            if PASSWORD.encode() in cmdline:
                leaks.append(f"{comm} argv")
            if p == cli.pid or PASSWORD.encode() not in _read(f"/proc/{p}/environ"):
                continue
            # a child between fork and exec still has the workbench's environment and command line (a busy run
            # saw one); one that stays so for 2 s is a forked worker that kept the password: a leak
            if cmdline == cli_cmdline and time.monotonic() - forked.setdefault(p, time.monotonic()) < 2.0:
                continue
            leaks.append(f"{comm} environment")
        time.sleep(0.05)
    ps = subprocess.run(["ps", "axww", "-o", "pid,args"], capture_output=True, text=True).stdout
    out, err = cli.communicate(timeout=30)
    assert not leaks, leaks
    assert PASSWORD not in ps
    assert {"gdb", "guard"} <= seen, seen  # the children were there to be looked at
    assert PASSWORD.encode() not in out + err
    assert cli.returncode == 0, err


@pytest.mark.gdb
def test_password_is_in_no_session_file_report_or_settings(pg_cluster, qtbot, qsettings, tmp_path, monkeypatch):
    """The GUI connected with a password, recording its session: grep everything it wrote."""
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.window.main_window import MainWindow

    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.show()
    dsn = pg_cluster.dsn(user=PASSWORD_ROLE, host="127.0.0.1")
    win.connect_engine(ConnectParams(dsn=dsn, password=PASSWORD))
    qtbot.waitUntil(lambda: win.session is not None, timeout=30000)
    qtbot.waitUntil(lambda: win.recording.recorder is not None, timeout=10000)
    tds = Path(win.recording.recorder.path)
    qtbot.wait(600)
    win.close()
    win.shutdown()
    qsettings.sync()
    report = tmp_path / "r.html"
    made = run_tdescope("report", str(tds), "-o", str(report))
    assert made.returncode == 0, made.stderr
    written = [p for p in (tmp_path / "data").rglob("*") if p.is_file()] + [report, Path(qsettings.fileName())]
    assert tds in written and Path(qsettings.fileName()).exists()
    for path in written:
        assert PASSWORD.encode() not in path.read_bytes(), path
