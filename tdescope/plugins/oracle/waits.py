"""Oracle's own wait events for one session, without the Diagnostics Pack.

Two views, as Tanel Poder's snapper and ASH take them:

- deltas: V$SESSION_EVENT and V$SESS_TIME_MODEL are cumulative per session;
  two snapshots a second apart give waits and time per event and per time
  model statistic over that second (:class:`SnapperDeltas`).
- state sampling: V$SESSION says what the session does right now (waiting on
  an event, or on CPU); sampled at >= 10 Hz it gives an ASH-like profile
  (:class:`OracleWaitSource`, one :class:`~tdescope.app.events.WaitSample` per sample).

'PGA memory operation' waits read from a 10046 trace become WaitSamples with
their p1/p2 sizes (:func:`pga_wait_samples`), since V$SESSION_EVENT keeps
only counts and times.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tdescope.app.events import Event, WaitSample
from tdescope.plugins.oracle._trace_records import TraceSummary

__all__ = [
    "ASH_SQL",
    "EVENTS_SQL",
    "TIME_MODEL_SQL",
    "DeltaRow",
    "OracleWaitSource",
    "SnapperDeltas",
    "SnapperReport",
    "ash_sample",
    "pga_wait_samples",
]

EVENTS_SQL = """\
select event, wait_class, total_waits, time_waited_micro
  from v$session_event where sid = :sid"""
TIME_MODEL_SQL = "select stat_name, value from v$sess_time_model where sid = :sid"
ASH_SQL = """\
select state, event, wait_class, p1, p2, p3, seq#, wait_time_micro, sql_id, status
  from v$session where sid = :sid"""


@dataclass(frozen=True, slots=True)
class DeltaRow:
    """One event (or time model statistic) over one interval."""

    name: str
    wait_class: str
    count: int
    time_us: int
    interval_s: float

    @property
    def percent(self) -> float:
        """Time as a percentage of the interval (snapper's "%Time")."""
        return 100.0 * self.time_us / (self.interval_s * 1e6) if self.interval_s > 0 else 0.0

    @property
    def avg_us(self) -> float:
        """Average wait, µs (0 for time model rows)."""
        return self.time_us / self.count if self.count else 0.0


@dataclass(frozen=True, slots=True)
class SnapperReport:
    """Deltas between two snapshots, biggest time first."""

    ts: float
    interval_s: float
    events: tuple[DeltaRow, ...]
    time_model: tuple[DeltaRow, ...]


class SnapperDeltas:
    """Keeps the previous snapshot and turns the next one into a :class:`SnapperReport`.

    Counters that go down (the session was replaced, or the SID reused) restart
    the baseline instead of giving negative deltas. Idle events are kept: a
    session waiting on 'SQL*Net message from client' is the client's time.
    """

    def __init__(self) -> None:
        self._prev: tuple[float, dict, dict] | None = None

    def update(self, ts: float, event_rows: Sequence[Sequence], time_model_rows: Sequence[Sequence]) -> SnapperReport | None:
        """Feed :data:`EVENTS_SQL` and :data:`TIME_MODEL_SQL` rows taken at ``ts``; None on the first call."""
        events = {str(e): (str(c or ""), int(n or 0), int(us or 0)) for e, c, n, us in event_rows}
        model = {str(name): int(value or 0) for name, value in time_model_rows}
        prev, self._prev = self._prev, (ts, events, model)
        if prev is None:
            return None
        t0, ev0, tm0 = prev
        interval = ts - t0
        if interval <= 0 or any(events.get(k, ("", 0, 0))[1] < v[1] for k, v in ev0.items()):
            return None  # restart: time went backwards or counters were reset
        ev_rows = []
        for name, (cls, n, us) in events.items():
            _, n0, us0 = ev0.get(name, (cls, 0, 0))
            if n - n0 or us - us0:
                ev_rows.append(DeltaRow(name, cls, n - n0, us - us0, interval))
        tm_rows = []
        for name, value in model.items():
            d = value - tm0.get(name, 0)
            if d > 0:
                tm_rows.append(DeltaRow(name, "Time Model", 0, d, interval))
        key = lambda r: (-r.time_us, r.name)  # noqa: E731
        return SnapperReport(ts, interval, tuple(sorted(ev_rows, key=key)), tuple(sorted(tm_rows, key=key)))


def ash_sample(row: Sequence, pid: int, ts: float) -> WaitSample:
    """One V$SESSION row (:data:`ASH_SQL` columns) as a WaitSample, ASH's way.

    STATE 'WAITING' means EVENT is the current wait; any 'WAITED ...' state
    means the last wait ended and the session is on CPU (or in a queue for it).
    """
    state, event, wait_class, p1, p2, p3, seq, wait_us, sql_id, status = row
    if state == "WAITING":
        detail = f"p1={p1} p2={p2} p3={p3} seq#={seq}"
        if sql_id:
            detail += f" sql_id={sql_id}"
        return WaitSample(ts, pid, pid, "oracle", str(wait_class or "Other"), str(event or "?"), detail)
    detail = f"last wait {event} ({wait_us} µs)" if event else ""
    if sql_id:
        detail = f"{detail} sql_id={sql_id}".strip()
    return WaitSample(ts, pid, pid, "oracle", "CPU", "ON CPU", detail)


def pga_wait_samples(summary: TraceSummary, pid: int, epoch_at_tim0: float | None = None) -> list[WaitSample]:
    """'PGA memory operation' waits of a parsed trace as WaitSamples carrying p1/p2.

    ``epoch_at_tim0`` maps trace ``tim`` (µs on an arbitrary clock) to epoch
    seconds: the first wait lands there. Without it, the waits are spread over
    their line order from time 0 (for showing, not for aligning).
    """
    ops = summary.pga_operations
    unit = summary.time_unit_us or 1
    tims = [op.tim for op in ops if op.tim is not None]
    base = min(tims) if tims else None
    out = []
    for i, op in enumerate(ops):
        if epoch_at_tim0 is not None and op.tim is not None and base is not None:
            ts = epoch_at_tim0 + (op.tim - base) * unit / 1e6
        else:
            ts = float(i)
        if op.kind == "release":
            detail = f"ela={op.ela_us} µs, p1=p2=p3=0 (munmap; size not reported)"
        elif op.p2:
            detail = f"ela={op.ela_us} µs, reserve p1={op.p1} B, map p2={op.p2} B"
        else:
            detail = f"ela={op.ela_us} µs, map p1={op.p1} B"
        out.append(WaitSample(ts, pid, pid, "oracle", "Other", "PGA memory operation", detail))
    return out


class OracleWaitSource:
    """ASH-like samples of one session, with snapper deltas taken at most once a second.

    Parameters
    ----------
    query : callable
        ``query(sql, sid=...) -> rows``, on a connection of its own (the
        sampled session is busy running the workload).
    sid, pid : int
        The sampled session and its server process (SPID).
    clock : callable
        Seconds; injectable so the 1 Hz rule is testable.
    """

    def __init__(self, query: Callable[..., Sequence], sid: int, pid: int, clock: Callable[[], float] = time.time,
                 delta_period_s: float = 1.0) -> None:
        self._query = query
        self.sid = sid
        self.pid = pid
        self._clock = clock
        self._period = delta_period_s
        self._next_delta = 0.0
        self.deltas = SnapperDeltas()
        self.last_report: SnapperReport | None = None

    def describe(self) -> str:
        """What each poll reads (the caller adds the rate)."""
        return f"V$SESSION of SID {self.sid}, and V$SESSION_EVENT / V$SESS_TIME_MODEL once a second"

    def sample(self) -> list[Event]:
        """One V$SESSION sample; every ``delta_period_s`` also a snapper snapshot (kept in :attr:`last_report`)."""
        now = self._clock()
        rows = self._query(ASH_SQL, sid=self.sid)
        out: list[Event] = [ash_sample(r, self.pid, now) for r in rows[:1]]
        if now >= self._next_delta:
            self._next_delta = now + self._period
            report = self.deltas.update(now, self._query(EVENTS_SQL, sid=self.sid),
                                        self._query(TIME_MODEL_SQL, sid=self.sid))
            if report is not None:
                self.last_report = report
        return out
