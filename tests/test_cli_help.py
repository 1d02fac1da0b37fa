"""``--help`` works on the program and on every subcommand, found from the parser itself (issue #27, item 7).

argparse reads help text as a %-format: one stray ``%`` in a subcommand's one-line help made
``tdescope --help`` end in a traceback. A command added later is covered without editing this file.
"""

from __future__ import annotations

import argparse
import subprocess

import pytest

from conftest import TDESCOPE
from tdescope.cli import build_parser, main


def _command_paths(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every (sub)command's argv prefix, the program itself first, nested subcommands included."""
    paths = [prefix]
    for action in parser._actions:  # argparse has no public way to list subparsers
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths += _command_paths(sub, (*prefix, name))
    return paths


PATHS = _command_paths(build_parser())


def test_the_walk_finds_the_subcommands():
    """The walk is not vacuous: it reaches every headless command and a nested one (oracle's actions)."""
    assert {"record", "capture", "report", "gui", "doctor"} <= {p[0] for p in PATHS if p}
    assert any(len(p) == 2 and p[0] == "oracle" for p in PATHS)


def test_the_program_help_runs_as_a_user_runs_it():
    done = subprocess.run([*TDESCOPE, "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and "usage: tdescope" in done.stdout
    for name in ("capture", "record", "report", "ab"):
        assert name in done.stdout


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "tdescope")
def test_help_of_every_command(path, capsys):
    with pytest.raises(SystemExit) as ended:
        main([*path, "--help"])
    assert ended.value.code == 0
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("usage: tdescope")
