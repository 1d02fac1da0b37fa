"""MariaDB's own wait events: ``performance_schema.events_waits_current``, sampled on its own connection.

The whole server is the target, so a sample holds the waits in progress of
every thread (with its OS thread id): file I/O of the tablespaces, mutexes and
rwlocks of the buffer pool, sockets, table locks. Each poll is one statement
(:data:`~tdescope.plugins.mariadb.statements.WAIT_POLL`). On a server started without ``performance_schema``, or
with the ``events_waits_current`` consumer or the ``wait/%`` instruments off,
there is nothing to sample: :func:`waits_unavailable` says so in one line with
the statement or my.cnf line that turns it on, and the first :meth:`sample`
raises it (never silently empty). Read only: tdescope never changes a server's
instrumentation; the lab starts with it on.
"""

from __future__ import annotations

import threading
import time

from tdescope.app.errors import UserError
from tdescope.app.events import Event, WaitSample
from tdescope.plugins.mariadb.statements import CONSUMERS, PERFORMANCE_SCHEMA_ON, WAIT_INSTRUMENTS, WAIT_POLL

__all__ = ["MariaWaitSource", "waits_unavailable", "wait_class"]

_CLASSES = (("wait/io/file", "File I/O"), ("wait/io/socket", "Network"), ("wait/io/table", "Table I/O"),
            ("wait/synch", "Sync"), ("wait/lock", "Lock"), ("idle", "Idle"))


def waits_unavailable(conn) -> str | None:
    """Why this server gives no engine waits, with how to turn them on (one line); None when it does."""
    cur = conn.cursor()
    cur.execute(PERFORMANCE_SCHEMA_ON)
    if not int(cur.fetchone()[0]):
        return ("performance_schema is OFF on this server: no engine waits (OS waits only); to turn it on, put "
                "performance_schema=ON under [mariadbd] in my.cnf and restart the server")
    cur.execute(CONSUMERS)
    off = [r[0] for r in cur.fetchall()]
    if off:
        return (f"the performance_schema consumer {', '.join(off)} is off: no engine waits (OS waits only); to turn "
                "it on: UPDATE performance_schema.setup_consumers SET ENABLED = 'YES' WHERE NAME IN "
                "('global_instrumentation', 'thread_instrumentation', 'events_waits_current') "
                "(my.cnf: performance-schema-consumer-events-waits-current=ON)")
    cur.execute(WAIT_INSTRUMENTS)
    if not int(cur.fetchone()[0]):
        return ("the performance_schema wait instruments are off: no engine waits (OS waits only); to turn them "
                "on: UPDATE performance_schema.setup_instruments SET ENABLED = 'YES', TIMED = 'YES' WHERE NAME "
                "LIKE 'wait/%' (my.cnf: performance-schema-instrument='wait/%=ON')")
    return None


def wait_class(event_name: str) -> str:
    """The wait class of a performance_schema event name (``wait/io/file/innodb/innodb_data_file``...)."""
    return next((cls for prefix, cls in _CLASSES if event_name.startswith(prefix)), "Other")


class MariaWaitSource:
    """Waits in progress in the server, one query per :meth:`sample`."""

    def __init__(self, spec, pid: int) -> None:
        from tdescope.plugins.mariadb.connection import open_connection

        self._spec = spec
        self._open = lambda: open_connection(spec)[0]
        self.conn = None
        self.pid = int(pid)
        self.why_not: str | None = None
        self._lock = threading.Lock()

    def describe(self) -> str:
        """What each poll reads (the caller adds the rate)."""
        return "performance_schema.events_waits_current and threads, every thread of the server"

    def _connect(self) -> None:
        self.conn = self._open()
        # read only: tdescope does not change a server's instrumentation (the lab starts with it on)
        self.why_not = waits_unavailable(self.conn)

    def sample(self) -> list[Event]:
        """The waits in progress now (one statement); a few hundred µs on a local server.

        Raises
        ------
        UserError
            Once, when the server gives no engine waits (:func:`waits_unavailable`'s line) or the
            connection broke; later calls return nothing.
        """
        with self._lock:
            if self.why_not:
                return []
            try:
                if self.conn is None:
                    self._connect()
                    if self.why_not:
                        raise UserError(self.why_not)
                cur = self.conn.cursor()
                cur.execute(WAIT_POLL)
                rows = cur.fetchall()
            except UserError:
                raise
            except Exception as exc:  # noqa: BLE001 - said once, as one line
                self.why_not = f"engine waits stopped: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                raise UserError(self.why_not) from None
        now = time.time()
        return [WaitSample(now, self.pid, int(tid or 0), "mariadb", wait_class(name) if name else "CPU",
                           name.rsplit("/", 1)[-1] if name else "on CPU", state or thread.rsplit("/", 1)[-1])
                for tid, name, thread, state in rows]

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:  # noqa: BLE001
                pass
