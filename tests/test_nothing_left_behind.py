"""kill -9 of the workbench leaves no child of its own running: perf and a lab's server are reaped."""

import os
import signal
import subprocess
import sys

import pytest

from conftest import TDESCOPE, compile_client, wait_for


def _perf_on(pid: int) -> list[int]:
    out = subprocess.run(["pgrep", "-f", f"perf record .*-p {pid},"], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def _perf_scripts_of(parent: int) -> list[int]:
    """The ``perf script`` processes whose parent is ``parent``."""
    out = []
    for name in os.listdir("/proc"):
        try:
            with open(f"/proc/{name}/stat") as fh:
                ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{name}/cmdline", "rb") as fh:
                argv = fh.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if ppid == parent and argv[:2] == [b"perf", b"script"]:
            out.append(int(name))
    return out


@pytest.mark.perf
@pytest.mark.parametrize("command", [["top", "--seconds", "60"], ["record", "--seconds", "60", "--captures", "0",
                                                                   "--engine", "sqlcipher"]])
def test_perf_dies_with_a_killed_command(tmp_path, command):
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    target = subprocess.Popen([str(exe), "60"])
    try:
        extra = ["-o", str(tmp_path / "r.tds")] if command[0] == "record" else []
        cli = subprocess.Popen([*TDESCOPE, command[0], "--pid", str(target.pid), *command[1:], *extra],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(lambda: _perf_on(target.pid) and _perf_scripts_of(cli.pid), timeout=60, interval=0.05,
                 what="perf record | perf script started")
        scripts = _perf_scripts_of(cli.pid)
        cli.send_signal(signal.SIGKILL)
        cli.wait()
        wait_for(lambda: not _perf_on(target.pid), timeout=20, interval=0.05,
                 what="perf record ending with the killed workbench")
        wait_for(lambda: not [p for p in scripts if os.path.exists(f"/proc/{p}")], timeout=20, interval=0.05,
                 what="perf script ending with the killed workbench")
    finally:
        target.kill()
        target.wait()


def test_a_killed_workbench_takes_its_mariadb_lab_along():
    code = ("from tdescope.app.engines.api import ConnectParams\n"
            "from tdescope.plugins.mariadb import ENGINE\n"
            "s = ENGINE.connect(ConnectParams(lab=True))\n"
            "print(s.server_pid(), s.lab.dir, flush=True)\n"
            "import time; time.sleep(600)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    pid, folder = proc.stdout.readline().split()
    assert os.path.exists(os.path.join(folder, "keys"))
    proc.kill()
    proc.wait()
    wait_for(lambda: not (os.path.exists(f"/proc/{pid}") or os.path.exists(folder)), timeout=30, interval=0.05,
             what="the lab's server and its folder gone with the killed workbench")


def _probe_folders() -> set[str]:
    return {f for f in os.listdir("/tmp") if f.startswith("tdescope-probe-")}


def _spools_open_in(pid: int) -> set[str]:
    """The gdb spool folders whose files ``pid`` holds open (the machine is shared: other runs' spools come
    and go in /tmp meanwhile)."""
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("/tmp/tdescope-probe-"):
            found.add(target.split("/")[2])
    return found


def test_a_killed_gdb_capture_leaves_no_spool_of_plaintext(tmp_path):
    """The gdb spool holds decrypted pages: kill -9 of ``capture`` while armed must not leave it in /tmp."""
    before = _probe_folders()
    cli = subprocess.Popen([*TDESCOPE, "capture", "--lab", "--backend", "gdb", "--count", "100000",
                            "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert cli.stdout.readline(), "no capture came"  # armed, and pages are in the spool
        spools = _spools_open_in(cli.pid)
        assert spools and spools <= _probe_folders() - before
        for folder in spools:
            assert os.stat(f"/tmp/{folder}").st_mode & 0o077 == 0  # nobody else may read it meanwhile
    finally:
        cli.send_signal(signal.SIGKILL)
        cli.wait()
    wait_for(lambda: not spools & _probe_folders(), timeout=30, interval=0.05,
             what="the spool removed after the killed workbench")


def test_files_holding_captured_bytes_are_private(tmp_path):
    """Session files and --dump files are 0600 in 0700 folders (the umask may be 022)."""
    old = os.umask(0o022)
    try:
        session = tmp_path / "new" / "s.tds"
        dump = tmp_path / "dump"
        rec = subprocess.run([*TDESCOPE, "record", "--lab", "sqlcipher", "--seconds", "2", "--captures", "3",
                              "--no-hotspots", "--no-waits", "-o", str(session)], capture_output=True, text=True,
                             timeout=120)
        assert rec.returncode == 0, rec.stderr
        cap = subprocess.run([*TDESCOPE, "capture", "--lab", "--count", "2", "--dump", str(dump)],
                             capture_output=True, text=True, timeout=120)
        assert cap.returncode == 0, cap.stderr
    finally:
        os.umask(old)
    assert session.stat().st_mode & 0o777 == 0o600 and session.parent.stat().st_mode & 0o777 == 0o700
    for extra in session.parent.iterdir():  # -wal and -shm take the file's mode
        assert extra.stat().st_mode & 0o077 == 0, extra
    assert dump.stat().st_mode & 0o777 == 0o700
    files = list(dump.iterdir())
    assert files and all(f.stat().st_mode & 0o777 == 0o600 for f in files)
