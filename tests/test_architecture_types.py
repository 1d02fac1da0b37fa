"""The shape of the types (issue #25, items 1 and 2): words are Enums, growing dataclasses are built by
name, errors are told apart by class. Each test fails on a return of the old shape, and shows it can."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import tdescope
from tdescope.app.engines.api import ArgRef, ProbeRecipe
from tdescope.app.events import CaptureWindowState, Direction, PageCapture, PlaintextSide
from tdescope.app.probe.window import CaptureSummary

PACKAGE = Path(tdescope.__file__).parent


def _lines_matching(pattern: re.Pattern) -> list[str]:
    return [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if pattern.search(line)]


@pytest.mark.parametrize("cls", [CaptureWindowState, CaptureSummary])
def test_dataclasses_that_grow_optionals_are_built_by_name(cls):
    own = [f for f in dataclasses.fields(cls) if f.name != "ts"]  # Event.ts, the base's, stays positional
    assert own and all(f.kw_only for f in own), [f.name for f in own if not f.kw_only]
    with pytest.raises(TypeError):
        cls(*([0] * (len(own) + (cls is CaptureWindowState))))


def test_a_capture_without_plaintext_keeps_every_other_field():
    cap = PageCapture(1.0, 7, "mdread", "read", 3, b"in", b"out", 2.5, "postgres", "after", 1663, "relfilenode")
    bare = cap.without_plaintext()
    assert bare.after == b"" and bare.before == b"in"
    assert dataclasses.replace(bare, after=b"out") == cap  # nothing else moved


#: A capture's or a recipe's direction or plaintext side compared as a string.
_WORD_AS_TEXT = re.compile(r"""(direction|plaintext_side)\s*(==|!=|in|not in)\s*\(?\s*["']"""
                           r"""(decrypt|encrypt|read|copy|wait|marker|before|after|both)["']""")


def test_directions_and_sides_are_compared_as_enums_not_strings():
    assert _lines_matching(_WORD_AS_TEXT) == []
    assert _WORD_AS_TEXT.search('verb = "reads" if recipe.direction == "read" else "decrypts"')  # it can fail


def test_directions_and_sides_are_typed_when_built():
    cap = PageCapture(1.0, 1, "f", "encrypt", 1, b"p", b"c")
    assert type(cap.direction) is Direction and cap.plaintext_side is PlaintextSide.BEFORE
    recipe = ProbeRecipe("k", "l", ("f",), ArgRef(register="rdi"), ArgRef(constant=8), direction="read",
                         plaintext_side="")
    assert recipe.direction is Direction.READ and recipe.plaintext_side is None and recipe.side is PlaintextSide.BOTH
    assert f"{recipe.direction:>5}" == " read" and str(PlaintextSide.AFTER) == "after"
    with pytest.raises(ValueError):
        PageCapture(1.0, 1, "f", "decrypted", 1, b"", b"")
