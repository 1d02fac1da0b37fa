"""The ``sql`` workload every SQL engine runs the same way: the user's statement, ``repeat`` times."""

from __future__ import annotations

import time
from collections.abc import Callable

from tdescope.app.engines.api import WorkloadControl
from tdescope.app.events import PhaseTiming, WorkloadResult

__all__ = ["repeat_sql"]


def repeat_sql(execute: Callable[[str], None], sql: str, repeat: int, control: WorkloadControl) -> WorkloadResult:
    """The user's SQL ``repeat`` times through ``execute`` (which fetches any rows and raises UserError in one
    line when the statement fails), stopping early on cancel: the ``sql`` workload of every SQL engine."""
    start, done = time.perf_counter(), 0
    for _ in range(repeat):
        if control.cancelled:
            break
        execute(sql)
        done += 1
    return WorkloadResult(time.time(), "sql", {"repeat": repeat}, (PhaseTiming("sql", "total", time.perf_counter() - start),),
                          {"sql": {"Executions": done}}, control.cancelled)
