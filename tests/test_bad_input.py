"""The bad-input catalogue: each case met for real, answered with one clear line, nothing left armed.

(No gdb, pid gone, no hit before the timeout, absurd CLI parameters and a dying
lab worker are in test_cli.py; corrupt, truncated and newer session files in
test_session_file.py and test_session_cli.py; malformed text in
test_fuzz_parsers.py; the deny-list in test_deny_list.py.)
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import CLIENTS, assert_one_line_error, proc_state, run_tdescope, tracer_pid, wait_for
from pgcluster import PASSWORD, PASSWORD_ROLE
from tdescope.app.errors import UserError

TDESCOPE = [sys.executable, "-m", "tdescope"]
# root without the capabilities that let it ptrace or perf another user's process
DROP_CAPS = ["setpriv", "--inh-caps=-sys_ptrace,-perfmon,-sys_admin",
             "--bounding-set=-sys_ptrace,-perfmon,-sys_admin"]
SITE = Path(__import__("sqlcipher3").__file__).parent


def _traced_backends(cluster) -> list[int]:
    """Pids of ``cluster``'s processes (its postmaster's children) that a debugger traces. Only this cluster's:
    the machine is shared, and another test run's traced postgres is not ours."""
    postmaster = cluster.postmaster_pid()
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == postmaster \
                    and tracer_pid(int(d.name)) != 0:
                out.append(int(d.name))
        except (OSError, AssertionError):
            continue
    return out


@pytest.fixture
def old_gdb(tmp_path):
    fake = tmp_path / "bin" / "gdb"
    fake.parent.mkdir()
    fake.write_text('#!/bin/sh\necho "GNU gdb (GDB) 7.6"\necho "Copyright (C) 2013"\n')
    fake.chmod(0o755)
    return {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}


def test_gdb_too_old(old_gdb):
    doctor = subprocess.run([*TDESCOPE, "doctor"], capture_output=True, text=True, env=old_gdb, timeout=60)
    line = next(ln for ln in doctor.stdout.splitlines() if " gdb " in f" {ln} ")
    assert doctor.returncode != 0 and line.startswith("FAIL") and "7.6" in line and "9.0 or newer" in line
    assert_one_line_error(run_tdescope("capture", "--backend", "gdb", "--lab", "--count", "1", env=old_gdb),
                          "gdb 7.6 at")


@pytest.fixture
def nobodys_process():
    proc = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "sleep", "60"])
    # setpriv has dropped to nobody and exec'd sleep: the process to be denied exists
    wait_for(lambda: Path(f"/proc/{proc.pid}/comm").read_text().strip() == "sleep", timeout=10, what="sleep as nobody")
    yield proc.pid
    proc.kill()
    proc.wait()


@pytest.mark.gdb
def test_ptrace_denied(nobodys_process):
    result = subprocess.run([*DROP_CAPS, *TDESCOPE, "capture", "--backend", "gdb", "--pid", str(nobodys_process), "--count", "1",
                             "--timeout", "2"], capture_output=True, text=True, timeout=60)
    assert_one_line_error(result, f"ptrace not permitted on pid {nobodys_process}")
    assert tracer_pid(nobodys_process) == 0


def test_perf_paranoid(sqlcipher_app):
    paranoid = Path("/proc/sys/kernel/perf_event_paranoid")
    before = paranoid.read_text().strip()
    app = sqlcipher_app()
    try:
        if int(before) < 2:
            paranoid.write_text("2")  # what a stock distribution ships; restored below
        result = subprocess.run([*DROP_CAPS, *TDESCOPE, "top", "--pid", str(app.pid), "--seconds", "1"],
                                capture_output=True, text=True, timeout=60)
    finally:
        if paranoid.read_text().strip() != before:
            paranoid.write_text(before)
    assert_one_line_error(result, "perf_event_paranoid is 2: run sysctl kernel.perf_event_paranoid=1")


@pytest.mark.gdb
def test_target_exits_while_armed(sqlcipher_app):
    """SIGTERM to an armed target (a server shutting down) reaches it at once; one line, no stop held."""
    app = sqlcipher_app(rounds=1)  # waits on stdin: armed, never decrypts
    cli = subprocess.Popen([*TDESCOPE, "capture", "--backend", "gdb", "--pid", str(app.pid), "--count", "5",
                            "--timeout", "30"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # armed: traced, its breakpoints in, and let run again (no longer in gdb's attach stop)
    wait_for(lambda: tracer_pid(app.pid) != 0 and proc_state(app.pid) in "RS", timeout=30, what="the probe armed")
    os.kill(app.pid, signal.SIGTERM)
    t_kill = time.monotonic()
    out, err = cli.communicate(timeout=30)
    took = time.monotonic() - t_kill
    assert app.proc.wait(5) == -signal.SIGTERM  # the signal was delivered, not swallowed by gdb
    assert cli.returncode != 0 and out == "" and "Traceback" not in err
    assert err.strip().count("\n") == 0 and f"pid {app.pid} exited while armed (0 pages captured)" in err, err
    assert took < 5  # not held stopped until the watchdog, nor until the window's end


@pytest.mark.ebpf
def test_a_target_that_exits_while_the_probe_arms_is_one_line(monkeypatch):
    """The lab worker killed as the capture started (a load flake of test_worker_crash_is_reported) said
    "capture failed: FileNotFoundError: ... /proc/N/maps": the eBPF backend reads the maps to place its
    uprobes. Here the target dies after the window's checks, before the backend reads them."""
    from tdescope.app.probe import window as window_module
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    target = subprocess.Popen(["sleep", "60"])

    def exits_after_the_checks(pid, *args):
        target.kill()
        target.wait()
        return None  # "only attaching can tell" (a DWARF-name recipe, a library not loaded yet)

    monkeypatch.setattr(window_module, "refuse_unused_target", exits_after_the_checks)
    summary = CaptureWindow(target.pid, DECRYPT, CaptureLimits(max_captures=1, max_seconds=5), "sqlcipher",
                            lambda c: None, backend=EbpfBackend()).run()
    assert summary.error == f"pid {target.pid} exited before the probe was armed", summary


@pytest.fixture(scope="module")
def stripped_sqlcipher(tmp_path_factory):
    """A copy of the sqlcipher3 package whose extension has been stripped (as a distribution ships it)."""
    root = tmp_path_factory.mktemp("stripped")
    shutil.copytree(SITE, root / "sqlcipher3", ignore=shutil.ignore_patterns("__pycache__"))
    so = next((root / "sqlcipher3").glob("_sqlite3*.so"))
    tool = ["strip", "--strip-all"] if shutil.which("strip") else ["objcopy", "--strip-all"]
    subprocess.run([*tool, str(so)], check=True)
    return root, so


def test_stripped_binary_symbols_and_disassembly(stripped_sqlcipher):
    from tdescope.app.hotspots.disasm import function_bounds
    from tdescope.app.system.elf import find_symbol

    _, so = stripped_sqlcipher
    original = next(SITE.glob("_sqlite3*.so"))
    assert find_symbol(str(original), "sqlcipher_page_cipher") is not None
    assert find_symbol(str(so), "sqlcipher_page_cipher") is None
    with pytest.raises(UserError) as info:
        function_bounds(str(so), "sqlcipher_page_cipher")
    assert "stripped?" in str(info.value) and "\n" not in str(info.value)


@pytest.mark.gdb
def test_capture_on_a_stripped_build(stripped_sqlcipher, tmp_path):
    root, _ = stripped_sqlcipher
    env = {**os.environ, "PYTHONPATH": str(root)}
    app = subprocess.Popen([sys.executable, str(CLIENTS / "sqlcipher_app.py"), str(tmp_path / "s.db"), "1"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
    try:
        pid = int(app.stdout.readline())
        result = run_tdescope("capture", "--pid", str(pid), "--count", "1", "--timeout", "5")
        assert_one_line_error(result, "symbol sqlcipher_page_cipher not found")
        assert tracer_pid(pid) == 0 and proc_state(pid) == "S"
        app.stdin.write("go\n")
        app.stdin.flush()
        assert app.wait(60) == 0  # it runs on, unharmed
    finally:
        app.kill()


def test_wrong_database_password_on_the_cli(pg_cluster):
    env = {**os.environ, "PGPASSWORD": PASSWORD + "-wrong"}
    result = subprocess.run([*TDESCOPE, "capture", "--engine", "postgres", "--dsn",
                             pg_cluster.dsn(user=PASSWORD_ROLE, host="127.0.0.1"), "--sql", "SELECT 1",
                             "--count", "1", "--timeout", "5"],
                            capture_output=True, text=True, timeout=60, env=env, stdin=subprocess.DEVNULL)
    assert_one_line_error(result, f"wrong password for {PASSWORD_ROLE}@127.0.0.1")
    assert PASSWORD not in result.stderr


def test_password_in_the_dsn_is_refused(pg_cluster):
    dsn = pg_cluster.dsn(user=PASSWORD_ROLE, host="127.0.0.1") + f" password={PASSWORD}"
    result = run_tdescope("capture", "--engine", "postgres", "--dsn", dsn, "--sql", "SELECT 1", "--count", "1")
    assert_one_line_error(result, "put no password in --dsn")
    assert PASSWORD not in result.stderr


@pytest.mark.gdb
def test_database_restart_mid_workload(pg_cluster):
    pg_cluster.psql("DROP TABLE IF EXISTS restart_secrets; CREATE TABLE restart_secrets (s bytea); "
                    "INSERT INTO restart_secrets SELECT pgp_sym_encrypt('x' || g, 'k') FROM generate_series(1, 3) g")
    cli = subprocess.Popen([*TDESCOPE, "capture", "--backend", "gdb", "--engine", "postgres", "--dsn", pg_cluster.dsn(),
                            "--sql",
                            "SELECT pg_sleep(0.2), pgp_sym_decrypt(s, 'k') FROM restart_secrets",
                            "--count", "100000", "--timeout", "60", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        # armed: a backend of this cluster traced (no capture need come: pgcrypto's decrypt may give none)
        traced = wait_for(lambda: cli.poll() is not None or _traced_backends(pg_cluster), timeout=90,
                          what="the probe armed in a backend of this cluster")
        assert cli.poll() is None, cli.communicate(timeout=60)[1]
        time.sleep(0.8)  # the workload's queries run on, probed (nothing below counts on how long)
        pg_cluster.restart()
        out, err = cli.communicate(timeout=60)
    finally:
        cli.kill()
    assert cli.returncode != 0 and "Traceback" not in err
    assert err.strip().count("\n") == 0, err
    assert "exited while armed" in err or "terminating connection" in err or "server closed" in err, err
    assert not [pid for pid in traced if Path(f"/proc/{pid}").exists() and tracer_pid(pid) != 0]
    assert _traced_backends(pg_cluster) == []
    assert pg_cluster.psql("SELECT 1").strip() == "1"  # the server is back and serves


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "small"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=400k", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.gdb
def test_disk_full_while_recording(small_disk, tmp_path):
    out = small_disk / "run.tds"
    t0 = time.monotonic()
    # gdb paces the captures so some commits land before the disk fills (eBPF's 2000 pages arrive
    # within one commit period: the file would hold nothing, and this test checks what was kept)
    result = run_tdescope("record", "--lab", "sqlcipher", "--backend", "gdb", "--captures", "2000", "--seconds", "20",
                          "-o", str(out))
    took = time.monotonic() - t0
    assert_one_line_error(result, "stopped: database or disk is full")
    assert took < 15  # it stopped (and disarmed) when the disk filled, not at the end of the 20 s
    # what was committed is kept: copy it off the full disk and open it
    for f in small_disk.iterdir():
        shutil.copy(f, tmp_path / f.name)
    info = run_tdescope("info", str(tmp_path / "run.tds"))
    assert info.returncode == 0, info.stderr
    assert "marker" in info.stdout
