"""PostgreSQL's own wait events for one backend: pg_stat_activity (or pg_wait_sampling) sampled.

Sampling runs on its own connection so the sampled backend is never the one
answering. A backend that is active with no wait event is on CPU; pg_stat_activity
says so only by leaving ``wait_event`` NULL.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from tdescope.app.events import Event, WaitSample

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

    def __init__(self, conn, pid: int) -> None:
        self.conn = conn
        self.pid = int(pid)
        has_sampling = conn.execute(
            "SELECT count(*) FROM pg_extension WHERE extname = 'pg_wait_sampling'").fetchone()[0]
        self.via = "pg_wait_sampling" if has_sampling else "pg_stat_activity"
        self._lock = threading.Lock()

    def follow(self, pid: int) -> None:
        """Sample ``pid`` from the next sample on (the session's target changed)."""
        with self._lock:
            self.pid = int(pid)

    def sample(self) -> list[Event]:
        """Take one sample; a few hundred µs on a local server."""
        with self._lock:
            if self.via == "pg_wait_sampling":
                row = self.conn.execute(
                    "SELECT w.event_type, w.event, a.state FROM pg_wait_sampling_current(%s) w "
                    "LEFT JOIN pg_stat_activity a ON a.pid = w.pid", (self.pid,)).fetchone()
            else:
                row = self.conn.execute(
                    "SELECT wait_event_type, wait_event, state FROM pg_stat_activity WHERE pid = %s",
                    (self.pid,)).fetchone()
        if row is None:
            return []
        wait_type, event, state = row
        return [WaitSample(time.time(), self.pid, self.pid, "postgres", wait_type or "CPU",
                           event or ("CPU" if state == "active" else (state or "unknown")), state or "")]

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
