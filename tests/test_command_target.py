"""One ``--lab`` / ``--dsn`` / ``--pid`` resolution for every command, on the real SQLCipher lab."""

from __future__ import annotations

import argparse
import os

import pytest

from conftest import wait_for
from tdescope.app.engines import discover_engines
from tdescope.app.errors import UserError
from tdescope.commands._target import resolve_target

SQLCIPHER = discover_engines()[0]["sqlcipher"]


def _args(**given) -> argparse.Namespace:
    return argparse.Namespace(**{"lab": None, "dsn": None, "pid": None, "sql": None, "workload": None,
                                 "allow_critical": False, **given})


def _gone(pid: int) -> bool:
    """``pid`` has exited, within 10 s (gone, or a zombie)."""
    def ended() -> bool:
        try:
            return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"
        except FileNotFoundError:
            return True
    return wait_for(ended, timeout=10, interval=0.05, what=f"pid {pid}'s exit")


@pytest.mark.parametrize("workload, expected", [(None, "first"), ("cold_warm", "cold_warm")])
def test_the_lab_is_a_session_that_owns_its_target(workload, expected):
    target = resolve_target(_args(lab=True, workload=workload), SQLCIPHER)
    try:
        names = [w.name for w in target.session.workloads()]
        assert target.engine is SQLCIPHER and target.pid == target.session.server_pid()
        assert target.workload.name == (names[0] if expected == "first" else expected)
        assert target.params == target.workload.params and target.own_target is True
    finally:
        target.close()
    assert _gone(target.pid)


def test_a_pid_is_taken_as_it_is():
    target = resolve_target(_args(pid=os.getpid()), None)
    assert (target.engine, target.session, target.pid, target.workload, target.own_target) == (
        None, None, os.getpid(), None, False)
    target.close()


@pytest.mark.parametrize("given, message", [
    ({"pid": 999999}, "pid 999999 is gone (no such process)"),
    ({"lab": True, "workload": "nosuch"}, "sqlcipher has no workload 'nosuch' (has: "),
    ({"lab": True, "sql": "SELECT 1"}, "the sqlcipher engine cannot run --sql"),
])
def test_bad_targets_are_one_line_and_leave_no_lab_behind(given, message):
    before = _children()
    with pytest.raises(UserError) as err:
        resolve_target(_args(**given), SQLCIPHER)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)
    assert all(_gone(pid) for pid in _children() - before)


def _children() -> set[int]:
    """This test process's children (the lab worker would be one), alive or zombie."""
    out = set()
    for name in os.listdir("/proc"):
        try:
            if name.isdigit() and int(open(f"/proc/{name}/stat").read().rsplit(")", 1)[1].split()[1]) == os.getpid():
                out.add(int(name))
        except (OSError, IndexError, ValueError):
            continue
    return out
