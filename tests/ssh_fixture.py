"""A private OpenSSH server on loopback for the ``--ssh`` tests: real sshd, real accounts, real sudo.

:func:`start_sshd` (used by the session fixture ``sshd`` in conftest) needs root. It starts
``sshd -D -f CONFIG -E LOG`` on 127.0.0.1 and a free port with its own host key and PidFile, and
creates these accounts (``useradd -m``, ``usermod -p '*'``: with ``UsePAM no`` sshd refuses a locked
password field even for key logins), each with the generated client key in ``authorized_keys``:

- ``ops`` may run the system ``python3`` as root without a password (a sudoers drop-in);
- ``nosudo`` has no sudo rights at all ("sudo needs a password");
- ``nopython`` logs in with a PATH that holds the usual tools but no ``python3`` (sshd's ``SetEnv``);
- ``oldpython`` logs in with a PATH whose ``python3`` answers the version probe as Python 3.8 does. A
  stand-in (a two-line script): no Python older than 3.11 exists on this machine.

Client options go in a generated ``ssh_config`` passed with ``-F`` (OpenSSH reads ``~/.ssh/config``
from the account's passwd home, not from ``$HOME``), with one alias per account plus ``refused``
(a key the server does not know) and ``unreachable`` (a closed port). :meth:`SshServer.stop` kills
sshd and removes the accounts, their homes and the sudoers file; the fixture calls it on every exit.
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
#: Tools an account without python3 still has on its PATH (a host with a shell and coreutils only).
_BASIC_TOOLS = ("sh", "cat", "mkdir", "mv", "rm", "sha256sum", "id", "test", "true", "env", "sudo", "ls",
                "chmod", "uname", "sleep")


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class SshServer:
    """A running test sshd: where it listens, its accounts, and the ``-F`` config with the aliases."""

    folder: Path
    port: int
    suffix: str
    config: Path = field(init=False)
    accounts: dict[str, str] = field(default_factory=dict)  # role -> account name
    sudoers: Path | None = None
    proc: subprocess.Popen | None = None

    def __post_init__(self) -> None:
        self.config = self.folder / "ssh_config"

    @property
    def options(self) -> tuple[str, ...]:
        """The ssh words that make the aliases work: ``("-F", CONFIG)``."""
        return ("-F", str(self.config))

    def log(self) -> str:
        """What sshd logged so far (for a failing test's message)."""
        path = self.folder / "sshd.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        """Kill sshd, remove the accounts with their homes and the sudoers drop-in. Safe twice."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        for name in self.accounts.values():
            _account_tool(["userdel", "-r", "-f", name], check=False)
        self.accounts.clear()
        if self.sudoers is not None:
            self.sudoers.unlink(missing_ok=True)
            self.sudoers = None
        shutil.rmtree(self.folder, ignore_errors=True)


def _account_tool(cmd: list[str], check: bool = True) -> None:
    """useradd/usermod/userdel, again while another test worker holds /etc/passwd's lock (they refuse
    at once with "cannot lock"; two workers start their sshd at the same time)."""
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode == 0 or "lock" not in done.stderr or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")


def _useradd(server: SshServer, role: str, pubkey: str) -> str:
    name = f"tds{role[:6]}{server.suffix}"
    _account_tool(["useradd", "-m", "-s", "/bin/sh", name])
    server.accounts[role] = name
    _account_tool(["usermod", "-p", "*", name])
    home = Path(f"/home/{name}")
    ssh_dir = home / ".ssh"
    ssh_dir.mkdir(mode=0o700)
    (ssh_dir / "authorized_keys").write_text(pubkey)
    (ssh_dir / "authorized_keys").chmod(0o600)
    shutil.chown(ssh_dir, name, name)
    shutil.chown(ssh_dir / "authorized_keys", name, name)
    return name


def _no_python_path(server: SshServer, name: str = "nopython-bin") -> Path:
    """A bin folder with links to the basic tools only: the PATH of a host without python3."""
    bin_dir = server.folder / name
    bin_dir.mkdir()
    for tool in _BASIC_TOOLS:
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return bin_dir


def start_sshd() -> SshServer:
    """Start the test sshd and its accounts (root only); the caller must :meth:`SshServer.stop` it."""
    folder = Path(tempfile.mkdtemp(prefix="tdescope-sshd-"))
    folder.chmod(0o755)  # the nopython account must reach its bin folder
    server = SshServer(folder=folder, port=free_port(), suffix=secrets.token_hex(3))
    try:
        _setup(server)
    except BaseException:
        server.stop()
        raise
    return server


def _setup(server: SshServer) -> None:
    f = server.folder
    for key in ("host_key", "client_key", "stranger_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f", str(f / key)],
                       check=True, capture_output=True)
    pubkey = (f / "client_key.pub").read_text()
    ops = _useradd(server, "ops", pubkey)
    nosudo = _useradd(server, "nosudo", pubkey)
    nopython = _useradd(server, "nopy", pubkey)
    oldpython = _useradd(server, "oldpy", pubkey)
    python3 = os.path.realpath(shutil.which("python3", path="/usr/bin:/bin") or "/usr/bin/python3")
    sudoers = Path(f"/etc/sudoers.d/tdescope-test-{server.suffix}")
    text = f"{ops} ALL=(root) NOPASSWD: /usr/bin/python3, {python3}\n"
    sudoers.write_text(text)
    sudoers.chmod(0o440)
    server.sudoers = sudoers
    check = subprocess.run(["visudo", "-c", "-f", str(sudoers)], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    no_python = _no_python_path(server)
    old_python = _no_python_path(server, "oldpython-bin")
    (old_python / "python3").write_text("#!/bin/sh\necho '(3, 8)'\n")
    (old_python / "python3").chmod(0o755)
    (f / "sshd_config").write_text(
        f"Port {server.port}\nListenAddress 127.0.0.1\nHostKey {f / 'host_key'}\nPidFile {f / 'sshd.pid'}\n"
        "UsePAM no\nPasswordAuthentication no\nKbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
        "PermitRootLogin no\nAuthorizedKeysFile .ssh/authorized_keys\nStrictModes yes\nLogLevel VERBOSE\n"
        "AllowTcpForwarding yes\nAllowStreamLocalForwarding yes\nMaxSessions 20\nMaxStartups 50\n"
        f"AllowUsers {ops} {nosudo} {nopython} {oldpython}\n"
        f"Match User {nopython}\n  SetEnv PATH={no_python}\n"
        f"Match User {oldpython}\n  SetEnv PATH={old_python}\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    host_pub = (f / "host_key.pub").read_text().split()
    (f / "known_hosts").write_text(f"[127.0.0.1]:{server.port} {host_pub[0]} {host_pub[1]}\n")
    closed = free_port()
    common = (f"  HostName 127.0.0.1\n  UserKnownHostsFile {f / 'known_hosts'}\n  StrictHostKeyChecking yes\n"
              "  IdentitiesOnly yes\n  ConnectTimeout 5\n")
    aliases = {"ops": (ops, "client_key"), "nosudo": (nosudo, "client_key"), "nopython": (nopython, "client_key"),
               "oldpython": (oldpython, "client_key"),
               "refused": (ops, "stranger_key")}
    blocks = [f"Host {alias}\n  Port {server.port}\n  User {user}\n  IdentityFile {f / key}\n{common}"
              for alias, (user, key) in aliases.items()]
    blocks.append(f"Host unreachable\n  Port {closed}\n  User {ops}\n  IdentityFile {f / 'client_key'}\n{common}")
    server.config.write_text("\n".join(blocks))
    server.proc = subprocess.Popen([SSHD, "-D", "-f", str(f / "sshd_config"), "-E", str(f / "sshd.log")],
                                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                   start_new_session=True)
    deadline = time.monotonic() + 10
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"sshd exited: {server.proc.stderr.read().decode(errors='replace')} {server.log()}")
        try:
            with socket.create_connection(("127.0.0.1", server.port), timeout=0.5) as s:
                if s.recv(64).startswith(b"SSH-"):
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError(f"sshd did not listen on port {server.port}: {server.log()}")
        time.sleep(0.02)


def kill_quietly(pid: int) -> None:
    """SIGKILL ``pid`` if it still runs."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


@dataclass
class NetnsSshd:
    """A second sshd for the same accounts, inside a network namespace reached over a veth pair: the
    network between the workbench and it can be cut (:meth:`cut`) as a firewall or a dead link would.

    sshd there checks its clients every second (``ClientAliveInterval 1``, ``ClientAliveCountMax 2``):
    the test must not wait the default hours for the host side to notice."""

    server: SshServer
    name: str
    host_if: str
    address: str
    proc: subprocess.Popen | None = None

    def cut(self) -> None:
        """Take the link down: packets stop, no side sees a FIN or a RST."""
        subprocess.run(["ip", "link", "set", self.host_if, "down"], check=True)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        subprocess.run(["ip", "link", "del", self.host_if], capture_output=True)
        subprocess.run(["ip", "netns", "del", self.name], capture_output=True)


def start_netns_sshd(server: SshServer, alias: str = "cut", tag: str = "") -> NetnsSshd:
    """Start :class:`NetnsSshd` beside ``server``; adds the alias ``alias`` (the ops account) to its config.
    ``tag`` (one letter) names a second namespace that may exist beside the first (its own link and net)."""
    s = server.suffix + tag
    octet = int(s[:2], 16) % 250 + 1
    net = NetnsSshd(server, name=f"tds{s}", host_if=f"tdsh{s}", address=f"10.{231 + len(tag)}.{octet}.2")
    peer = f"tdsn{s}"
    try:
        for cmd in (["ip", "netns", "add", net.name],
                    ["ip", "link", "add", net.host_if, "type", "veth", "peer", "name", peer],
                    ["ip", "link", "set", peer, "netns", net.name],
                    ["ip", "addr", "add", f"10.{231 + len(tag)}.{octet}.1/30", "dev", net.host_if],
                    ["ip", "link", "set", net.host_if, "up"],
                    ["ip", "-n", net.name, "addr", "add", f"{net.address}/30", "dev", peer],
                    ["ip", "-n", net.name, "link", "set", peer, "up"],
                    ["ip", "-n", net.name, "link", "set", "lo", "up"]):
            subprocess.run(cmd, check=True, capture_output=True)
        f = server.folder
        config = (f / "sshd_config").read_text()
        config = config.replace("ListenAddress 127.0.0.1", f"ListenAddress {net.address}")
        config = config.replace(f"PidFile {f / 'sshd.pid'}", f"PidFile {f / f'sshd-netns{tag}.pid'}")
        config = config.replace("LogLevel VERBOSE\n", "LogLevel VERBOSE\nClientAliveInterval 1\nClientAliveCountMax 2\n")
        (f / f"sshd_netns{tag}_config").write_text(config)
        host_pub = (f / "host_key.pub").read_text().split()
        with open(f / "known_hosts", "a") as fh:
            fh.write(f"[{net.address}]:{server.port} {host_pub[0]} {host_pub[1]}\n")
        text = server.config.read_text().split(f"\nHost {alias}\n")[0]  # an earlier test's netns is gone
        with open(server.config, "w") as fh:
            fh.write(text + f"\nHost {alias}\n  HostName {net.address}\n  Port {server.port}\n  User {server.accounts['ops']}\n"
                     f"  IdentityFile {f / 'client_key'}\n  UserKnownHostsFile {f / 'known_hosts'}\n"
                     "  StrictHostKeyChecking yes\n  IdentitiesOnly yes\n  ConnectTimeout 5\n")
        net.proc = subprocess.Popen(["ip", "netns", "exec", net.name, SSHD, "-D", "-f",
                                     str(f / f"sshd_netns{tag}_config"), "-E", str(f / f"sshd-netns{tag}.log")], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection((net.address, server.port), timeout=0.5) as sock:
                    if sock.recv(64).startswith(b"SSH-"):
                        return net
            except OSError:
                pass
            if net.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the netns sshd did not start: " + (f / f"sshd-netns{tag}.log").read_text())
            time.sleep(0.02)
    except BaseException:
        net.stop()
        raise
