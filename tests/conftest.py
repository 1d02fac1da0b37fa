"""Shared fixtures: real processes to probe, the lab, an isolated Qt settings file."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import time
import sys
import tempfile
from collections import Counter
from pathlib import Path

import pytest

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
# GUI tests record autosaves: keep them out of the real ~/.local/share
os.environ["XDG_DATA_HOME"] = tempfile.mkdtemp(prefix="tdescope-test-data-")

CLIENTS = Path(__file__).parent / "clients"
TDESCOPE = [sys.executable, "-m", "tdescope"]


def run_tdescope(*args, env=None, timeout=180) -> subprocess.CompletedProcess:
    """Run the ``tdescope`` command as a user would, capturing its output."""
    return subprocess.run([*TDESCOPE, *args], capture_output=True, text=True, timeout=timeout, env=env)


def assert_one_line_error(result, fragment: str) -> None:
    """The command failed with exactly one line on stderr holding ``fragment``, no traceback."""
    assert result.returncode != 0
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert fragment in lines[0], lines[0]


def wait_for(predicate, timeout: float = 10.0, interval: float = 0.02, what: str = "the event"):
    """Poll ``predicate`` until it returns something true, or fail after ``timeout`` seconds.

    For tests that wait on an event (a row count, a process state) rather than on time:
    returns the first true value, raises AssertionError naming ``what`` at the deadline.
    """
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(interval)


def replayed(qtbot, win, timeout_ms: int = 10000) -> None:
    """Wait until a replay window's views hold every event up to its play head: the feeder's process has
    handed over all it was asked for, and the pump has unpacked and delivered it (two drains at least)."""
    player = win.replay.player
    if player is not None:
        qtbot.waitUntil(lambda: player.caught_up, timeout=timeout_ms)
    qtbot.waitUntil(lambda: (win.pump.drain(), win.pump.idle)[1], timeout=timeout_ms)


def tracer_pid(pid: int) -> int:
    """TracerPid of ``pid`` from /proc (0 = not traced)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("TracerPid:"):
            return int(line.split()[1])
    raise AssertionError("no TracerPid line")


def probe_in_code(window) -> str:
    """Where a capture window's probe stands in its target, for a failure message: whether each armed
    address still holds the ``int3`` (a gdb probe; eBPF's uprobe shows too) and which tracer each thread
    has. Read while the window is armed, it tells a probe taken out from a decrypt that ran elsewhere."""
    handle, pid = window.handle, window.pid
    parts = []
    try:
        with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
            for loc in (handle.armed.locations if handle is not None else ()):
                mem.seek(int(loc, 16))
                parts.append(f"{loc}: {mem.read(1).hex()}")
        tracers = Counter(_thread_tracer(pid, t) for t in os.listdir(f"/proc/{pid}/task"))
    except OSError as exc:
        return f"pid {pid}: {exc}"
    return f"code bytes {', '.join(parts) or 'none armed'}; thread tracers {dict(tracers)}"


def probe_taken_out(summary, where: str) -> bool:
    """A gdb window whose probe the kernel took out while it ran: ``reinserted`` counted, or its ``int3`` not in
    the code when read after the action (:func:`probe_in_code`). Ending a uprobe at the same file offset in
    another process does it (another pytest worker's eBPF window on its own server of the same binary):
    what the action did meanwhile was not seen, and the window says so; a test runs it again."""
    probe = summary.counters.probe if summary.counters is not None else None
    return summary.backend == "gdb" and (getattr(probe, "reinserted", 0) > 0 or ": cc" not in where.split(";")[0])


def _thread_tracer(pid: int, tid: str) -> int:
    try:
        for line in Path(f"/proc/{pid}/task/{tid}/status").read_text().splitlines():
            if line.startswith("TracerPid:"):
                return int(line.split()[1])
    except OSError:
        pass
    return -1


def proc_state(pid: int) -> str:
    """Single-letter state of ``pid`` (R, S, T, t, Z...)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def _no_core_dumps() -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))



def compile_client(src: str, out: Path, *flags: str) -> Path:
    """Build the C test client ``tests/clients/SRC`` into ``out`` (-O1 -g and ``flags``); skip without cc."""
    if shutil.which("cc") is None:
        pytest.skip("no C compiler (cc)")
    subprocess.run(["cc", "-O1", "-g", *flags, "-o", str(out), str(CLIENTS / src)], check=True)
    return out


def probe_backend(name: str):
    """A probe backend by name for tests that run on both: ``gdb`` or ``ebpf`` (which must load here)."""
    from tdescope.app.probe.gdb_backend import GdbBackend
    from tdescope.app.probe.selection import ebpf_status

    if name == "gdb":
        # these tests check what is captured, on targets the test started. On a loaded machine (two test runs on
        # two cores) a gdb stop outlasted the product's 0.25 s watchdog, which ended the window after a hit or
        # two, as it must on a user's server, and the test saw 0 of 50 captures. The watchdog's own tests build
        # their backend from StopLimits (0.25 s: test_safety, test_safety_limits).
        return GdbBackend(watchdog_s=2.0)
    status = ebpf_status()
    assert status.ok, f"eBPF capture cannot run on this machine: {status.reason}"
    from tdescope.app.probe.ebpf.backend import EbpfBackend

    return EbpfBackend()


class AppProcess:
    """A running sqlcipher3 client (tests/clients/sqlcipher_app.py)."""

    def __init__(self, db: Path, rounds: int) -> None:
        self.stopfile = db.with_suffix(".stop")
        self.stopfile.unlink(missing_ok=True)
        self.proc = subprocess.Popen(
            [sys.executable, str(CLIENTS / "sqlcipher_app.py"), str(db), str(rounds), str(self.stopfile)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True,
            preexec_fn=_no_core_dumps,  # the safety tests' controls die of SIGTRAP on purpose
        )
        self.pid = int(self.proc.stdout.readline())

    def go(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()

    def stop(self) -> None:
        """Ask the app to end after its current round (it still verifies every row)."""
        self.stopfile.touch()

    def finish(self, timeout: float = 120) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def sqlcipher_app(tmp_path):
    """Factory of sqlcipher3 client processes; killed at teardown if still running."""
    started: list[AppProcess] = []

    def start(rounds: int = 10**9) -> AppProcess:
        app = AppProcess(tmp_path / "app.db", rounds)
        started.append(app)
        return app

    yield start
    for app in started:
        app.kill()


@pytest.fixture(autouse=True)
def _dead_windows_stay_out_of_worker_collections(request):
    """After a Qt test, freeze what is left (``gc.freeze``): the test's closed windows, and their
    pyqtgraph items, are never collected by a later worker thread's cyclic collection.

    A sampler thread's collection once destroyed a dead window's QObjects on that thread and deadlocked
    with the GUI thread (``~QObject`` waiting for the GIL, the GUI thread holding it while waiting for Qt's
    mutex); collecting them on the main thread from a timer instead crashed in pytest-qt's teardown. A test
    process may keep a few dozen dead windows; the workbench itself freezes its objects once built.
    """
    yield
    if "qtbot" in request.fixturenames or "qapp" in request.fixturenames:
        import gc

        gc.freeze()


@pytest.fixture
def lab():
    """A running SQLCipher lab worker."""
    from tdescope.plugins.sqlcipher.lab import LabSession

    session = LabSession()
    yield session
    session.close()


@pytest.fixture
def lab_window(qtbot, qsettings):
    """A shown MainWindow connected to a fresh SQLCipher lab; shut down at teardown."""
    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.window.main_window import MainWindow

    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    win.connect_engine(ConnectParams(lab=True))
    qtbot.waitUntil(lambda: win.session is not None, timeout=30000)
    yield win
    win.shutdown()


@pytest.fixture
def qsettings(tmp_path):
    """A QSettings in a temp file, so tests never touch the user's layout."""
    from PySide6.QtCore import QSettings

    return QSettings(str(tmp_path / "tdescope.ini"), QSettings.Format.IniFormat)


def pytest_report_header(config):
    return [f"gdb: {shutil.which('gdb')}, perf: {shutil.which('perf')}"]


@pytest.fixture(scope="session")
def pg_cluster():
    """A real PostgreSQL 15 cluster of our own (tests/pgcluster.py), torn down after the session."""
    from pgcluster import PgCluster

    if not Path("/usr/lib/postgresql/15/bin/initdb").exists() and shutil.which("initdb") is None:
        pytest.skip("PostgreSQL server binaries (initdb) are not installed")
    shared = os.environ.get(PgCluster.SHARED_ENV)
    if shared:  # one cluster for many short pytest runs (bench/bench_mutation.py): theirs to stop
        yield PgCluster.attach(shared)
        return
    cluster = PgCluster().start()
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def pgtde_lab():
    """The pg-tde lab (PostgreSQL 16.2 + Percona pg_tde), one for the whole run: built once into the
    user's cache (~15 s), then it starts in about a second."""
    from tdescope.app.engines.api import ConnectParams
    from tdescope.plugins.pgtde import ENGINE

    session = ENGINE.connect(ConnectParams(lab=True))
    yield session
    session.close()


@pytest.fixture(scope="session")
def sshd():
    """A private OpenSSH server on 127.0.0.1 with test accounts and sudo rules (tests/ssh_fixture.py).

    Needs root, sshd and sudo (``packaging/install-system-tools.sh`` installs them); torn down at the end
    of the session, also when a test failed."""
    from ssh_fixture import SSHD, start_sshd

    if os.geteuid() != 0:
        pytest.skip("the test sshd needs root (it creates accounts)")
    if not Path(SSHD).exists() or shutil.which("sudo") is None or shutil.which("ssh") is None:
        pytest.skip("openssh-server, openssh-client or sudo missing: run packaging/install-system-tools.sh")
    server = start_sshd()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def sshd_cut(sshd):
    """A second sshd (same accounts) in a network namespace whose link a test can cut: alias ``cut``.
    One per test: a cut link stays cut."""
    from ssh_fixture import start_netns_sshd

    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) missing")
    net = start_netns_sshd(sshd)
    try:
        yield net
    finally:
        net.stop()

