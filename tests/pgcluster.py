"""A throw-away PostgreSQL cluster for tests and benchmarks: initdb + pg_ctl, a free port, a temp dir.

PostgreSQL refuses to run as root, so when the suite runs as root the cluster
runs as the ``postgres`` OS user in a directory that user owns. Trust auth on
the unix socket (in the cluster dir) and on 127.0.0.1 for the superuser; one
role, ``tdescope_pw``, must give a password (scram) so the wrong-password path
can be tested. ``shared_buffers`` is tiny on purpose: a seq scan of a table
larger than it reads blocks from disk, through ``mdread``.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from pathlib import Path

__all__ = ["PgCluster", "PASSWORD_ROLE", "PASSWORD"]

PASSWORD_ROLE = "tdescope_pw"
PASSWORD = "s3cret-for-tests"
_BIN = Path("/usr/lib/postgresql/15/bin")


def _bin(name: str) -> str:
    path = _BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PgCluster:
    """Start with :meth:`start`, stop and delete with :meth:`stop`; :meth:`attach` to one already running."""

    #: Set to :attr:`shared` (``root:port``) to have the suite's ``pg_cluster`` use a running cluster.
    SHARED_ENV = "TDESCOPE_TEST_PG_CLUSTER"

    def __init__(self, shared_buffers: str = "256kB") -> None:
        self.root = Path(tempfile.mkdtemp(prefix="tdescope-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.shared_buffers = shared_buffers
        self._user = "postgres" if os.geteuid() == 0 else None
        self.superuser = self._user or pwd.getpwuid(os.geteuid()).pw_name

    @classmethod
    def attach(cls, shared: str) -> "PgCluster":
        """The cluster another process started, from its :attr:`shared` text; not stopped by this object."""
        root, port = shared.rsplit(":", 1)
        cluster = cls.__new__(cls)
        cluster.root, cluster.port, cluster.shared_buffers = Path(root), int(port), None
        cluster.data = cluster.root / "data"
        cluster._user = "postgres" if os.geteuid() == 0 else None
        cluster.superuser = cluster._user or pwd.getpwuid(os.geteuid()).pw_name
        return cluster

    @property
    def shared(self) -> str:
        """``root:port``, what :meth:`attach` takes."""
        return f"{self.root}:{self.port}"

    # -- plumbing --------------------------------------------------------------
    def _run(self, *argv: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = list(argv)
        if self._user is not None:
            cmd = ["runuser", "-u", self._user, "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, check=check, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def dsn(self, dbname: str = "postgres", user: str | None = None, host: str | None = None) -> str:
        """A libpq keyword DSN; the unix socket by default."""
        return f"host={host or self.root} port={self.port} dbname={dbname} user={user or self.superuser}"

    # -- life cycle ------------------------------------------------------------
    def start(self) -> "PgCluster":
        if self._user is not None:
            ids = pwd.getpwnam(self._user)
            os.chown(self.root, ids.pw_uid, ids.pw_gid)
        self._run(_bin("initdb"), "-D", str(self.data), "-A", "trust", "-U", self.superuser, "--no-sync",
                  "-E", "UTF8", "--locale=C")
        with open(self.data / "postgresql.conf", "a") as fh:
            fh.write(
                f"port = {self.port}\nlisten_addresses = '127.0.0.1'\n"
                f"unix_socket_directories = '{self.root}'\nshared_buffers = {self.shared_buffers}\n"
                "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"
                "max_connections = 40\nautovacuum = off\npassword_encryption = 'scram-sha-256'\n"
            )
        # the password role must authenticate; everything else is trusted (a local test cluster)
        (self.data / "pg_hba.conf").write_text(
            f"local all {PASSWORD_ROLE} scram-sha-256\nhost all {PASSWORD_ROLE} 127.0.0.1/32 scram-sha-256\n"
            "local all all trust\nhost all all 127.0.0.1/32 trust\n"
        )
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-w", "-t", "60",
                  "start")
        self.psql(f"CREATE ROLE {PASSWORD_ROLE} LOGIN PASSWORD '{PASSWORD}'")
        self.psql("CREATE DATABASE nocrypto")
        self.psql("CREATE EXTENSION pgcrypto; CREATE EXTENSION pageinspect;")
        return self

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run ``sql`` with psql as the superuser; returns stdout."""
        out = self._run(_bin("psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", str(self.root), "-p",
                        str(self.port), "-U", self.superuser, "-d", dbname, "-c", sql)
        return out.stdout

    def restart(self, mode: str = "fast") -> None:
        """``pg_ctl restart``: every backend is terminated, the postmaster comes back with a new pid."""
        self._run(_bin("pg_ctl"), "-D", str(self.data), "-l", str(self.root / "server.log"), "-m", mode, "-w",
                  "-t", "60", "restart")

    def postmaster_pid(self) -> int:
        return int((self.data / "postmaster.pid").read_text().split()[0])

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(_bin("pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
            for _ in range(50):
                if not (self.data / "postmaster.pid").exists():
                    break
                time.sleep(0.1)
        shutil.rmtree(self.root, ignore_errors=True)
