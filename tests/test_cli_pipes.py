"""A reader that leaves early (``tdescope capture --json | head -1``): quiet exit 0, the target released.

Every command prints through ``commands/_stdout.emit``; these run the real command into a real pipe
whose reader closes it, on real targets, and look at the target afterwards.
"""

from __future__ import annotations

import shlex
import subprocess
import time

import pytest

from conftest import TDESCOPE, tracer_pid, wait_for
from tdescope.app.gdb.guard import text_mismatches
from tdescope.app.hotspots.profile import check_perf


def _pipeline(command: list[str], timeout: float = 120) -> subprocess.CompletedProcess:
    """``COMMAND | head -1`` in bash with ``pipefail``: the exit status is the command's unless head fails."""
    line = f"set -o pipefail; {shlex.join(command)} | head -1"
    return subprocess.run(["bash", "-c", line], capture_output=True, text=True, timeout=timeout)


def _reader_leaves_at_once(*args: str, timeout: float = 120) -> tuple[int, str]:
    """Run ``tdescope ARGS`` with a stdout pipe that is closed before anything is read."""
    proc = subprocess.Popen([*TDESCOPE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    proc.stdout.close()
    err = proc.stderr.read()
    return proc.wait(timeout), err


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["gdb", "ebpf"])
def test_capture_into_head_ends_quietly_and_releases_the_target(sqlcipher_app, backend):
    app = sqlcipher_app()
    app.go()  # decrypting all the time: capture streams many more lines than head reads
    result = _pipeline([*TDESCOPE, "capture", "--backend", backend, "--pid", str(app.pid), "--count", "100000",
                        "--timeout", "60", "--json"])
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # no BrokenPipeError, no summary line: nothing at all
    assert result.stdout.count("\n") == 1 and '"pgno"' in result.stdout
    # the window disarmed and detached as on any other end: untraced, running, code as on disk
    assert tracer_pid(app.pid) == 0 and app.proc.poll() is None
    if backend == "ebpf":
        from test_ebpf_capture import our_uprobe_links

        wait_for(lambda: not our_uprobe_links(), timeout=10, what="no uprobe left attached")
    assert text_mismatches(app.pid) == []
    time.sleep(0.5)  # the app keeps decrypting and verifying, unprobed
    app.stop()
    code, out, err = app.finish()
    assert code == 0 and out.startswith("ok "), err


@pytest.mark.gdb
def test_capture_lab_human_lines_into_head():
    result = _pipeline([*TDESCOPE, "capture", "--lab", "--count", "50"])
    assert result.returncode == 0 and result.stderr == "", result.stderr
    assert "decrypt" in result.stdout and result.stdout.count("\n") == 1


@pytest.mark.parametrize("args", [
    ("doctor",),
    ("doctor", "--json"),
    ("waits", "--lab", "sqlcipher", "--seconds", "1"),
    ("waits", "--lab", "sqlcipher", "--seconds", "1", "--json"),
])
def test_reader_gone_before_the_first_line(args):
    code, err = _reader_leaves_at_once(*args)
    assert "Traceback" not in err and "Error" not in err, err
    assert err == "" and code in (0, 1)  # doctor says 1 when a check fails here; never 2, 3 or 120


@pytest.mark.perf
def test_top_reader_gone_before_the_first_line():
    if check_perf() is not None:
        pytest.skip(check_perf())
    code, err = _reader_leaves_at_once("top", "--lab", "sqlcipher", "--seconds", "1.5")
    assert code == 0 and err == "", err


def test_info_into_head(tmp_path):
    path = tmp_path / "s.tds"
    made = subprocess.run([*TDESCOPE, "record", "--lab", "sqlcipher", "--captures", "0", "--no-hotspots",
                           "--seconds", "1", "-o", str(path)], capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    code, err = _reader_leaves_at_once("info", str(path))
    assert code == 0 and err == "", err
    result = _pipeline([*TDESCOPE, "info", str(path)])
    assert result.returncode == 0 and result.stderr == "" and str(path) in result.stdout
