"""kill -9 of the workbench leaves no child of its own running: perf and a lab's server are reaped."""

import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import TDESCOPE, compile_client


def _perf_on(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"perf record .* -p {pid} "], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _gone_within(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not check():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.perf
@pytest.mark.parametrize("command", [["top", "--seconds", "60"], ["record", "--seconds", "60", "--captures", "0",
                                                                   "--engine", "sqlcipher"]])
def test_perf_dies_with_a_killed_command(tmp_path, command):
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    target = subprocess.Popen([str(exe), "60"])
    try:
        extra = ["-o", str(tmp_path / "r.tds")] if command[0] == "record" else []
        before = {f for f in os.listdir("/tmp") if f.startswith("tdescope-perf-")}
        cli = subprocess.Popen([*TDESCOPE, command[0], "--pid", str(target.pid), *command[1:], *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while not _perf_on(target.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        perf = _perf_on(target.pid)
        assert perf, "perf never started"
        folders = [f for f in os.listdir("/tmp") if f.startswith("tdescope-perf-") and f not in before]
        assert folders
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        assert _gone_within(lambda: _perf_on(target.pid), 2.0), "perf outlived the killed workbench"
        assert _gone_within(lambda: [f for f in folders if os.path.exists(f"/tmp/{f}")], 2.0)
    finally:
        target.kill()
        target.wait()


def test_a_killed_workbench_takes_its_mariadb_lab_along():
    code = ("from tdescope.app.engines.api import ConnectParams\n"
            "from tdescope.plugins.mariadb import ENGINE\n"
            "s = ENGINE.connect(ConnectParams(options={'lab': True}))\n"
            "print(s.server_pid(), s.lab.dir, flush=True)\n"
            "import time; time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid, folder = proc.stdout.readline().split()
    assert os.path.exists(os.path.join(folder, "keys"))
    proc.kill()
    proc.wait()
    assert _gone_within(lambda: os.path.exists(f"/proc/{pid}") or os.path.exists(folder), 30)
