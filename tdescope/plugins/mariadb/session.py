"""A live MariaDB session: the server process (the probe target), a workload and a control connection.

One ``mariadbd`` serves every connection, so the probe target is the whole
server, whichever connection runs the workload: the Engine dock says so, and a
gdb probe (whose stops halt every thread) is the backend to avoid on a server
others use. The lab (``ConnectParams.lab``) starts a private server first.
"""

from __future__ import annotations

import functools
import os
import threading
from collections.abc import Callable

from tdescope.app.engines.api import Inventory, Workload
from tdescope.app.errors import UserError
from tdescope.plugins.mariadb import workloads as wl
from tdescope.plugins.mariadb.connection import ConnectionSpec, open_connection
from tdescope.plugins.mariadb.inventory import build_inventory
from tdescope.plugins.mariadb.lab import LAB_DATABASE, MariaLab
from tdescope.plugins.mariadb.pages import InnoDbPageDecoder
from tdescope.plugins.mariadb.recipes import ENCRYPTED_TABLESPACES
from tdescope.plugins.mariadb.records import index_layouts
from tdescope.plugins.mariadb.statements import ENCRYPTED_SPACES, PID_FILE, PLUGIN_ACTIVE
from tdescope.plugins.mariadb.waits import MariaWaitSource

__all__ = ["MariaDbSession", "server_pid"]


def server_pid(conn) -> int:
    """The pid of the ``mariadbd`` serving ``conn``, from its pid file (the server must run on this machine)."""
    cur = conn.cursor()
    cur.execute(PID_FILE)
    path = cur.fetchone()[0]
    try:
        with open(path) as fh:
            pid = int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        raise UserError(f"cannot read the server's pid file {path}: tdescope must run on the database's machine, "
                        "as a user who can read it") from None
    if not os.path.exists(f"/proc/{pid}"):
        raise UserError(f"the server's pid file says {pid}, which is not running here: is the server remote?")
    return pid


class MariaDbSession:
    """One MariaDB server, probed as a whole.

    Parameters
    ----------
    spec : ConnectionSpec
        Where to connect (ignored for the lab).
    prompt : callable, optional
        ``prompt(where) -> password`` when the server asks for one.
    lab : bool
        Start a private encrypted server and connect to it.
    progress : callable, optional
        ``progress(message)`` while the lab starts.
    target_pid : int, optional
        ``--target-pid``: refused (UserError, one line) unless it is the server's own pid.
    lab_page_size : int
        The lab server's ``innodb_page_size``.
    processes : ProcessTable, optional
        The server's machine when it is not this one (``--ssh``): the server is found in its process table.
    """

    own_target = False  # a server others use; the lab's session says True (set from ``lab``)

    def __init__(self, spec: ConnectionSpec, prompt: Callable[[str], str | None] | None = None, lab: bool = False,
                 progress: Callable[[str], None] | None = None, target_pid: int | None = None,
                 lab_page_size: int = 16384, processes=None) -> None:
        self.own_target = lab  # the lab's server is ours alone: the lab's stop budget, plaintext kept
        self.lab = MariaLab(progress, page_size=lab_page_size) if lab else None
        self.processes = processes
        self._lock = threading.Lock()
        try:
            if self.lab is not None:
                # the lab's root has no password: a MYSQL_PWD meant for the user's own servers must not be sent
                spec = ConnectionSpec(user="root", socket=self.lab.socket, password="")
            self.conn, self._spec = open_connection(spec, prompt)
            self.control, _ = open_connection(self._spec)
            if processes is not None:
                from tdescope.plugins.mariadb.tunnel import server_pid_on

                cur = self.control.cursor()
                cur.execute(PID_FILE)
                self.pid = server_pid_on(str(cur.fetchone()[0] or ""), processes, target_pid)
            else:
                self.pid = self.lab.pid if self.lab is not None else server_pid(self.control)
            if target_pid is not None and int(target_pid) != self.pid:
                raise UserError(f"pid {target_pid} is not this MariaDB server: one process, mariadbd pid {self.pid}, "
                                "serves every connection; leave --target-pid out")
            if self.lab is not None:
                if progress is not None:
                    progress("MariaDB lab: encrypting the system tablespace…")
                wl.wait_until_encrypted(self.control)
                wl.create_lab_tables(self.conn, LAB_DATABASE)
        except BaseException:
            self.close()
            raise
        self._waits: MariaWaitSource | None = None

    # -- EngineSession ----------------------------------------------------------
    def server_pid(self) -> int:
        """The ``mariadbd`` process: every connection's, every thread of it."""
        return self.pid

    def inventory(self) -> Inventory:
        with self._lock:
            return build_inventory(self.control, self.pid, lab=self.lab is not None)

    def workloads(self) -> list[Workload]:
        db = LAB_DATABASE if self.lab is not None else (self._spec.dbname or LAB_DATABASE)
        run = functools.partial
        return [
            Workload("ab_dml", "A/B DML (encrypted table vs plain twin)",
                     "Seed 000's insert/delete/update/select groups on an ENCRYPTED=YES InnoDB table, then on "
                     "its ENCRYPTED=NO twin.", wl.DEFAULTS["ab_dml"], run(wl.ab_dml, self.conn, db),
                     sides=("encrypted", "plain")),
            Workload("io_path", "Decryption happens in the I/O path (cold then warm scan)",
                     "Seed 003's finding: a first scan reads pages from disk and decrypts them; a second scan of "
                     "the same table finds them in the buffer pool and decrypts none.", wl.DEFAULTS["io_path"],
                     run(wl.io_path, self.conn, db)),
            Workload("cold_warm", "Cold vs warm read (seed 002's 2×2)",
                     "An encrypted table and its plain twin, each scanned with the buffer pool emptied of it "
                     "(cold) and again (warm): encryption costs when pages come from disk, not when they are "
                     "cached. Elapsed and the server's CPU per scan.", wl.DEFAULTS["cold_warm"],
                     run(wl.cold_warm, self.conn, db, self.pid if self.processes is None else None)),
        ]

    def sql_workload(self, sql: str, repeat: int = 1) -> Workload:
        """The user's SQL as a workload on tdescope's connection."""
        return Workload("sql", "SQL", sql, {"sql": sql, "repeat": repeat}, functools.partial(wl.run_sql, self.conn))

    def require_extension(self, name: str) -> None:
        """UserError when the server lacks ``name``: ``"encrypted tablespaces"`` (nothing would be
        decrypted), or a plugin by that name."""
        with self._lock:
            cur = self.control.cursor()
            if name == ENCRYPTED_TABLESPACES:
                cur.execute(ENCRYPTED_SPACES)
                if not cur.fetchone()[0]:
                    raise UserError("no encrypted tablespaces on this server: nothing is decrypted (it needs a key "
                                    "management plugin and ENCRYPTED=YES tables or innodb_encrypt_tables=ON)")
                return
            cur.execute(PLUGIN_ACTIVE, (name,))
            if not cur.fetchone()[0]:
                raise UserError(f"plugin {name} is not active on this server")

    def catalog_decoder(self) -> InnoDbPageDecoder:
        """InnoDB pages with records decoded to column values (index layouts from the data dictionary,
        read again when a page belongs to an index created since)."""
        def layouts():
            with self._lock:
                return index_layouts(self.control)

        return InnoDbPageDecoder(loader=layouts)

    def wait_source(self) -> MariaWaitSource | None:
        if self._waits is None:
            self._waits = MariaWaitSource(self._spec, self.pid)
        return self._waits

    #: The client's codes for a server that went away or a connection lost mid-query (CR_SERVER_GONE_ERROR,
    #: CR_SERVER_LOST, CR_CONN_HOST_ERROR).
    LOST_CODES = frozenset({2006, 2013, 2003})

    def connection_lost(self, exc: BaseException) -> bool:
        """True when ``exc`` says the connection is gone: PyMySQL's client codes for it, or an interface error
        on a connection it has closed."""
        import pymysql

        if isinstance(exc, pymysql.err.OperationalError):
            return bool(exc.args) and exc.args[0] in self.LOST_CODES
        return isinstance(exc, pymysql.err.InterfaceError) and not (self.conn.open and self.control.open)

    def close(self) -> None:
        for name in ("conn", "control"):
            conn = getattr(self, name, None)
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - the server may be gone already
                    pass
                setattr(self, name, None)
        waits, self._waits = getattr(self, "_waits", None), None
        if waits is not None:
            waits.close()
        if self.lab is not None:
            self.lab.close()
