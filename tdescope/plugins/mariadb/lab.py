"""A private MariaDB server with InnoDB encryption, started by the workbench and gone when it ends.

:class:`MariaLab` initialises a data directory under a temp dir (mode 0700),
writes a generated key file (mode 0600, removed on close) for the
``file_key_management`` plugin, and starts ``mariadbd`` on a free port and a
socket of its own with table, log and temporary-table encryption on, two
encryption threads (the system tablespace gets encrypted too) and a small
buffer pool so a scan really reads pages from disk (and a page cleaner that keeps only
100 pages free: its default, 1536, is more than the whole pool, and it would evict a scan's
pages behind it, so a warm re-read would not be warm). ``performance_schema`` is
on for the engine's own waits. Facts: ``../shared/research/mariadb-tde.md``.
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
from collections.abc import Callable
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.app.system.child_env import child_env
from tdescope.app.system.reaper import Reaper, end_child, reap_with_me

__all__ = ["LAB_DATABASE", "PAGE_SIZES", "MariaLab", "find_server"]

#: The lab's database, with the encrypted table and its plain twin.
LAB_DATABASE = "tdescope_lab"
#: The smallest buffer pool 16 KiB pages allow (379 pages): a scan of the lab table reads from disk.
BUFFER_POOL = "6M"

_CONFIG = """[mariadbd]
datadir={dir}/data
socket={dir}/mariadbd.sock
port={port}
bind-address=127.0.0.1
pid-file={dir}/mariadbd.pid
tmpdir={dir}/tmp
log-error={dir}/error.log
user={user}
skip-log-bin
plugin-load-add=file_key_management
file_key_management_filename={dir}/keys
file_key_management_encryption_algorithm=AES_CBC
innodb_encrypt_tables=ON
innodb_encrypt_log=ON
innodb_encrypt_temporary_tables=ON
innodb_encryption_threads=2
innodb_buffer_pool_size={pool}
innodb_buffer_pool_load_at_startup=OFF
innodb_buffer_pool_dump_at_shutdown=OFF
innodb_flush_method=O_DIRECT
innodb_lru_scan_depth=100
innodb_log_file_size=16M
performance_schema=ON
performance-schema-consumer-events-waits-current=ON
performance-schema-instrument='wait/%=ON'
max_connections=40
innodb_page_size={page_size}
"""
#: InnoDB's page sizes (``innodb_page_size``, fixed when the data directory is created).
PAGE_SIZES = (4096, 8192, 16384, 32768, 65536)


def find_server() -> tuple[str, str]:
    """Paths of ``mariadbd`` and ``mariadb-install-db``; UserError naming the package when missing."""
    server = shutil.which("mariadbd", path=os.environ.get("PATH", "") + ":/usr/sbin:/usr/local/sbin")
    install = shutil.which("mariadb-install-db") or shutil.which("mysql_install_db")
    if not server or not install:
        raise UserError("MariaDB server not found: apt-get install mariadb-server")
    return server, install


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class MariaLab:
    """A running private ``mariadbd``; :meth:`close` stops it and removes its files.

    Parameters
    ----------
    progress : callable, optional
        ``progress(message)`` at each start-up step.
    buffer_pool : str
        ``innodb_buffer_pool_size`` (for pages over 16 KiB, at least what InnoDB needs for them).
    page_size : int
        ``innodb_page_size``: one of :data:`PAGE_SIZES` (the lab's default is InnoDB's, 16 KiB).
    """

    def __init__(self, progress: Callable[[str], None] | None = None, buffer_pool: str = BUFFER_POOL,
                 page_size: int = 16384) -> None:
        say = progress or (lambda _m: None)
        if page_size not in PAGE_SIZES:
            raise UserError(f"MariaDB lab: innodb_page_size must be one of {', '.join(map(str, PAGE_SIZES))}, "
                            f"not {page_size}")
        if page_size > 16384 and buffer_pool == BUFFER_POOL:
            buffer_pool = f"{page_size // 16384 * 12}M"  # InnoDB refuses a 6 MB pool for 32/64 KiB pages
        self.page_size = page_size
        server, install = find_server()
        self.dir = Path(tempfile.mkdtemp(prefix="tdescope-mariadb-"))  # mode 0700
        self.proc: subprocess.Popen | None = None
        self._guard: Reaper | None = None
        self.port = _free_port()
        self.socket = str(self.dir / "mariadbd.sock")
        try:
            keys = self.dir / "keys"
            fd = os.open(keys, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write("".join(f"{i};{secrets.token_hex(32)}\n" for i in (1, 2)))
            (self.dir / "tmp").mkdir(mode=0o700)  # sort files and temporary tables: the lab's own, never /tmp's
            self.config = self.dir / "my.cnf"
            user = "root" if os.geteuid() == 0 else ""
            self.config.write_text(_CONFIG.format(dir=self.dir, port=self.port, pool=buffer_pool, user=user,
                                                  page_size=page_size)
                                   .replace("user=\n", ""))
            say("MariaDB lab: creating the data directory…")
            done = subprocess.run([install, f"--defaults-file={self.config}", "--auth-root-authentication-method=normal",
                                   "--skip-test-db"], capture_output=True, text=True, timeout=120, env=child_env())
            if done.returncode != 0:
                raise UserError(f"MariaDB lab: mariadb-install-db failed: {_last_line(done.stderr or done.stdout)}")
            say("MariaDB lab: starting mariadbd with encryption…")
            self.proc = subprocess.Popen([server, f"--defaults-file={self.config}"], stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                         start_new_session=True, env=child_env())
            # if the workbench dies, the reaper shuts the server down (SIGTERM: InnoDB's clean shutdown)
            # and removes its files, the key among them
            self._guard = reap_with_me(self.proc.pid, signal.SIGTERM, 30.0, str(self.dir))
            self._wait_ready()
        except BaseException:
            self.close()
            raise

    @property
    def pid(self) -> int:
        """The server process: the probe target."""
        assert self.proc is not None
        return self.proc.pid

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise UserError(f"MariaDB lab: mariadbd exited at start: {self.error_log_tail()}")
            if os.path.exists(self.socket):
                try:
                    with socket.socket(socket.AF_UNIX) as s:
                        s.connect(self.socket)
                    return
                except OSError:
                    pass
            time.sleep(0.05)
        raise UserError(f"MariaDB lab: mariadbd not ready within {timeout:g} s")

    def error_log_tail(self) -> str:
        try:
            return _last_line((self.dir / "error.log").read_text(errors="replace"))
        except OSError:
            return "no error log"

    def close(self, timeout: float = 30.0) -> None:
        """Shut the server down (SIGTERM: InnoDB's clean shutdown), then remove its files. Safe twice."""
        proc, self.proc = self.proc, None
        guard, self._guard = self._guard, None
        end_child(proc, signal.SIGTERM, timeout, self.dir, guard)


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else "no message"
