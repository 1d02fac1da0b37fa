"""Seed 000's A/B DML loop is written once (tdescope/app/engines/ab_dml.py) and run by every engine's
workload: here on the SQLCipher lab's real tables (plain sqlite3 files standing in for both sides)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import tdescope
from tdescope.app.engines.ab_dml import PHASES
from tdescope.plugins.sqlcipher.workloads import ab_dml

PLUGINS = Path(tdescope.__file__).parent / "plugins"


def _sides(tmp_path):
    return {side: sqlite3.connect(tmp_path / f"{side}.db") for side in ("encrypted", "plain")}


def test_the_loop_times_every_phase_and_counts_every_row(tmp_path):
    progress = []
    out = ab_dml(_sides(tmp_path), {"groups": 4, "ids_per_group": 25, "cache_pages": 50}, progress.append,
                 lambda: False)
    assert not out["cancelled"]
    for side in ("encrypted", "plain"):
        assert list(out["timings"][side]) == [*PHASES, "total"]
        assert out["counts"][side] == {"Insert": 100, "Delete": 50, "Update": 50, "Select": 50}
    assert [(p["side"], p["done"]) for p in progress] == [(s, g) for s in ("encrypted", "plain") for g in (1, 2, 3, 4)]


def test_a_cancel_inside_a_group_rolls_that_group_back_and_stops_the_run(tmp_path):
    sides = _sides(tmp_path)
    asked = iter([False] * 4 + [True] * 100)  # group 1 whole (3 checks) and group 2 begun; true after its insert
    out = ab_dml(sides, {"groups": 4, "ids_per_group": 10, "cache_pages": 50}, lambda _ev: None,
                 lambda: next(asked))
    assert out["cancelled"] and list(out["counts"]) == ["encrypted"]  # the plain side never ran
    assert out["counts"]["encrypted"]["Insert"] == 20  # group 2's insert ran, then rolled back
    # group 1 inserted 10 and deleted them; group 2's 10 rows went with its rollback
    assert sides["encrypted"].execute("SELECT count(*) FROM test_tab").fetchone()[0] == 0
    assert sides["encrypted"].execute("SELECT count(*) FROM test_tab WHERE grp = 2").fetchone()[0] == 0


def test_no_engine_writes_the_loop_again():
    """The three workloads that ran seed 000 each had the loop (phase dict, group loop, commit timing):
    they run run_ab_dml now; a copy coming back fails here."""
    loop = re.compile(r"dict\.fromkeys\(\(\s*\"insert\", \"delete\"|for g in range\(1, groups \+ 1\)")
    users = []
    for path in sorted(PLUGINS.rglob("*.py")):
        text = path.read_text()
        assert not loop.search(text), f"{path.relative_to(PLUGINS)} writes seed 000's loop again"
        if "run_ab_dml(" in text:
            users.append(path.relative_to(PLUGINS).as_posix())
    assert users == ["mariadb/workloads.py", "postgres/workloads.py", "sqlcipher/workloads.py"]
    assert loop.search('phase = dict.fromkeys(("insert", "delete", "update"), 0.0)')  # the check can fail
