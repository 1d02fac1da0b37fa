"""MariaDB's own wait events: ``performance_schema.events_waits_current``, sampled on its own connection.

The whole server is the target, so a sample holds the waits in progress of
every thread (with its OS thread id): file I/O of the tablespaces, mutexes and
rwlocks of the buffer pool, sockets, table locks. On a server started without
``performance_schema`` (or with the waits consumer off) there is nothing to
sample: :attr:`MariaWaitSource.why_not` says so. Read only: tdescope never
changes a server's instrumentation; the lab starts with it on.
"""

from __future__ import annotations

import threading
import time

from tdescope.app.errors import UserError
from tdescope.app.events import Event, WaitSample

__all__ = ["MariaWaitSource", "wait_class"]

_CLASSES = (("wait/io/file", "File I/O"), ("wait/io/socket", "Network"), ("wait/io/table", "Table I/O"),
            ("wait/synch", "Sync"), ("wait/lock", "Lock"), ("idle", "Idle"))
# Every thread waiting now, and every client thread running a statement without a wait in progress
# (on CPU, in the server's own view); tdescope's sampling connection left out.
_QUERY = ("SELECT t.THREAD_OS_ID, IF(w.TIMER_END IS NULL, w.EVENT_NAME, NULL), t.NAME, t.PROCESSLIST_STATE "
          "FROM performance_schema.threads t "
          "LEFT JOIN performance_schema.events_waits_current w ON w.THREAD_ID = t.THREAD_ID "
          "WHERE (w.TIMER_END IS NULL AND w.EVENT_NAME IS NOT NULL AND w.EVENT_NAME <> 'idle') "
          "OR (t.TYPE = 'FOREGROUND' AND t.PROCESSLIST_COMMAND = 'Query' "
          "AND t.PROCESSLIST_ID <> CONNECTION_ID())")


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

    def _connect(self) -> None:
        self.conn = self._open()
        cur = self.conn.cursor()
        cur.execute("SELECT @@performance_schema")
        if not int(cur.fetchone()[0]):
            self.why_not = "performance_schema is OFF on this server: engine waits unavailable (OS waits only)"
            return
        # read only: tdescope does not change a server's instrumentation (the lab starts with it on)
        cur.execute("SELECT ENABLED FROM performance_schema.setup_consumers WHERE NAME = 'events_waits_current'")
        row = cur.fetchone()
        if not row or row[0] != "YES":
            self.why_not = ("the events_waits_current consumer is off on this server: engine waits unavailable "
                            "(performance-schema-consumer-events-waits-current=ON turns it on)")

    def sample(self) -> list[Event]:
        """The waits in progress now; a few hundred µs on a local server."""
        with self._lock:
            if self.why_not:
                return []
            try:
                if self.conn is None:
                    self._connect()
                    if self.why_not:
                        return []
                cur = self.conn.cursor()
                cur.execute(_QUERY)
                rows = cur.fetchall()
            except (UserError, Exception) as exc:  # noqa: BLE001 - a sampler must not raise into the observer
                self.why_not = f"engine waits stopped: {str(exc).splitlines()[0] if str(exc) else type(exc).__name__}"
                return []
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
