"""``SshHost`` against a real sshd (tests/ssh_fixture.py): one master connection, commands, a cached copy,
forwards, and every failure as one line (issue 28, part B).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from conftest import wait_for
from ssh_fixture import kill_quietly
from tdescope.app.errors import UserError
from tdescope.app.remote.ssh import SshHost, ssh_error_line
from tdescope.app.system.child_env import SSH, child_env

ROOT = Path(__file__).resolve().parents[1]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"


def test_one_master_runs_commands_and_closes(sshd):
    host = SshHost("ops", sshd.options).open()
    try:
        folder = Path(host.control_path).parent
        assert folder.stat().st_mode & 0o777 == 0o700
        master = host.master_pid
        assert host.run(["id", "-un"]).strip() == sshd.accounts["ops"]
        # a word with spaces and quotes reaches the host as one argument
        assert host.run(["printf", "%s|", "a b", "it's"]) == "a b|it's|"
        py = host.python()
        assert py.uid != 0 and py.version >= (3, 9)
        # the commands ran over the master: still the same one process
        assert host.master_pid == master
    finally:
        host.close()
    assert not folder.exists()
    wait_for(lambda: not _alive(master), 5, what="the master ssh ending")
    host.close()  # twice is fine


def test_the_agent_file_is_copied_once_by_content_hash(sshd, tmp_path):
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(os.urandom(50_000))
    with SshHost("ops", sshd.options) as host:
        path, copied = host.put_cached(pyz)
        assert copied and path.startswith(f"/home/{sshd.accounts['ops']}/.cache/tdescope/agent-")
        assert Path(path).read_bytes() == pyz.read_bytes()  # the "host" is this machine
        assert Path(path).stat().st_mode & 0o777 == 0o600
        assert host.put_cached(pyz) == (path, False)
        pyz.write_bytes(os.urandom(1000))
        path2, copied2 = host.put_cached(pyz)
        assert copied2 and path2 != path and Path(path2).read_bytes() == pyz.read_bytes()
        Path(path2).write_bytes(b"damaged")  # a damaged cache entry is copied again
        assert host.put_cached(pyz) == (path2, True)


def _one_line(err: UserError) -> str:
    text = str(err)
    assert "\n" not in text and "Traceback" not in text
    return text


def test_unreachable_host_is_one_line(sshd):
    with pytest.raises(UserError) as err:
        SshHost("unreachable", sshd.options).open()
    assert _one_line(err.value).startswith("cannot reach unreachable: connect to host 127.0.0.1 port")
    assert "Connection refused" in str(err.value)


def test_refused_key_is_one_line(sshd):
    with pytest.raises(UserError) as err:
        SshHost("refused", sshd.options).open()
    assert _one_line(err.value).startswith("refused refused the login (")
    assert "Permission denied (publickey)" in str(err.value)


def test_sudo_that_needs_a_password_is_one_line(sshd, tmp_path):
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(b"x")
    with SshHost("nosudo", sshd.options) as host, pytest.raises(UserError) as err:
        host.prepare_agent(pyz)
    assert _one_line(err.value).startswith("sudo on nosudo needs a password")


def test_no_python3_on_the_host_is_one_line(sshd, tmp_path):
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(b"x")
    with SshHost("nopython", sshd.options) as host, pytest.raises(UserError) as err:
        host.prepare_agent(pyz)
    assert _one_line(err.value) == "nopython has no python3; the agent needs Python 3.9 or newer"


def test_a_bad_destination_is_one_line():
    for dest in ("-oProxyCommand=touch /tmp/x", "", "a b"):
        with pytest.raises(UserError, match="not a host"):
            SshHost(dest)


def test_ssh_error_lines():
    """What ssh itself prints, as met on real hosts, becomes one line naming the host."""
    assert ssh_error_line("db1", "ssh: Could not resolve hostname db1: Name or service not known\r\n", 255) == \
        "cannot reach db1: Could not resolve hostname db1: Name or service not known"
    assert ssh_error_line("db1", "Host key verification failed.\n", 255).startswith("cannot verify db1's host key")
    assert ssh_error_line("db1", "sudo: a password is required\n", 1).startswith("sudo on db1 needs a password")
    assert ssh_error_line("db1", "", 3) == "ssh db1 failed: exit status 3"


def test_forward_a_tcp_port_and_a_unix_socket(sshd, tmp_path):
    """The engine connection goes through the same master: a TCP port, and a unix socket."""
    def echo_server(sock: socket.socket) -> None:
        conn, _ = sock.accept()
        with conn:
            conn.sendall(conn.recv(100).upper())

    tcp = socket.create_server(("127.0.0.1", 0))
    unix_path = str(sshd.folder / f"db-{os.getpid()}.sock")  # where the ops account can reach it
    unix = socket.socket(socket.AF_UNIX)
    unix.bind(unix_path)
    os.chmod(unix_path, 0o777)
    unix.listen()
    for s in (tcp, unix):
        threading.Thread(target=echo_server, args=(s,), daemon=True).start()
    with SshHost("ops", sshd.options) as host:
        local = host.forward(("127.0.0.1", tcp.getsockname()[1]))
        with socket.create_connection(local, timeout=5) as c:
            c.sendall(b"hello")
            assert c.recv(100) == b"HELLO"
        local_unix = host.forward(unix_path)
        assert Path(local_unix).parent == Path(host.control_path).parent
        with socket.socket(socket.AF_UNIX) as c:
            c.settimeout(5)
            c.connect(local_unix)
            c.sendall(b"world")
            assert c.recv(100) == b"WORLD"
    tcp.close()
    unix.close()
    os.unlink(unix_path)


_HOLDER = textwrap.dedent("""
    import sys, time
    sys.path.insert(0, {root!r})
    from tdescope.app.remote.ssh import SshHost
    host = SshHost("ops", {options!r}).open()
    proc = host.start_agent("-c", ["import sys; sys.stdin.buffer.read()  # {marker}"])
    print(host.master_pid, Path := host.control_path, flush=True)
    proc.wait()
""")


def _remote_pids(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            if marker.encode() in cmd and cmd.startswith(b"python3\x00-I\x00-c"):
                found.append(int(entry.name))
    return found


def test_kill_9_of_the_workbench_ends_the_remote_side_and_the_master(sshd):
    """The workbench is killed: the remote process reading its stdin sees EOF and exits, the master ssh is
    reaped and the 0700 folder removed. (The agent's own exit on EOF is tested with the agent.)"""
    marker = f"tdescope-ssh-test-{os.getpid()}"
    code = _HOLDER.format(root=str(ROOT), options=tuple(sshd.options), marker=marker)
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        master, control = holder.stdout.readline().split()
        remote = wait_for(lambda: _remote_pids(marker), 10, what="the remote python3 starting")
        assert all(Path(f"/proc/{pid}/status").read_text().count("Uid:\t0\t") for pid in remote), "not under sudo"
        holder.kill()
        holder.wait()
        wait_for(lambda: not _remote_pids(marker), 2, what="the remote process exiting after kill -9")
        wait_for(lambda: not _alive(int(master)), 5, what="the master ssh reaped")
        wait_for(lambda: not Path(control).parent.exists(), 5, what="the control folder removed")
    finally:
        kill_quietly(holder.pid)
        for pid in _remote_pids(marker):
            kill_quietly(pid)


def test_ssh_auth_sock_reaches_ssh_and_nothing_else_does(sshd, tmp_path, monkeypatch):
    """SSH_AUTH_SOCK is on the allowlist on purpose: a key only an ssh-agent holds must log in."""
    env = child_env(SSH, base={"SSH_AUTH_SOCK": "/run/a.sock", "PGPASSWORD": "x", "PATH": "/usr/bin"})
    assert env == {"SSH_AUTH_SOCK": "/run/a.sock", "PATH": "/usr/bin"}
    assert "SSH_AUTH_SOCK" not in child_env(base={"SSH_AUTH_SOCK": "/run/a.sock"})
    sock = str(tmp_path / "agent.sock")
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", sock], stdout=subprocess.DEVNULL)
    try:
        wait_for(lambda: os.path.exists(sock), 5, what="ssh-agent listening")
        subprocess.run(["ssh-add", "-q", str(sshd.folder / "client_key")], check=True, capture_output=True,
                       env={"SSH_AUTH_SOCK": sock, "PATH": os.environ["PATH"]})
        config = tmp_path / "ssh_config"
        config.write_text(f"Host viaagent\n  HostName 127.0.0.1\n  Port {sshd.port}\n  User {sshd.accounts['ops']}\n"
                          f"  UserKnownHostsFile {sshd.folder / 'known_hosts'}\n  IdentityFile none\n")
        monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
        with pytest.raises(UserError, match="refused the login"):
            SshHost("viaagent", ("-F", str(config))).open()
        monkeypatch.setenv("SSH_AUTH_SOCK", sock)
        with SshHost("viaagent", ("-F", str(config))) as host:
            assert host.run(["id", "-un"]).strip() == sshd.accounts["ops"]
    finally:
        agent.terminate()
        agent.wait()


def test_a_dropped_connection_ends_the_remote_side_and_says_so(sshd):
    """The ssh client (the master: the one TCP connection) is killed: the remote process sees EOF and exits,
    the local end of its pipe sees EOF, and the host says it is gone."""
    marker = f"tdescope-ssh-drop-{os.getpid()}"
    with SshHost("ops", sshd.options) as host:
        proc = host.start_agent("-c", ["import sys; sys.stdin.buffer.read()  # " + marker])
        try:
            wait_for(lambda: _remote_pids(marker), 10, what="the remote python3 starting")
            os.kill(host.master_pid, 9)
            wait_for(lambda: not _remote_pids(marker), 2, what="the remote process exiting after the drop")
            assert proc.stdout.read() == b""  # EOF, not a hang
            assert proc.wait(5) == 255
            wait_for(lambda: not host.alive(), 2, what="the host noticing")
        finally:
            kill_quietly(proc.pid)
            for pid in _remote_pids(marker):
                kill_quietly(pid)


def test_a_python3_older_than_3_9_is_one_line(sshd, tmp_path):
    pyz = tmp_path / "agent.pyz"
    pyz.write_bytes(b"x")
    with SshHost("oldpython", sshd.options) as host, pytest.raises(UserError) as err:
        host.prepare_agent(pyz)
    assert _one_line(err.value) == "oldpython has Python 3.8; the agent needs 3.9 or newer"


def test_a_cut_network_ends_the_remote_side_and_the_local_one(sshd, sshd_cut):
    """The link goes down (no FIN, no RST): ssh's keepalives notice on both ends, the remote process sees
    EOF and exits, the local pipe sees EOF. Keepalives are 1 s here (ServerAliveInterval from the user's
    options wins over tdescope's 5 s; the host's sshd ClientAliveInterval 1)."""
    marker = f"tdescope-ssh-cut-{os.getpid()}"
    options = (*sshd.options, "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2")
    with SshHost("cut", options) as host:
        proc = host.start_agent("-c", ["import sys; sys.stdin.buffer.read()  # " + marker])
        try:
            wait_for(lambda: _remote_pids(marker), 10, what="the remote python3 starting")
            sshd_cut.cut()
            wait_for(lambda: not _remote_pids(marker), 8, what="the remote process exiting after the cut")
            assert proc.stdout.read() == b""
            assert proc.wait(8) == 255
            wait_for(lambda: not host.alive(), 8, what="the master ssh giving up")
        finally:
            kill_quietly(proc.pid)
            for pid in _remote_pids(marker):
                kill_quietly(pid)


def test_the_version_check_asks_what_the_agent_needs():
    """The check before copying and the zipapp's own entry name the same oldest python3."""
    from tdescope.app.remote import agent_build
    from tdescope.app.remote.ssh import MIN_PYTHON

    assert f"sys.version_info < {MIN_PYTHON}" in agent_build.MAIN
