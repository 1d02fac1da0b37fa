"""The deny-list: critical processes are refused by pid, from what the kernel says they are.

The PostgreSQL rules are checked against the real test cluster's postmaster and
background processes; Oracle cannot run here, so its rules are checked against
a real process that carries an Oracle background process's name in ``ps``
(``exec -a ora_pmon_TDS``), as Oracle's own do.
"""

from __future__ import annotations

import subprocess

import pytest

from conftest import assert_one_line_error, run_tdescope, tracer_pid, wait_for
from tdescope.app.engines.registry import critical_rules, discover_engines
from tdescope.app.system.critical import CriticalProcess, ProcessTitle, critical_role
from tdescope.app.probe.window import CaptureLimits, CaptureWindow
from tdescope.plugins.sqlcipher.engine import DECRYPT

RULES = critical_rules(discover_engines()[0].values())


def _background_pid(cluster, backend_type: str) -> int:
    return int(cluster.psql(f"SELECT pid FROM pg_stat_activity WHERE backend_type = '{backend_type}'").strip())


def test_every_engine_feeds_the_generic_check():
    assert {r.engine for r in RULES} >= {"postgres", "oracle"}
    assert all(isinstance(r, CriticalProcess) for r in RULES)


@pytest.mark.parametrize("title, expected", [
    ("/usr/lib/postgresql/15/bin/postgres -D /var/lib/postgresql/15/main -c config_file=x", "postmaster"),
    ("postgres -D /srv/pg", "postmaster"),
    ("postgres: checkpointer ", "checkpointer"),
    ("postgres: background writer ", "background writer"),
    ("postgres: walwriter ", "walwriter"),
    ("postgres: autovacuum launcher ", "autovacuum launcher"),
    ("postgres: 15/main: logical replication launcher ", "logical replication launcher"),
    ("ora_pmon_ORCL", "pmon"), ("ora_smon_ORCL", "smon"), ("ora_lgwr_ORCL", "lgwr"), ("ora_dbw0_ORCL", "dbw0"),
    ("ora_dbwa_CDB1", "dbwa"), ("ora_ckpt_ORCL", "ckpt"), ("ora_lms0_RAC1", "lms0"), ("ora_lmd0_RAC1", "lmd0"),
    ("ora_lmon_RAC1", "lmon"), ("asm_pmon_+ASM", "pmon"),
])
def test_critical_titles(title, expected):
    what = next(filter(None, (r.match(ProcessTitle(1, title, title[:15])) for r in RULES)), None)
    assert what is not None and expected in what


@pytest.mark.parametrize("title", [
    "postgres: alice shop 127.0.0.1(50312) idle", "postgres: 15/main: bob db [local] SELECT",
    "oracleORCL (LOCAL=NO)", "oracleORCL (DESCRIPTION=(LOCAL=YES)(ADDRESS=(PROTOCOL=beq)))",
    "python tests/clients/sqlcipher_app.py", "psql -h /tmp postgres", "sleep 30",
])
def test_ordinary_titles(title):
    assert all(r.match(ProcessTitle(1, title, title[:15])) is None for r in RULES)


@pytest.mark.parametrize("which, fragment", [
    ("postmaster", "is the PostgreSQL postmaster"),
    ("checkpointer", "is the PostgreSQL checkpointer, a background process"),
    ("background writer", "background writer"),
    ("walwriter", "walwriter"),
])
def test_capture_by_pid_refuses_the_clusters_critical_processes(pg_cluster, which, fragment):
    pid = pg_cluster.postmaster_pid() if which == "postmaster" else _background_pid(pg_cluster, which)
    for engine in ("postgres", "sqlcipher"):  # whatever engine the user named
        result = run_tdescope("capture", "--engine", engine, "--pid", str(pid), "--count", "1", "--timeout", "2")
        assert_one_line_error(result, fragment)
        assert "--allow-critical" in result.stderr
    assert tracer_pid(pid) == 0


def test_record_by_pid_refuses_too(pg_cluster, tmp_path):
    pid = _background_pid(pg_cluster, "checkpointer")
    result = run_tdescope("record", "--pid", str(pid), "--seconds", "1", "-o", str(tmp_path / "x.tds"))
    assert_one_line_error(result, "checkpointer")
    assert not (tmp_path / "x.tds").exists()


@pytest.mark.gdb
def test_allow_critical_lets_the_check_pass(pg_cluster):
    """With the override the deny-list steps aside; the sqlcipher probe then finds no symbol in the
    checkpointer, before attaching: the process is never stopped."""
    pid = _background_pid(pg_cluster, "checkpointer")
    result = run_tdescope("capture", "--pid", str(pid), "--count", "1", "--timeout", "2", "--allow-critical")
    assert_one_line_error(result, "does not use sqlcipher")
    assert tracer_pid(pid) == 0


def _oracle_pmon() -> subprocess.Popen:
    """A real process that ``ps`` shows as Oracle's pmon, as Oracle's background processes are shown."""
    proc = subprocess.Popen(["bash", "-c", "exec -a ora_pmon_TDS sleep 600"])
    wait_for(lambda: critical_role(proc.pid, RULES), timeout=10, what="the exec as ora_pmon_TDS")
    return proc


@pytest.mark.parametrize("allow, error", [
    (False, "is the Oracle background process pmon: stopping it in a debugger stalls the whole server"),
    (True, "does not use sqlcipher"),  # the override steps aside; the probe then finds no symbol in sleep
])
def test_the_capture_window_itself_refuses_a_critical_process(allow, error):
    """The refusal lives where the probe attaches: no caller can forget it."""
    proc = _oracle_pmon()
    states = []
    try:
        window = CaptureWindow(proc.pid, DECRYPT, CaptureLimits(max_captures=1, max_seconds=2), "sqlcipher",
                               lambda c: None, states.append, allow_critical=allow)
        summary = window.run()
        assert summary.reason == "error" and error in summary.error
        assert [s.state for s in states] == ["failed"] and window.handle is None  # nothing ever attached
        assert tracer_pid(proc.pid) == 0 and proc.poll() is None
    finally:
        proc.kill()
        proc.wait()


def test_an_oracle_background_process_is_refused():
    proc = _oracle_pmon()
    try:
        assert critical_role(proc.pid, RULES) == "the Oracle background process pmon"
        result = run_tdescope("capture", "--pid", str(proc.pid), "--count", "1", "--timeout", "2")
        assert_one_line_error(result, "is the Oracle background process pmon")
        assert tracer_pid(proc.pid) == 0
    finally:
        proc.kill()
        proc.wait()
