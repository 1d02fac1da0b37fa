"""Ctrl+C ends every headless command the same way (issue #27, item 9): exit 130 as shells expect, one line
on stderr saying what was kept, and the file or the partial results left in place. A real SIGINT is sent to
a real command while it works."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess

import pytest

from conftest import TDESCOPE, run_tdescope, wait_for


def _events_in(path) -> int:
    try:
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1) as db:
            return db.execute("SELECT count(*) FROM events WHERE kind = 'PageCapture'").fetchone()[0]
    except sqlite3.Error:
        return 0


def _interrupt(proc: subprocess.Popen) -> tuple[str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    return out, err


def test_ctrl_c_on_record_exits_130_and_keeps_the_file(tmp_path):
    out = tmp_path / "s.tds"
    proc = subprocess.Popen([*TDESCOPE, "record", "--lab", "sqlcipher", "--captures", "100000", "--no-hotspots",
                             "--seconds", "600", "-o", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for(lambda: out.exists() and _events_in(out) > 0 or proc.poll() is not None, timeout=120,
                 what="a capture committed to the session file")
        assert proc.poll() is None, proc.communicate()
        stdout, err = _interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("tdescope: interrupted") and str(out) in lines[0], lines[0]
    info = run_tdescope("info", str(out))
    assert info.returncode == 0, info.stderr
    assert _events_in(out) > 0


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["gdb", "auto"])
def test_ctrl_c_on_capture_exits_130_and_keeps_the_dump(tmp_path, backend):
    dump = tmp_path / "dump"
    proc = subprocess.Popen([*TDESCOPE, "capture", "--lab", "--backend", backend, "--count", "100000", "--timeout",
                             "600", "--dump", str(dump)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for(lambda: (dump.exists() and any(dump.iterdir())) or proc.poll() is not None, timeout=120,
                 what="a dumped page")
        assert proc.poll() is None, proc.communicate()
        stdout, err = _interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    lines = [line for line in err.strip().splitlines() if not line.startswith("probing with gdb:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("tdescope: interrupted: ") and str(dump) in lines[0], lines[0]
    kept = sorted(dump.iterdir())
    assert kept and stdout.count("\n") >= 1  # what was captured before Ctrl+C was printed and stays on disk


def _descendant_named(root: int, comm: str) -> bool:
    """A process named ``comm`` below ``root`` (perf, once ``top`` started it)."""
    kids: dict[int, list[int]] = {}
    for d in os.scandir("/proc"):
        if d.name.isdigit():
            try:
                with open(f"/proc/{d.name}/stat", "rb") as fh:
                    kids.setdefault(int(fh.read().rsplit(b")", 1)[1].split()[1]), []).append(int(d.name))
            except (OSError, IndexError, ValueError):
                continue
    todo = list(kids.get(root, []))
    while todo:
        p = todo.pop()
        try:
            with open(f"/proc/{p}/comm") as fh:
                if fh.read().strip() == comm:
                    return True
        except OSError:
            pass
        todo.extend(kids.get(p, []))
    return False


@pytest.mark.perf
@pytest.mark.parametrize("command, child", [("top", "perf"), ("waits", "python")])
def test_ctrl_c_on_top_and_waits_exits_130_with_what_was_seen(command, child):
    """Once the samplers run, Ctrl+C prints the rows seen so far (if any window had ended) and one line."""
    proc = subprocess.Popen([*TDESCOPE, command, "--lab", "sqlcipher", "--seconds", "600"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for(lambda: _descendant_named(proc.pid, child) or proc.poll() is not None, timeout=120,
                 what=f"{command}'s {child}")
        assert proc.poll() is None, proc.communicate()
        stdout, err = _interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdescope: interrupted"), err
    if "the rows above" in lines[0]:
        assert stdout.strip(), "the line speaks of rows that were not printed"


def _lab_worker_cpu_s(root: int) -> float:
    """CPU seconds of the SQLCipher lab worker below ``root`` (0 until it runs)."""
    for d in os.scandir("/proc"):
        if d.name.isdigit():
            try:
                with open(f"/proc/{d.name}/cmdline", "rb") as fh:
                    if b"tdescope.plugins.sqlcipher.lab_worker" not in fh.read():
                        continue
                with open(f"/proc/{d.name}/stat", "rb") as fh:
                    fields = fh.read().rsplit(b")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == root:
                return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return 0.0


def test_ctrl_c_on_ab_exits_130_with_the_rounds_that_completed():
    """Once the lab has done some rounds' work, Ctrl+C shows the figures of the completed rounds, then one line."""
    proc = subprocess.Popen([*TDESCOPE, "ab", "--lab", "sqlcipher", "--rounds", "50"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
    try:
        wait_for(lambda: _lab_worker_cpu_s(proc.pid) > 4.0 or proc.poll() is not None, timeout=180,
                 what="the lab worker's first rounds")
        assert proc.poll() is None, proc.communicate()
        stdout, err = _interrupt(proc)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tdescope: interrupted"), err
    if "timed rounds" in lines[0]:
        assert "of 50 timed rounds" in lines[0] and "cancelled" in stdout, stdout
