"""A session tells a lost database connection from its driver's error by class, code or the connection's state
(issue #25, item 1: no words searched in a message), against real servers; a run then publishes a
LostConnection, which the window answers with Reconnect."""

from __future__ import annotations

import pytest

from tdescope.app.engines.api import ConnectParams
from tdescope.app.events import LostConnection, Problem
from tdescope.app.experiment import Experiment, WorkloadRun
from tdescope.plugins.postgres import ENGINE as POSTGRES


class _Raises:
    """A workload that runs one statement on ``conn``."""

    name = label = "one statement"

    def __init__(self, conn, sql: str) -> None:
        self.conn, self.sql = conn, sql

    def run(self, params, control):
        self.conn.execute(self.sql)


@pytest.fixture()
def pg_session(pg_cluster):
    session = POSTGRES.connect(ConnectParams(dsn=pg_cluster.dsn()))
    yield session
    session.close()


def _run(session, workload) -> list:
    events = []
    Experiment(session, "postgres", events.append, run=WorkloadRun(workload=workload, params={}),
               pid=session.server_pid()).start().wait(30)
    return [e for e in events if isinstance(e, Problem)]


def test_a_terminated_postgres_backend_is_a_lost_connection(pg_session, pg_cluster):
    pid = pg_session.conn.info.backend_pid
    pg_cluster.psql(f"SELECT pg_terminate_backend({pid})")
    problems = _run(pg_session, _Raises(pg_session.conn, "SELECT 1"))
    assert [type(p) for p in problems] == [LostConnection], problems


@pytest.mark.parametrize("sql", ["SET statement_timeout = 1; SELECT pg_sleep(1)", "SELECT * FROM no_such_table"])
def test_a_cancelled_or_failed_postgres_statement_is_not(pg_session, sql):
    problems = _run(pg_session, _Raises(pg_session.conn, sql))
    assert [type(p) for p in problems] == [Problem], problems
    assert not pg_session.conn.broken
