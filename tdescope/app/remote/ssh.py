"""One ssh connection to a database host: the user's own OpenSSH, as one ControlMaster.

:class:`SshHost` opens ``ssh -M -N`` once (its ControlPath in a 0700 folder of ours) and runs every
later command through it: :meth:`SshHost.run`, :meth:`SshHost.put_cached` (a file copied once,
cached on the host by content hash; :meth:`SshHost.prepare_agent` first takes the agent the
``tdescope-agent`` package installed there, when it is this release's), :meth:`SshHost.start_agent` (``sudo -n`` when the remote user
is not root) and :meth:`SshHost.forward` (a TCP port or unix socket for the engine connection). The
user's ``~/.ssh/config``, jump hosts, agents and keys keep working because it is their ``ssh``.

``BatchMode=yes`` unless the user allows prompts: ssh never waits on a terminal the user cannot see.
Every failure is one :class:`~tdescope.app.errors.UserError` line naming the host. The master ssh
runs in a session of its own (Ctrl+C reaches the workbench only) and a reaper ends it, and removes
the folder, if the workbench dies without :meth:`SshHost.close`.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tdescope import __version__
from tdescope.app.errors import UserError
from tdescope.app.remote.protocol import PROTOCOL_VERSION
from tdescope.app.remote.ssh_cipher import cipher_words
from tdescope.app.system.child_env import SSH, child_env
from tdescope.app.system.reaper import Reaper, reap_with_me

__all__ = ["INSTALLED_AGENT", "MIN_PYTHON", "RemotePython", "SshHost", "ssh_error_line"]

#: The oldest python3 the agent runs on: the zipapp's own entry refuses older ones (agent_build.MAIN), so
#: the check before copying says the same. tests/test_agent_python39.py checks what the zipapp carries.
MIN_PYTHON = (3, 9)

#: How long the first connection may take (the user's ConnectTimeout can be shorter).
CONNECT_TIMEOUT_S = 30.0

_VERSION_PROBE = "import sys; print(sys.version_info[:2])"

#: Where the ``tdescope-agent`` .deb puts the agent (packaging/build-agent-deb.sh; ``/usr/bin/tdescope-agent``
#: runs it with ``python3 -I``).
INSTALLED_AGENT = "/usr/lib/tdescope-agent/tdescope-agent.pyz"
#: What an installed agent is, read from its own files without starting it (any release has both names).
_INSTALLED_PROBE = ("import sys; sys.path.insert(0, sys.argv[1]); from tdescope import __version__; "
                    "from tdescope.app.remote.protocol import PROTOCOL_VERSION; print(PROTOCOL_VERSION, __version__)")


@dataclass(frozen=True)
class RemotePython:
    """What the host said about itself: who we are there and its ``python3``."""

    uid: int
    version: tuple[int, int]


def ssh_error_line(dest: str, stderr: str, returncode: int) -> str:
    """The one line for a failed ssh command, from what ssh (or the remote shell) wrote on stderr."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("Warning: Permanently")]
    text = "\n".join(lines)
    if "Permission denied" in text:
        return f"{dest} refused the login ({_last(lines, 'Permission denied')}); check the key, or try `ssh {dest}`"
    if "Host key verification failed" in text or "REMOTE HOST IDENTIFICATION HAS CHANGED" in text:
        return f"cannot verify {dest}'s host key; connect once with `ssh {dest}` to check and accept it"
    for marker in ("Could not resolve hostname", "Connection refused", "Connection timed out",
                   "No route to host", "Network is unreachable", "Connection closed", "Connection reset",
                   "Operation timed out"):
        if marker in text:
            return f"cannot reach {dest}: {_last(lines, marker)}"
    if "a password is required" in text or "a terminal is required" in text:
        return (f"sudo on {dest} needs a password; allow the agent's python3 without one "
                f"(NOPASSWD in sudoers) or connect as root")
    tail = lines[-1] if lines else f"exit status {returncode}"
    return f"ssh {dest} failed: {tail}"


def _last(lines: list[str], marker: str) -> str:
    line = next(ln for ln in reversed(lines) if marker in ln)
    line = re.sub(r"^ssh: ", "", line)
    return line.rstrip(".")


class SshHost:
    """One ControlMaster connection to ``dest`` (``[user@]host`` or an ssh config alias).

    Parameters
    ----------
    dest
        Where to connect, as ``ssh`` takes it; may not start with ``-``.
    ssh_options
        Extra ``ssh`` words placed before ``dest`` (``-F FILE``, ``-o Key=Value``, ``-J jump``).
    allow_prompts
        Let ssh ask for passwords or passphrases on the terminal (no ``BatchMode=yes``).
    """

    def __init__(self, dest: str, ssh_options: Sequence[str] = (), allow_prompts: bool = False) -> None:
        if not dest or dest.startswith("-") or any(c.isspace() for c in dest):
            raise UserError(f"--ssh: not a host: {dest!r} (give [user@]host or an ssh config alias)")
        if shutil.which("ssh") is None:
            raise UserError("--ssh needs OpenSSH's ssh client; install openssh-client")
        self.dest = dest
        self.options = tuple(ssh_options)
        self.allow_prompts = allow_prompts
        self._dir: str | None = None
        self._master: subprocess.Popen | None = None
        self._reaper: Reaper | None = None
        self._uid: int | None = None

    # -- the connection ------------------------------------------------------------------------
    @property
    def control_path(self) -> str:
        """The master's socket (in a 0700 folder of ours)."""
        if self._dir is None:
            raise UserError(f"not connected to {self.dest}")
        return os.path.join(self._dir, "cm")

    def _base(self) -> list[str]:
        words = ["ssh", *self.options]
        if not self.allow_prompts:
            words += ["-o", "BatchMode=yes"]
        return words

    def _client(self) -> list[str]:
        return [*self._base(), "-S", self.control_path, "-o", "ControlMaster=no"]

    def open(self) -> SshHost:
        """Connect (one master ssh); a failure is one line. Returns ``self``."""
        if self._master is not None:
            return self
        base = os.environ.get("XDG_RUNTIME_DIR")
        base = base if base and os.access(base, os.W_OK) else None
        self._dir = tempfile.mkdtemp(prefix="tdescope-ssh-", dir=base)  # 0700
        log = os.path.join(self._dir, "master.log")
        argv = [*self._base(), *cipher_words(self._base(), self.dest), "-M", "-N", "-S", self.control_path,
                "-o", "ControlPersist=no",
                "-o", "ServerAliveInterval=5", "-o", "ServerAliveCountMax=3", "-o", "ExitOnForwardFailure=yes",
                "-E", log, self.dest]
        self._master = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, env=child_env(SSH),
                                        start_new_session=not self.allow_prompts)
        self._reaper = reap_with_me(self._master.pid, signal.SIGTERM, 2.0, folder=self._dir)
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            code = self._master.poll()
            if code is not None:
                err = Path(log).read_text(errors="replace") if os.path.exists(log) else ""
                self.close()
                raise UserError(ssh_error_line(self.dest, err, code))
            check = subprocess.run([*self._client(), "-O", "check", self.dest], capture_output=True,
                                   env=child_env(SSH), timeout=CONNECT_TIMEOUT_S)
            if check.returncode == 0:
                return self
            if time.monotonic() > deadline:
                self.close()
                raise UserError(f"cannot reach {self.dest}: no connection after {CONNECT_TIMEOUT_S:.0f} s")
            time.sleep(0.05)

    @property
    def master_pid(self) -> int | None:
        """The pid of the master ssh (the one TCP connection), while it runs."""
        return self._master.pid if self._master is not None and self._master.poll() is None else None

    def alive(self) -> bool:
        """Whether the connection still stands."""
        return self.master_pid is not None

    def close(self) -> None:
        """End the master (every session and forward over it ends too) and remove our folder. Safe twice."""
        master, self._master = self._master, None
        if master is not None and master.poll() is None:
            subprocess.run([*self._client(), "-O", "exit", self.dest], capture_output=True, env=child_env(SSH),
                           timeout=10)
            try:
                master.wait(5)
            except subprocess.TimeoutExpired:
                master.kill()
                master.wait()
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.release()
        folder, self._dir = self._dir, None
        if folder:
            shutil.rmtree(folder, ignore_errors=True)

    def __enter__(self) -> SshHost:
        return self.open()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- commands ------------------------------------------------------------------------------
    def command(self, argv: Sequence[str]) -> list[str]:
        """The local argv that runs ``argv`` on the host over the master (quoted for the remote shell)."""
        return [*self._client(), self.dest, shlex.join(argv)]

    def run(self, argv: Sequence[str], input: bytes | None = None, timeout: float = 60.0) -> str:
        """Run ``argv`` on the host and return its stdout; a non-zero exit is one line (UserError)."""
        try:
            done = subprocess.run(self.command(argv), input=input, capture_output=True, env=child_env(SSH),
                                  timeout=timeout, stdin=None if input is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise UserError(f"{self.dest}: `{shlex.join(argv)[:60]}` did not finish in {timeout:.0f} s") from None
        if done.returncode != 0:
            raise UserError(ssh_error_line(self.dest, done.stderr.decode(errors="replace"), done.returncode))
        return done.stdout.decode(errors="replace")

    def python(self) -> RemotePython:
        """The remote uid and the version of the host's ``python3``; too old or missing is one line."""
        script = ("id -u; command -v python3 >/dev/null 2>&1 || { echo NO-PYTHON3; exit 0; }; "
                  f"python3 -c {shlex.quote(_VERSION_PROBE)}")
        out = self.run(["sh", "-c", script]).split()
        uid = int(out[0])
        self._uid = uid
        if "NO-PYTHON3" in out:
            raise UserError(f"{self.dest} has no python3; the agent needs Python {_dotted(MIN_PYTHON)} or newer")
        match = re.search(r"\((\d+), (\d+)\)", " ".join(out[1:]))
        if match is None:
            raise UserError(f"{self.dest}: python3 gave no version ({' '.join(out[1:])[:60]})")
        version = (int(match[1]), int(match[2]))
        if version < MIN_PYTHON:
            raise UserError(f"{self.dest} has Python {_dotted(version)}; the agent needs {_dotted(MIN_PYTHON)} or newer")
        return RemotePython(uid=uid, version=version)

    def put_cached(self, local: Path, stem: str = "agent", suffix: str = ".pyz") -> tuple[str, bool]:
        """Copy ``local`` to ``~/.cache/tdescope/STEM-SHA256SUFFIX`` on the host unless it is there already.

        Returns the absolute remote path and whether it was copied now."""
        data = Path(local).read_bytes()
        sha = hashlib.sha256(data).hexdigest()
        name = f"{stem}-{sha[:16]}{suffix}"
        check = ('d="$HOME/.cache/tdescope"; f="$d/' + name + '"; echo "$f"; '
                 '[ -f "$f" ] && sha256sum "$f" | cut -c1-64 || true')
        out = self.run(["sh", "-c", check]).split()
        remote = out[0]
        if len(out) > 1 and out[1] == sha:
            return remote, False
        copy = ('set -e; umask 077; d="$HOME/.cache/tdescope"; mkdir -p "$d"; t="$d/.' + name + '.$$"; '
                'cat > "$t"; mv -f "$t" "$d/' + name + '"')
        self.run(["sh", "-c", copy], input=data, timeout=300)
        return remote, True

    def agent_argv(self, remote_pyz: str, args: Sequence[str] = ()) -> list[str]:
        """The local argv that starts the agent on the host: ``sudo -n python3 PYZ`` unless we are root there.

        ``python3 -I``: the host's own interpreter, isolated (no user site packages, no PYTHONPATH). Its stdin
        and stdout are the agent's; when that ssh dies (or our end of its stdin closes) the
        agent sees EOF and exits."""
        if self._uid is None:
            self.python()
        prefix = [] if self._uid == 0 else ["sudo", "-n"]
        return self.command([*prefix, "python3", "-I", remote_pyz, *args])

    def installed_agent(self) -> tuple[int, str] | None:
        """``(protocol, tdescope version)`` of the agent a package installed on the host
        (:data:`INSTALLED_AGENT`), or None when there is none or it says nothing readable."""
        script = (f"[ -f {shlex.quote(INSTALLED_AGENT)} ] || exit 0; "
                  f"python3 -I -c {shlex.quote(_INSTALLED_PROBE)} {shlex.quote(INSTALLED_AGENT)} 2>/dev/null || true")
        out = self.run(["sh", "-c", script]).split()
        if len(out) != 2 or not out[0].isdigit():
            return None
        return int(out[0]), out[1]

    def prepare_agent(self, local_pyz: Path) -> str:
        """Check the host (python3 new enough, ``sudo -n`` allowed unless root) and find the agent there: the
        one the ``tdescope-agent`` package installed when it speaks this workbench's protocol and is its
        release (nothing is copied to a host whose policy is "packages only"), else ours, copied once.

        Returns the agent's path on the host. Each failure is one line."""
        remote = self.python()
        if self.installed_agent() == (PROTOCOL_VERSION, __version__):
            path = INSTALLED_AGENT
        else:
            path, _copied = self.put_cached(local_pyz)
        if remote.uid != 0:
            self.run(["sudo", "-n", "python3", "-c", _VERSION_PROBE])
        return path

    def start_agent(self, remote_pyz: str, args: Sequence[str] = ()) -> subprocess.Popen:
        """Start the agent with pipes on its stdin/stdout (stderr piped too: its first line is the error)."""
        return subprocess.Popen(self.agent_argv(remote_pyz, args), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, env=child_env(SSH), start_new_session=True)

    def forward(self, remote: str | tuple[str, int], local_socket: str | None = None) -> str | tuple[str, int]:
        """Forward a local end to ``remote`` on the host: a unix socket path, or ``(host, port)`` as seen there.

        Returns the local end: a socket path in our folder for a socket, ``("127.0.0.1", port)`` for TCP.
        ``local_socket`` (a relative path such as ``pg0/.s.PGSQL.5432``) makes the local end that unix
        socket in our 0700 folder whatever ``remote`` is: only this user can reach it, where a local TCP
        port would let every user of this machine through to the database as the ssh account."""
        if local_socket is not None:
            if os.path.isabs(local_socket) or ".." in local_socket.split("/"):
                raise ValueError(f"not a name inside the connection's folder: {local_socket!r}")
            local: str | tuple[str, int] = os.path.join(self._dir or self.control_path, local_socket)
            os.makedirs(os.path.dirname(local), mode=0o700, exist_ok=True)
            target = remote if isinstance(remote, str) else f"{remote[0]}:{remote[1]}"
            spec = f"{local}:{target}"
        elif isinstance(remote, str):
            local = os.path.join(self._dir or self.control_path, f"fwd-{len(os.listdir(self._dir))}.sock")
            spec = f"{local}:{remote}"
        else:
            local = ("127.0.0.1", _free_port())
            spec = f"127.0.0.1:{local[1]}:{remote[0]}:{remote[1]}"
        done = subprocess.run([*self._client(), "-O", "forward", "-L", spec, self.dest], capture_output=True,
                              env=child_env(SSH), timeout=30)
        if done.returncode != 0:
            raise UserError(f"cannot forward to {remote} on {self.dest}: "
                            f"{done.stderr.decode(errors='replace').strip()[:120] or 'refused'}")
        return local


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))
