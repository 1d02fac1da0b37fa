"""`record --ssh` notices its target's end from the host's process table, and only its end.

A PostgreSQL backend retitles itself with every statement (``postgres: app db [local] SELECT`` then
``... idle``): a row whose title changed is the same process, not "exited while armed" (a CI run caught
a recording of a busy backend ending as if the backend had died)."""

from __future__ import annotations

from tdescope.app.system.process_table import ProcRow
from tdescope.commands.record import _exit_watch_on


class _Client:
    def __init__(self, tables):
        self.tables = list(tables)

    def processes(self, pids=None):
        return self.tables.pop(0) if len(self.tables) > 1 else self.tables[0]


class _Agent:
    def __init__(self, tables):
        self.client = _Client(tables)
        self.label = "db1 via ssh"


def _watch(tables, monkeypatch):
    clock = iter(range(100, 1000))
    monkeypatch.setattr("tdescope.commands.record.time.monotonic", lambda: float(next(clock)))
    return _exit_watch_on(_Agent(tables), 42, [5])


def test_a_retitled_backend_has_not_exited(monkeypatch):
    exited = _watch([[ProcRow(42, 7, "postgres: app db [local] SELECT")],
                     [ProcRow(42, 7, "postgres: app db [local] idle")]], monkeypatch)
    assert exited() is None and exited() is None


def test_a_gone_or_reused_pid_has_exited(monkeypatch):
    gone = _watch([[ProcRow(42, 7, "postgres: app db [local] SELECT")], []], monkeypatch)
    assert gone() == "pid 42 exited while armed (5 pages captured)"
    reused = _watch([[ProcRow(42, 7, "postgres: app db [local] SELECT")], [ProcRow(42, 1, "bash")]], monkeypatch)
    assert reused() == "pid 42 exited while armed (5 pages captured)"
