"""PostgreSQL's own wait events for one backend: pg_stat_activity polled, or pg_wait_sampling's history.

Sampling runs on its own connection so the sampled backend is never the one
answering. Each poll is one statement (:mod:`tdescope.plugins.postgres.statements`):
without ``pg_wait_sampling``, the one backend's ``pg_stat_activity`` row at the
caller's rate; with it, the server samples and tdescope reads its history of
the backend once a second, whatever the caller's rate. A backend that is active
with no wait event is on CPU; pg_stat_activity says so only by leaving
``wait_event`` NULL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from tdescope.app.events import Event, WaitSample
from tdescope.plugins.postgres import statements as sql

__all__ = ["PgWaitSource", "WaitSampler"]


class PgWaitSource:
    """One sample of ``pid``'s wait state per :meth:`sample` call.

    Parameters
    ----------
    conn : psycopg.Connection
        A connection of its own (autocommit, so each sample sees fresh state).
    pid : int
        The backend to watch.
    """

    #: Seconds between two reads of pg_wait_sampling's history (the server samples every 10 ms).
    HISTORY_PERIOD_S = 1.0

    def __init__(self, conn, pid: int) -> None:
        self.conn = conn
        self.pid = int(pid)
        installed = {name for name, _version in conn.execute(sql.EXTENSIONS_INSTALLED).fetchall()}
        self.via = "pg_wait_sampling" if "pg_wait_sampling" in installed else "pg_stat_activity"
        self._lock = threading.Lock()
        self._since = datetime.now(timezone.utc)  # history rows after this were not read yet
        self._next_read = 0.0

    def describe(self) -> str:
        """What each poll reads (the window and ``--help`` add the rate)."""
        if self.via == "pg_wait_sampling":
            return (f"pg_wait_sampling_history of pid {self.pid}, read once a second "
                    "(the server samples every 10 ms)")
        return f"pg_stat_activity, the row of pid {self.pid}"

    def follow(self, pid: int) -> None:
        """Sample ``pid`` from the next sample on (the session's target changed)."""
        with self._lock:
            self.pid = int(pid)

    def sample(self) -> list[Event]:
        """Take one sample (one statement); a few hundred µs on a local server."""
        with self._lock:
            if self.via == "pg_wait_sampling":
                return self._history()
            row = self.conn.execute(sql.WAIT_POLL, (self.pid,)).fetchone()
        if row is None:
            return []
        wait_type, event, state = row
        return [WaitSample(time.time(), self.pid, self.pid, "postgres", wait_type or "CPU",
                           event or ("CPU" if state == "active" else (state or "unknown")), state or "")]

    def _history(self) -> list[Event]:
        """The server's samples of the backend since the last read, at most once per HISTORY_PERIOD_S."""
        now = time.monotonic()
        if now < self._next_read:
            return []
        self._next_read = now + self.HISTORY_PERIOD_S
        rows = self.conn.execute(sql.WAIT_HISTORY, (self.pid, self._since)).fetchall()
        if rows:
            self._since = rows[-1][0]
        return [WaitSample(ts.timestamp(), self.pid, self.pid, "postgres", wait_type or "CPU", event or "CPU", "")
                for ts, wait_type, event in rows]

    def close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection has nothing to report
            pass


class WaitSampler:
    """Calls ``source.sample()`` at ``hz`` on a thread and passes the events to ``sink``."""

    def __init__(self, source: PgWaitSource, sink: Callable[[Event], None], hz: float = 20.0) -> None:
        self.source = source
        self.sink = sink
        self.period = 1.0 / hz
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pg-wait-sampler", daemon=True)
        self.error: str | None = None

    def start(self) -> "WaitSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        next_at = time.monotonic()
        while not self._stop.is_set():
            try:
                for ev in self.source.sample():
                    self.sink(ev)
            except Exception as exc:  # noqa: BLE001 - a thread reports, never raises
                self.error = f"wait sampling stopped: {str(exc).strip().splitlines()[0] if str(exc) else exc!r}"
                return
            next_at += self.period
            self._stop.wait(max(0.0, next_at - time.monotonic()))
