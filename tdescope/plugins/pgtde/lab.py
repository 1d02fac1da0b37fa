"""A private PostgreSQL 16.2 with Percona pg_tde, started by the workbench and gone when it ends.

:class:`PgTdeLab` takes the cached server with pg_tde built in
(:func:`~tdescope.plugins.pgtde.build.prepared_server`), runs initdb in a temp
dir (mode 0700), starts ``postgres`` on a free port and a unix socket in that
dir with ``shared_preload_libraries = 'pg_tde'``, and creates, in database
``tdescope_lab``, the file key provider (its keyring 0600 in the lab's dir),
a principal key, one table ``USING tde_heap_basic`` and its plain twin, both
holding rows that carry :data:`MARKER`. PostgreSQL refuses to run as root: as
root, the server runs as the ``postgres`` (else ``nobody``) OS user, on a
hard-linked copy of the cached install (the cache under ``/root`` is not
theirs to read). The reaper stops the server and removes the dir if the
workbench dies.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.app.system.child_env import child_env
from tdescope.app.system.reaper import Reaper, end_child, reap_with_me
from tdescope.plugins.pgtde.build import PgTdeServer, prepared_server

__all__ = ["ENCRYPTED_TABLE", "LAB_DATABASE", "MARKER", "PLAIN_MARKER", "PLAIN_TABLE", "PgTdeLab"]

LAB_DATABASE = "tdescope_lab"
ENCRYPTED_TABLE = "tdescope_tde_secret"
PLAIN_TABLE = "tdescope_tde_plain"
#: In every encrypted row's text: in no file of the data directory (WAL included).
MARKER = "WOMBAT-TDE-ROW"
#: The plain twin's rows say this instead (as long): its file and the WAL show it in the clear.
PLAIN_MARKER = "PLAIN-TWIN-ROW"
ROWS = 200

_CONFIG = """
port = {port}
listen_addresses = ''
unix_socket_directories = '{dir}'
unix_socket_permissions = 0700
shared_preload_libraries = 'pg_tde'
shared_buffers = 16MB
max_connections = 30
fsync = off
synchronous_commit = off
full_page_writes = off
autovacuum = off
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _run_as() -> pwd.struct_passwd | None:
    """The OS user the server runs as when we are root (PostgreSQL refuses root); None otherwise."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise UserError("pg-tde lab: running as root needs a 'postgres' or 'nobody' OS user to run the server as")


class PgTdeLab:
    """A running private pg_tde server; :meth:`close` stops it and removes its files.

    Parameters
    ----------
    progress : callable, optional
        ``progress(message)`` at each start-up step (the build's too); without it, the build's
        steps (the slow part, first start only) are printed on stderr.
    source : str or path, optional
        A pg_tde source tarball or folder instead of the vendored one.
    """

    def __init__(self, progress: Callable[[str], None] | None = None, source: str | None = None) -> None:
        say = progress or (lambda _m: None)
        # the build is the long step: without a progress callback (the CLI), its lines go to stderr
        self.server: PgTdeServer = prepared_server(source, progress or _to_stderr)
        self.dir = Path(tempfile.mkdtemp(prefix="tdescope-pgtde-"))  # mode 0700
        self.data = self.dir / "data"
        self.keyring = self.dir / "keyring.per"
        self.port = _free_port()
        self.proc: subprocess.Popen | None = None
        self._guard: Reaper | None = None
        self._user = _run_as()
        self.superuser = self._user.pw_name if self._user else pwd.getpwuid(os.geteuid()).pw_name
        try:
            install = self.server.root
            if self._user is not None:
                os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
                install = self.dir / "install"
                _link_tree(self.server.root, install)
            self.bindir = install / "pgserver" / "pginstall" / "bin"
            say("pg-tde lab: initdb…")
            self._run(str(self.bindir / "initdb"), "-D", str(self.data), "-A", "trust", "-U", self.superuser,
                      "--no-sync", "-E", "UTF8", "--locale=C")
            with open(self.data / "postgresql.conf", "a") as fh:
                fh.write(_CONFIG.format(port=self.port, dir=self.dir))
            say("pg-tde lab: starting PostgreSQL 16.2 with pg_tde…")
            self.proc = subprocess.Popen([str(self.bindir / "postgres"), "-D", str(self.data)],
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=open(self.dir / "server.log", "ab"), start_new_session=True,
                                         env=child_env(), **self._as_user())
            # if the workbench dies, the reaper stops the server (SIGINT: fast shutdown) and removes the dir,
            # the keyring among it
            self._guard = reap_with_me(self.proc.pid, signal.SIGINT, 20.0, str(self.dir))
            self._wait_ready()
            say("pg-tde lab: creating the encrypted table and its plain twin…")
            self._create_tables()
        except BaseException:
            self.close()
            raise

    # -- plumbing --------------------------------------------------------------
    def _as_user(self) -> dict:
        if self._user is None:
            return {}
        return {"user": self._user.pw_uid, "group": self._user.pw_gid, "extra_groups": []}

    def _run(self, *argv: str) -> str:
        done = subprocess.run(list(argv), capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120,
                              cwd=self.dir, env=child_env(), **self._as_user())
        if done.returncode != 0:
            lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
            raise UserError(f"pg-tde lab: {Path(argv[0]).name} failed: {lines[-1] if lines else 'no message'}")
        return done.stdout

    def psql(self, sql: str, dbname: str = LAB_DATABASE) -> str:
        """Run ``sql`` with the lab's psql as its superuser; returns stdout."""
        return self._run(str(self.bindir / "psql"), "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h",
                         str(self.dir), "-p", str(self.port), "-U", self.superuser, "-d", dbname, "-c", sql)

    def _wait_ready(self, timeout: float = 60.0) -> None:
        sock = self.dir / f".s.PGSQL.{self.port}"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise UserError(f"pg-tde lab: postgres exited at start: {self.log_tail()}")
            if sock.exists() and (self.data / "postmaster.pid").exists():
                pid_lines = (self.data / "postmaster.pid").read_text().splitlines()
                if len(pid_lines) >= 8 and pid_lines[7].strip() == "ready":
                    return
            time.sleep(0.05)
        raise UserError(f"pg-tde lab: postgres not ready within {timeout:g} s")

    def _create_tables(self) -> None:
        self.psql(f"CREATE DATABASE {LAB_DATABASE}", dbname="postgres")
        rows = "SELECT g, '{}-' || g, repeat(md5(g::text), 4) FROM generate_series(1, %d) g" % ROWS
        self.psql(
            "CREATE EXTENSION pg_tde; "
            f"SELECT pg_tde_add_key_provider_file('file', '{self.keyring}'); "
            "SELECT pg_tde_set_principal_key('tdescope-lab-key', 'file'); "
            f"CREATE TABLE {ENCRYPTED_TABLE} (id int, name text, filler text) USING tde_heap_basic; "
            f"CREATE TABLE {PLAIN_TABLE} (id int, name text, filler text); "
            f"INSERT INTO {ENCRYPTED_TABLE} {rows.format(MARKER)}; "
            f"INSERT INTO {PLAIN_TABLE} {rows.format(PLAIN_MARKER)}; CHECKPOINT;")
        if self.keyring.exists():
            os.chmod(self.keyring, 0o600)  # pg_tde creates it with the server's umask

    # -- public ------------------------------------------------------------------
    @property
    def pid(self) -> int:
        """The postmaster."""
        assert self.proc is not None
        return self.proc.pid

    def dsn(self, dbname: str = LAB_DATABASE) -> str:
        """A libpq keyword DSN over the lab's unix socket."""
        return f"host={self.dir} port={self.port} dbname={dbname} user={self.superuser}"

    def relation_files(self, table: str) -> list[Path]:
        """The data files of ``table`` (main fork and its segments)."""
        rel = self.psql(f"SELECT pg_relation_filepath('{table}')").strip()
        base = self.data / rel
        return [p for p in base.parent.glob(base.name + "*") if p.is_file()]

    def log_tail(self) -> str:
        try:
            lines = [ln for ln in (self.dir / "server.log").read_text(errors="replace").splitlines() if ln.strip()]
        except OSError:
            return "no server log"
        return lines[-1] if lines else "no message"

    def close(self, timeout: float = 20.0) -> None:
        """Fast shutdown (SIGINT), then remove the dir. Safe twice."""
        proc, self.proc = self.proc, None
        guard, self._guard = self._guard, None
        end_child(proc, signal.SIGINT, timeout, self.dir, guard)


def _to_stderr(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _link_tree(src: Path, dst: Path) -> None:
    """A copy of ``src`` made of hard links where the filesystem allows (instant), copies elsewhere."""
    def link(a: str, b: str) -> None:
        try:
            os.link(a, b)
        except OSError:
            shutil.copy2(a, b)
    shutil.copytree(src, dst, symlinks=True, copy_function=link)
    os.chmod(dst, 0o755)  # the cache's top folder is 0700 (mkdtemp); the lab's own dir, 0700, guards it
