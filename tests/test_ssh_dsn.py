"""``--dsn`` carried over ``--ssh`` (issue 28): a real PostgreSQL that the workbench cannot reach directly.

The "database host" is a network namespace (tests/ssh_fixture.py's netns sshd, alias ``dbhost``): the
cluster listens on 127.0.0.1 *inside* it, so from here that address and port lead nowhere; only the ssh
connection into the namespace reaches it (a forward ending in a unix socket in tdescope's 0700 folder).
The agent runs there under ``sudo -n`` with the system python3 and probes the backend with eBPF; the
backend checks ask the agent for the host's process table.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_tdescope, wait_for
from pgcluster import PgCluster

psycopg = pytest.importorskip("psycopg")

DECRYPT_SQL = "SELECT sum(length(pgp_sym_decrypt(s, 'k'))) FROM watched"


class NetnsCluster(PgCluster):
    """:class:`PgCluster` whose server starts inside network namespace ``netns``: its TCP port is the
    namespace's loopback only. (Its unix socket folder is on the shared file system: the test's own
    setup uses it, as root.)"""

    def __init__(self, netns: str) -> None:
        super().__init__()
        self.netns = netns

    def _run(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = list(argv)
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        return subprocess.run(["ip", "netns", "exec", self.netns, *cmd], capture_output=True, text=True,
                              check=check, timeout=timeout, stdin=subprocess.DEVNULL)

    def tcp_dsn(self, dbname: str = "postgres") -> str:
        """The DSN as it works on the database host: its own loopback."""
        return f"host=127.0.0.1 port={self.port} dbname={dbname} user={self.superuser} connect_timeout=5"


@pytest.fixture(scope="module")
def db_host(sshd):
    """(ssh alias, cluster): PostgreSQL 15 in a network namespace reached by its own sshd."""
    from ssh_fixture import start_netns_sshd

    if shutil.which("ip") is None:
        pytest.skip("iproute2 (ip) missing")
    if not Path("/usr/lib/postgresql/15/bin/initdb").exists():
        pytest.skip("PostgreSQL server binaries (initdb) are not installed")
    net = start_netns_sshd(sshd, alias="dbhost", tag="d")
    cluster = NetnsCluster(net.name)
    try:
        cluster.start()
        cluster.root.chmod(0o711)  # the ssh account reaches the socket (for the socket-folder DSN)
        cluster.psql("CREATE TABLE watched (id int, s bytea);"
                     "INSERT INTO watched SELECT g, pgp_sym_encrypt('CARD-' || g || repeat('x', 200), 'k') "
                     "FROM generate_series(1, 200) g;")
        yield "dbhost", cluster
    finally:
        cluster.stop()
        net.stop()


@pytest.fixture
def busy_backend(db_host):
    """A client backend of the namespaced server decrypting in a loop (an application's): its pid."""
    _, cluster = db_host
    stop = threading.Event()
    conn = psycopg.connect(cluster.dsn(), autocommit=True)  # the socket folder: the test's own way in
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def loop() -> None:
        while not stop.is_set():
            conn.execute(DECRYPT_SQL).fetchone()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield pid
    stop.set()
    thread.join(30)
    conn.close()


def _ssh(sshd, alias: str) -> list[str]:
    return ["--ssh", alias, "--ssh-config", str(sshd.config)]


def _captures(stdout: str) -> tuple[list[dict], dict]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [r for r in rows if not r.get("summary")], next(r for r in rows if r.get("summary"))


def test_the_database_is_not_reachable_from_here(db_host):
    """The premise: without --ssh the DSN leads nowhere (the port is the namespace's loopback)."""
    _, cluster = db_host
    assert_one_line_error(run_tdescope("capture", "--engine", "postgres", "--dsn", cluster.tcp_dsn(), "--sql",
                                       "SELECT 1", "--count", "1", timeout=60), "PostgreSQL server not reachable")


def test_capture_over_ssh_with_a_dsn_and_sql(sshd, db_host):
    alias, cluster = db_host
    result = run_tdescope("capture", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--sql", DECRYPT_SQL, "--count", "3", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    pairs, summary = _captures(result.stdout)
    assert len(pairs) == 3 and summary["backend"] == "ebpf" and summary["captures"] == 3
    assert {p["symbol"] for p in pairs} == {"pgp_cfb_decrypt"}
    assert "capturing on dbhost via ssh" in result.stderr


def test_capture_over_ssh_watches_a_backend_it_does_not_drive(sshd, db_host, busy_backend):
    """Watch mode: no SQL of tdescope's; the backend an application keeps busy, found and checked on the host."""
    alias, cluster = db_host
    result = run_tdescope("capture", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--target-pid", str(busy_backend), "--count", "3", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    pairs, _ = _captures(result.stdout)
    assert len(pairs) == 3  # tdescope's own idle backend decrypts nothing: these are the application's


def test_a_socket_folder_dsn_is_forwarded_too(sshd, db_host):
    """``host=/folder``: the server's unix socket on the host, forwarded to a socket here."""
    alias, cluster = db_host
    dsn = f"host={cluster.root} port={cluster.port} dbname=postgres user={cluster.superuser}"
    result = run_tdescope("capture", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", dsn, "--sql",
                          DECRYPT_SQL, "--count", "2", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(_captures(result.stdout)[0]) == 2


def test_the_backend_checks_happen_on_the_host(sshd, db_host):
    """The postmaster and a process that is no backend are refused from the host's process table."""
    alias, cluster = db_host
    common = (*_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(), "--count", "1")
    assert_one_line_error(run_tdescope("capture", *common, "--target-pid", str(cluster.postmaster_pid()),
                                       timeout=90), "is the postmaster")
    sshd_pid = int((sshd.folder / "sshd-netnsd.pid").read_text())
    assert_one_line_error(run_tdescope("capture", *common, "--target-pid", str(sshd_pid), timeout=90),
                          "is not a backend of this server")


def test_record_over_ssh_in_watch_mode_then_report_here(sshd, db_host, busy_backend, tmp_path):
    from tdescope.app.events import WaitSample
    from tdescope.app.session.reader import SessionReader

    alias, cluster = db_host
    out = tmp_path / "remote-dsn.tds"
    result = run_tdescope("record", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--target-pid", str(busy_backend), "--captures", "5", "--seconds", "4",
                          "--no-hotspots", "-o", str(out), timeout=120)
    assert result.returncode == 0, result.stderr
    assert "(5 captures)" in result.stderr.splitlines()[-1]
    with SessionReader(out, writable=False) as reader:
        meta = reader.meta
        summary = reader.summary()
        engine_waits = [ev for ev in reader.events(kinds=[WaitSample]) if ev.source == "postgres"]
    assert meta.params["host"] == "dbhost via ssh" and meta.params["target_pid"] == busy_backend
    assert meta.inventory and meta.versions.get("version", "").startswith("15.")  # read through the forward
    assert summary.counts["capture"] == 5
    assert engine_waits and {ev.pid for ev in engine_waits} == {busy_backend}
    html = tmp_path / "remote-dsn.html"
    report = run_tdescope("report", str(out), "-o", str(html))
    assert report.returncode == 0, report.stderr
    assert html.stat().st_size > 1000


def test_ab_over_ssh_times_a_small_ab_with_a_capture_round(sshd, db_host):
    alias, cluster = db_host
    result = run_tdescope("ab", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--workload", "ab_dml", "--rounds", "2", "--warmup", "0", "--set", "groups=2",
                          "--set", "ids_per_group=20", "--captures", "2", "--cleanup", "--json", timeout=180)
    assert result.returncode == 0, result.stderr
    card = json.loads(result.stdout)
    assert card["rounds"] == 2 and card["ratio_median"] > 0 and card["capture"] == "separate round"
    assert all(r["server_cpu_s"] is None for r in card["raw"])  # not read from this machine's /proc
    assert "2 pairs captured in the untimed capture round" in result.stderr


def test_waits_over_ssh_on_a_dsn(sshd, db_host, busy_backend):
    alias, cluster = db_host
    result = run_tdescope("waits", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--target-pid", str(busy_backend), "--seconds", "2", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    cpu = [r for r in rows if r.get("class") == "CPU" and r.get("event") != "idle" and "samples" in r]
    assert sum(r["samples"] for r in cpu) > 5, rows[:5]


def test_what_is_not_carried_is_one_line(sshd, db_host):
    alias, cluster = db_host
    assert_one_line_error(run_tdescope("capture", *_ssh(sshd, alias), "--engine", "sqlcipher", "--dsn", "x.db",
                                       "--count", "1", timeout=90), "the sqlcipher engine's --dsn is not carried")
    assert_one_line_error(run_tdescope("capture", *_ssh(sshd, alias), "--engine", "postgres", "--dsn",
                                       f"hostaddr=127.0.0.1 port={cluster.port}", "--count", "1", timeout=90),
                          "not hostaddr=")
    assert_one_line_error(run_tdescope("lessons", "run", "tde-dml-cost", *_ssh(sshd, alias), "--lab", "sqlcipher"),
                          "--ssh does not start a lab on the host")


def test_lessons_run_over_ssh(sshd, db_host):
    """A lesson that captures (page reads in the I/O path) runs with the agent's windows on the host; one that
    traces this machine's syscalls says in one line that it cannot run over ssh."""
    alias, cluster = db_host
    common = (*_ssh(sshd, alias), "--dsn", cluster.tcp_dsn(), "--fast", "--json")
    io_path = run_tdescope("lessons", "run", "io-path", *common, timeout=300)
    assert io_path.returncode == 0, io_path.stderr
    card = json.loads(io_path.stdout)
    # captures came through the agent; which scan each falls in is not asserted: once, in a full run on the
    # loaded machine, 258 captures fell outside both scans' spans (cause not established; not seen alone)
    assert card["captures_in_window"] > 0 and card["verdict"] not in ("failed", "cannot run"), card
    assert any("by the agent on dbhost via ssh" in line for line in card["evidence"]), card["evidence"]
    memory = run_tdescope("lessons", "run", "pga-memory-operation", *common, timeout=300)
    assert "traces the server's syscalls with eBPF on this machine; the server is on dbhost via ssh" in \
        json.loads(memory.stdout)["verdict_text"], memory.stdout


def test_mariadb_dsn_over_ssh_finds_its_server_on_the_host(sshd):
    """MariaDB: the lab's server socket (skip-networking) forwarded over ssh; the ``mariadbd`` is found in
    the host's process table by its pid file's folder (other MariaDB servers run on this machine too).
    Unlike the PostgreSQL tests, root here could open that socket directly: this one proves the forward
    and the host-side lookup, not unreachability."""
    from tdescope.app.engines.api import ConnectParams
    from tdescope.plugins.mariadb import ENGINE as MARIADB

    lab = MARIADB.connect(ConnectParams(lab=True))
    try:
        lab.lab.dir.chmod(0o711)  # the ssh account reaches the socket in it
        result = run_tdescope("capture", *_ssh(sshd, "ops"), "--engine", "mariadb", "--dsn",
                              f"socket={lab.lab.socket} user=root", "--workload", "io_path", "--count", "3",
                              "--json", timeout=240)
        assert result.returncode == 0, result.stderr
        pairs, summary = _captures(result.stdout)
        assert len(pairs) == 3 and summary["backend"] == "ebpf"
        assert all(p["page_type"] for p in pairs)
        wrong = run_tdescope("capture", *_ssh(sshd, "ops"), "--engine", "mariadb", "--dsn",
                             f"socket={lab.lab.socket} user=root", "--target-pid", str(sshd.proc.pid),
                             "--count", "1", timeout=120)
        assert_one_line_error(wrong, f"pid {sshd.proc.pid} is no MariaDB server on ops via ssh")
    finally:
        lab.close()


@pytest.mark.parametrize("dsn, options, expected", [
    ("dbname=shop user=support", {}, ("/var/run/postgresql/.s.PGSQL.5432", 5432)),  # libpq's default folder there
    ("host=/run/pg port=5433 dbname=shop", {}, ("/run/pg/.s.PGSQL.5433", 5433)),
    ("postgresql://support@localhost:6543/shop", {}, (("localhost", 6543), 6543)),
    ("host=db1 dbname=shop", {"port": 7000}, (("db1", 7000), 7000)),  # fields win over the DSN, as in connect
])
def test_where_the_server_listens_as_the_host_sees_it(dsn, options, expected):
    from tdescope.plugins.postgres.tunnel import server_endpoint

    assert server_endpoint(dsn, options) == expected


@pytest.mark.parametrize("dsn, fragment", [
    ("host=a,b dbname=x", "names one server"),
    ("hostaddr=10.0.0.1 dbname=x", "not hostaddr="),
    ("host=@abstract dbname=x", "abstract socket"),
    ("host=db1 port=five", "not a number"),
    ("host='unclosed", "bad connection string"),
])
def test_a_dsn_that_cannot_be_carried_is_one_line(dsn, fragment):
    from tdescope.app.errors import UserError
    from tdescope.plugins.postgres.tunnel import server_endpoint

    with pytest.raises(UserError, match=fragment):
        server_endpoint(dsn, {})


def test_top_over_ssh_on_a_dsn(sshd, db_host, busy_backend):
    alias, cluster = db_host
    result = run_tdescope("top", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--target-pid", str(busy_backend), "--seconds", "3", "--json", timeout=120)
    assert result.returncode == 0, result.stderr
    symbols = [json.loads(line).get("symbol", "") for line in result.stdout.splitlines() if line.startswith("{")]
    assert symbols, result.stdout  # perf ran on the host, on the backend the DSN's server runs


def test_a_dropped_connection_mid_capture_on_a_dsn_is_one_line(sshd, db_host):
    """The ssh master killed while the window is armed and tdescope's SQL runs through the forward: whichever
    notices first (the window or the SQL), the line is the connection's; the agent goes, the server runs on."""
    import os
    import signal
    import sys

    from test_ssh_capture import _agents, _is_master

    alias, cluster = db_host
    proc = subprocess.Popen([sys.executable, "-m", "tdescope", "capture", *_ssh(sshd, alias), "--engine",
                             "postgres", "--dsn", cluster.tcp_dsn(), "--sql", DECRYPT_SQL, "--count", "100000",
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            stdin=subprocess.DEVNULL)
    try:
        assert proc.stdout.readline(), "no capture came"
        agent = wait_for(lambda: _agents(sshd), 10, what="the agent on the host")[0]
        masters = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _is_master(p, proc.pid)]
        assert len(masters) == 1
        os.kill(masters[0], signal.SIGKILL)
        wait_for(lambda: not Path(f"/proc/{agent}").exists(), 5, what="the agent exiting after the drop")
        _, err = proc.communicate(timeout=60)
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("capturing on")]
        assert proc.returncode == 2 and "Traceback" not in err, err
        assert lines == ["tdescope: connection to dbhost lost (the ssh connection ended)"], err
        assert cluster.psql("SELECT 1").strip() == "1"  # the server runs on
    finally:
        proc.kill()


def test_waits_over_ssh_follow_a_pgbench_client_checked_on_the_host(sshd, db_host):
    """pgbench (run here, through the forward) does the work on its own connections: one of its client
    backends is chosen and checked in the host's process table, then watched there."""
    alias, cluster = db_host
    result = run_tdescope("waits", *_ssh(sshd, alias), "--engine", "postgres", "--dsn", cluster.tcp_dsn(),
                          "--workload", "pgbench", "--seconds", "3", "--json", timeout=180)
    cluster.psql("DROP DATABASE IF EXISTS tdescope_pgbench")
    assert result.returncode == 0, result.stderr
    assert "watching pgbench's client backend pid" in result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    assert sum(r.get("samples", 0) for r in rows) > 20, rows[:3]


def _captures_in(path: Path) -> int:
    """Captures a recording being written holds so far (0 before its file exists)."""
    from tdescope.app.session.reader import SessionReader

    if not path.exists():
        return 0
    try:
        with SessionReader(path, writable=False) as reader:
            return reader.summary().counts.get("capture", 0)
    except Exception:  # noqa: BLE001 - caught between its first writes
        return 0


def test_record_over_ssh_notices_its_backend_ending(sshd, db_host, tmp_path):
    """Watch mode over ssh: the watched backend terminated mid-recording is the promised line (exit 2), seen
    in the host's process table, as a local recording sees it in /proc."""
    import sys

    alias, cluster = db_host
    conn = psycopg.connect(cluster.dsn(), autocommit=True)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn.execute(DECRYPT_SQL).fetchone()
            except psycopg.Error:
                return  # terminated: what the test does below

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    proc = subprocess.Popen([sys.executable, "-m", "tdescope", "record", *_ssh(sshd, alias), "--engine", "postgres",
                             "--dsn", cluster.tcp_dsn(), "--target-pid", str(pid), "--captures", "3", "--seconds",
                             "60", "--no-hotspots", "-o", str(tmp_path / "ends.tds")], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    try:
        wait_for(lambda: _captures_in(tmp_path / "ends.tds") >= 3, 90, interval=0.2,
                 what="the recording's captures")  # the window armed, the samplers run
        cluster.psql(f"SELECT pg_terminate_backend({pid})")
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 2, err
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("tdescope: engine waits:")]
        assert len(lines) == 1 and f"pid {pid} exited while armed" in lines[0], err
    finally:
        proc.kill()
        stop.set()
        thread.join(30)
        conn.close()
