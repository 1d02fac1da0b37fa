"""The headless CLI, run as a user runs it: real processes, real gdb, exit codes, one-line errors."""

import json
import os
import subprocess
import sys

import pytest

from conftest import TDESCOPE, assert_one_line_error, run_tdescope as run, proc_state, tracer_pid, wait_for







def test_doctor_json_names_every_check():
    result = run("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    for name in ("Python", "Qt", "gdb", "ptrace", "perf", "perf_event_paranoid", "AES-NI", "engines"):
        assert name in checks
    assert checks["gdb"]["ok"] is True
    assert "sqlcipher" in checks["engines"]["value"]


@pytest.mark.gdb
def test_capture_on_a_pid_of_someone_elses_sqlcipher_app(sqlcipher_app, tmp_path):
    app = sqlcipher_app()
    dump = tmp_path / "dump"
    proc = subprocess.Popen([*TDESCOPE, "capture", "--backend", "gdb", "--engine", "sqlcipher", "--pid", str(app.pid),
                             "--count", "8", "--timeout", "60", "--json", "--dump", str(dump)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # the app starts reading once the probe is armed (TracerPid set)
    wait_for(lambda: tracer_pid(app.pid) != 0 and proc_state(app.pid) in "RS", timeout=30, what="the probe armed")
    app.go()
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    *records, summary = [json.loads(line) for line in out.splitlines()]
    assert len(records) == 8
    assert summary["summary"] and summary["backend"] == "gdb" and summary["captures"] == 8
    for r in records:
        for key in ("pgno", "symbol", "direction", "size", "before_entropy", "after_entropy", "page_type", "cells",
                    "before_sha256", "after_sha256"):
            assert key in r
        assert r["direction"] == "decrypt" and r["plaintext_side"] == "after" and r["before_entropy"] > 7.5
    assert any(r["page_type"] == "table leaf" and r["cells"] > 0 for r in records)
    files = sorted(p.name for p in dump.iterdir())
    assert files[:2] == ["0001-after-plaintext.bin", "0001-before-ciphertext.bin"] and len(files) == 16
    leaf = next(r for r in records if r["page_type"] == "table leaf" and r["pgno"] > 1)  # page 1: the schema
    assert b"tdescope-marker-row" in (dump / f"{leaf['seq']:04d}-after-plaintext.bin").read_bytes()
    assert b"tdescope-marker-row" not in (dump / f"{leaf['seq']:04d}-before-ciphertext.bin").read_bytes()
    # the application finishes its own work correctly, untraced
    assert tracer_pid(app.pid) == 0 and proc_state(app.pid) in "RS"
    app.stop()
    code, out, _ = app.finish()
    assert code == 0 and out.startswith("ok ") and int(out.split()[1]) % 3000 == 0


@pytest.mark.gdb
def test_capture_lab_prints_human_lines():
    result = run("capture", "--lab", "--count", "3")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 3 and all("decrypt" in line and "entropy" in line for line in lines)
    assert "3 page pairs captured (limit: max captures)" in result.stderr


def test_pid_that_is_gone():
    assert_one_line_error(run("capture", "--pid", "999999", "--count", "1"), "pid 999999 is gone")


@pytest.mark.gdb
def test_pid_that_does_not_use_sqlcipher():
    sleeper = subprocess.Popen(["sleep", "600"])
    try:
        result = run("capture", "--pid", str(sleeper.pid), "--count", "1", "--timeout", "5")
        assert_one_line_error(result, "does not use sqlcipher: symbol sqlcipher_page_cipher not found")
        assert tracer_pid(sleeper.pid) == 0 and proc_state(sleeper.pid) == "S"
    finally:
        sleeper.kill()


@pytest.mark.gdb
def test_record_a_pid_that_does_not_use_sqlcipher(tmp_path):
    """``record --pid`` refuses a process without the probed function as ``capture`` does: one line, exit 2,
    no session file, the process never stopped; without a probe (``--captures 0``) it records as asked."""
    sleeper = subprocess.Popen(["sleep", "600"])
    out = tmp_path / "s.tds"
    try:
        result = run("record", "--backend", "gdb", "--pid", str(sleeper.pid), "--seconds", "1", "-o", str(out))
        assert_one_line_error(result, f"pid {sleeper.pid} does not use sqlcipher: symbol sqlcipher_page_cipher")
        assert result.returncode == 2 and not out.exists()
        assert tracer_pid(sleeper.pid) == 0 and proc_state(sleeper.pid) == "S"
        watched = run("record", "--pid", str(sleeper.pid), "--captures", "0", "--no-hotspots", "--seconds", "1",
                      "-o", str(out))
        assert watched.returncode == 0 and out.exists(), watched.stderr
    finally:
        sleeper.kill()


@pytest.mark.gdb
def test_no_hit_before_the_timeout(sqlcipher_app):
    app = sqlcipher_app(rounds=1)  # waits on stdin: armed, but never decrypts
    result = run("capture", "--pid", str(app.pid), "--count", "1", "--timeout", "1.5")
    assert_one_line_error(result, "no decrypt hit on sqlcipher_page_cipher within 1.5 s")
    assert tracer_pid(app.pid) == 0
    app.go()
    assert app.finish()[0] == 0


def test_gdb_missing(tmp_path):
    env = {**os.environ, "PATH": str(tmp_path)}  # a PATH with no gdb on it
    result = run("capture", "--backend", "gdb", "--lab", "--count", "1", env=env)
    assert_one_line_error(result, "gdb not found")
    assert "`tdescope doctor`" in result.stderr


@pytest.mark.parametrize(
    "args, fragment",
    [
        (("capture", "--lab", "--count", "0"), "must be at least 1"),
        (("capture", "--lab", "--count", "-5"), "must be at least 1"),
        (("capture", "--lab", "--timeout", "0"), "between 0 and 3600"),
        (("capture", "--lab", "--timeout", "1e9"), "between 0 and 3600"),
        (("capture", "--engine", "nosuch", "--lab"), "unknown engine 'nosuch'"),
        (("capture", "--lab", "--recipe", "rot13"), "has no recipe 'rot13'"),
    ],
)
def test_absurd_parameters(args, fragment):
    result = run(*args)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert fragment in result.stderr


@pytest.mark.gdb
def test_worker_crash_is_reported(tmp_path):
    """The lab worker dies mid-workload: one line, nothing left armed."""
    code = (
        "import os, signal, threading, sys\n"
        "from tdescope.cli import main\n"
        "from tdescope.plugins.sqlcipher import lab\n"
        "orig = lab.LabSession.__init__\n"
        "def init(self, *a):\n"
        "    orig(self, *a)\n"
        "    threading.Timer(1.0, os.kill, (self.server_pid(), signal.SIGKILL)).start()\n"
        "lab.LabSession.__init__ = init\n"
        "sys.exit(main(['capture', '--lab', '--count', '100000', '--timeout', '60']))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode != 0
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr
    assert "crashed" in last or "exited" in last, result.stderr


def test_gui_without_a_display_says_so():
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    assert_one_line_error(run("gui", env=env), "no display")


def test_gui_takes_the_probe_backend():
    from tdescope.cli import build_parser

    assert build_parser().parse_args(["gui", "--backend", "gdb"]).backend == "gdb"
    assert build_parser().parse_args(["gui"]).backend == "auto"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["gui", "--backend", "dtrace"])
