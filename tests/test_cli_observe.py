"""``tdescope top`` and ``tdescope waits`` as a user runs them: real lab, real processes, exit codes."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_tdescope as run

from tdescope.app.hotspots.profile import check_perf

CLIENTS = Path(__file__).parent / "clients"






@pytest.mark.perf
def test_top_on_the_lab_json():
    if check_perf() is not None:
        pytest.skip(check_perf())
    result = run("top", "--lab", "sqlcipher", "--seconds", "3", "--limit", "15", "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert 5 <= len(records) <= 15
    for r in records:
        assert {"symbol", "dso", "samples", "self_pct", "crypto", "glossary"} <= set(r)
        assert isinstance(r["crypto"], bool) and r["samples"] >= 0
    crypto = [r for r in records if r["crypto"]]
    assert crypto, [r["symbol"] for r in records]
    assert any(r["glossary"] for r in crypto)  # the OpenSSL glossary explains them
    assert records == sorted(records, key=lambda r: -r["samples"])


@pytest.fixture(scope="module")
def preader(tmp_path_factory):
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("preader")
    exe = d / "preader"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(CLIENTS / "preader.c")], check=True)
    data = d / "data.bin"
    data.write_bytes(os.urandom(16 << 20))
    proc = subprocess.Popen([str(exe), str(data)])
    yield proc
    proc.kill()
    proc.wait()


def test_waits_on_a_pid_json(preader):
    result = run("waits", "--pid", str(preader.pid), "--seconds", "1.5", "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    records = [r for r in lines if "syscall" not in r]  # the sampled shares
    exact = [r for r in lines if "syscall" in r]  # then the exact table, one record per (class, syscall)
    assert records and exact
    for r in records:
        assert {"class", "event", "samples", "pct"} <= set(r)
    assert ("File I/O", "pread64") in {(r["class"], r["event"]) for r in records}
    assert sum(r["pct"] for r in records) == pytest.approx(100.0, abs=0.1)
    for r in exact:
        assert {"source", "class", "syscall", "count", "total_us", "p50_us", "p99_us"} <= set(r)
    pread = next(r for r in exact if r["syscall"] == "pread64")
    assert pread["source"] == "ebpf" and pread["class"] == "File I/O" and pread["bytes_p50"] > 0


@pytest.mark.perf
def test_top_on_a_pid_ranks_the_hot_function_first(tmp_path):
    if check_perf() is not None:
        pytest.skip(check_perf())
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    exe = tmp_path / "hot"
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(exe), str(CLIENTS / "hot.c")],
                   check=True)
    proc = subprocess.Popen([str(exe), "600"])
    try:
        result = run("top", "--pid", str(proc.pid), "--seconds", "1.5", "--perf-hz", "997")
    finally:
        proc.kill()
        proc.wait()
    assert result.returncode == 0, result.stderr
    header, first_row = result.stdout.splitlines()[:2]
    assert header.split()[:5] == ["self", "total", "samples", "function", "[library]"], header
    first = first_row.split()
    assert first[3] == "hot_loop" and float(first[0].rstrip("%")) > 50, result.stdout
    # the header's columns stand over the row's: each header word ends where its number does
    ends = lambda line: [m.end() for m in re.finditer(r"\S+", line)][:3]  # noqa: E731
    assert ends(header) == ends(first_row), (header, first_row)
    assert "samples in" in result.stderr and "at 997 Hz" in result.stderr


def _perf_scripts_of(parent: int) -> list[int]:
    """The ``perf script`` processes whose parent is ``parent``."""
    found = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and argv[:2] == [b"perf", b"script"]:
            found.append(int(name))
    return found


def _send_each(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass  # ended meanwhile


@pytest.mark.perf
def test_top_waits_for_a_perf_script_that_lags(tmp_path):
    """On a loaded 2-core machine perf script printed its windows seconds late, and ``top`` said "perf
    recorded no samples in 1.5 s although pid N used ... CPU" about samples not printed yet. The lag is
    made here: perf script is held stopped for 6 s (it then catches up), and ``top`` waits for it."""
    import signal
    import sys
    import threading

    from conftest import TDESCOPE, compile_client, wait_for

    if check_perf() is not None:
        pytest.skip(check_perf())
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    hot = subprocess.Popen([str(exe), "60"])
    cli = subprocess.Popen([*TDESCOPE, "top", "--pid", str(hot.pid), "--seconds", "1.5", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        scripts = wait_for(lambda: _perf_scripts_of(cli.pid), timeout=60, what="perf script started")
        _send_each(scripts, signal.SIGSTOP)
        resume = threading.Timer(6.0, _send_each, (scripts, signal.SIGCONT))
        resume.start()
        out, err = cli.communicate(timeout=120)
        resume.join()
    finally:
        cli.kill()
        hot.kill()
        hot.wait()
    assert cli.returncode == 0, err
    assert json.loads(out.splitlines()[0])["symbol"] == "hot_loop", out

def test_waits_on_the_lab_text():
    result = run("waits", "--lab", "sqlcipher", "--seconds", "2")
    assert result.returncode == 0, result.stderr
    assert "CPU" in result.stdout and "samples" in result.stderr


@pytest.mark.parametrize("command", ["top", "waits"])
def test_gone_pid_is_one_line(command):
    proc = subprocess.Popen(["true"])
    proc.wait()
    assert_one_line_error(run(command, "--pid", str(proc.pid), "--seconds", "1"), "is gone")


def test_top_without_perf_is_one_line(tmp_path, preader):
    env = {**os.environ, "PATH": str(tmp_path)}
    assert_one_line_error(run("top", "--pid", str(preader.pid), "--seconds", "1", env=env), "perf not found")


@pytest.mark.parametrize("args, fragment", [
    (["top", "--seconds", "1"], "one of the arguments --pid --lab"),
    (["waits", "--pid", "1", "--seconds", "0"], "must be between 0 and 3600"),
    (["top", "--lab", "nosuchdb", "--seconds", "1"], "unknown engine 'nosuchdb'"),
    (["top", "--pid", "1", "--perf-hz", "0"], "must be between 1 and 10000 Hz, not 0"),
    (["record", "--pid", "1", "--seconds", "1", "-o", "x.tds", "--perf-hz", "20000"], "between 1 and 10000 Hz"),
    (["top", "--pid", "1", "--perf-hz", "fast"], "not a whole number of Hz: 'fast'"),
])
def test_bad_arguments(args, fragment):
    result = run(*args)
    assert result.returncode != 0 and fragment in result.stderr and "Traceback" not in result.stderr


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"])
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("command, line", [
    ("top", "no CPU samples in 1.5 s: pid {pid} was idle"),
    ("waits", "no samples but Idle in 1.5 s: pid {pid} was idle (--idle lists them)"),
])
def test_an_idle_process_is_one_line_and_exit_1_for_both(sleeper, command, line):
    """``top`` and ``waits`` agree: an idle target is not an error (2) but nothing to show (1), said in one line."""
    if command == "top" and check_perf() is not None:
        pytest.skip(check_perf())
    for extra in ((), ("--json",)):
        result = run(command, "--pid", str(sleeper.pid), "--seconds", "1.5", *extra)
        assert_one_line_error(result, line.format(pid=sleeper.pid))
        assert result.returncode == 1
    listed = run("waits", "--pid", str(sleeper.pid), "--seconds", "1", "--idle")
    assert listed.returncode == 0 and "Idle" in listed.stdout.splitlines()[1]


@pytest.mark.perf
def test_record_samples_at_the_perf_hz_asked_for(tmp_path):
    if check_perf() is not None:
        pytest.skip(check_perf())
    from conftest import compile_client
    from tdescope.app.events import HotspotWindow
    from tdescope.app.session.reader import SessionReader

    exe = compile_client("hot.c", tmp_path / "hot")  # no frame pointers asked for: DWARF unwinds it
    proc = subprocess.Popen([str(exe), "600"])
    out = tmp_path / "r.tds"
    try:
        result = run("record", "--pid", str(proc.pid), "--captures", "0", "--no-waits", "--perf-hz", "251",
                     "--seconds", "6", "-o", str(out))
    finally:
        proc.kill()
        proc.wait()
    assert result.returncode == 0, result.stderr
    with SessionReader(out) as reader:
        windows = [e for e in reader.events() if isinstance(e, HotspotWindow)]
    assert windows and {w.frequency for w in windows} == {251}
    stacks = {s for w in windows for s in w.stacks}
    assert any(s.endswith("main;hot_loop") for s in stacks), sorted(stacks)[:5]  # the caller is unwound
