"""Issue #25 item 2: an argument reference is a closed sum type, ``Read | Constant``, so a constant with a
register, or a read of a register and a stack slot at once, cannot be built; and every recipe of every engine
goes through the flat JSON form (gdb's helper's, the agent's wire) and back unchanged."""

from __future__ import annotations

import json
import typing

import pytest

from tdescope.app.engines.api import ArgRef, Constant, DebugArg, Deref, Read, Register, StackSlot
from tdescope.app.engines.argref import ref_fields, ref_of
from tdescope.app.engines.registry import discover_engines
from tdescope.app.remote import wire
from tdescope.app.remote.protocol import ProtocolError


def test_an_argument_reference_is_a_read_or_a_constant_and_nothing_else():
    assert set(typing.get_args(ArgRef)) == {Read, Constant}
    with pytest.raises(TypeError):
        Constant(8, register="rdi")  # the old four optionals: a constant with a register
    with pytest.raises(TypeError):
        Read(Constant(8))  # a constant is not a place to read
    with pytest.raises(TypeError):
        Read(Register("rdi"), Register("rsi"))  # one place, and a Deref where a dereference goes
    with pytest.raises(ValueError):
        Deref(0, width=3)
    with pytest.raises(ValueError):
        Deref(0, width=8, block_id=True)
    assert not hasattr(Constant(8), "offset") and not hasattr(Register("rdi"), "offset")


@pytest.mark.parametrize("fields, why", [
    ({"constant": 8, "register": "rdi"}, "constant"), ({"register": "rdi", "stack": 8}, "one register"),
    ({}, "one register"), ({"name": "in", "stack": 8}, "register only"), ({"register": "rdi", "width": 4}, "struct"),
    ({"register": "rdi", "colour": 1}, "unknown"), ({"constant": 8, "offset": 2}, "constant"),
])
def test_the_flat_form_of_an_impossible_reference_is_refused(fields, why):
    with pytest.raises(ValueError, match=why):
        ref_of(fields)
    with pytest.raises(ProtocolError, match="argument reference"):
        wire.recipe_of({"key": "k", "label": "l", "symbols": ["f"], "before": fields, "length": {"constant": 8}})


@pytest.mark.parametrize("ref, text", [
    (Read(DebugArg("in")), "in"), (Read(Register("rsi")), "$rsi"), (Read(StackSlot(8)), "[$rsp+8]"),
    (Read(Register("rdi"), offset=-26), "$rdi-26"), (Constant(8192), "8192"),
    (Read(DebugArg("pgno", "rdx")), "pgno / $rdx"), (Read(DebugArg("pgno", "rdx"), offset=4), "pgno+4 / $rdx+4"),
    (Read(Register("rdi"), Deref(8, width=4)), "u32[$rdi+8]"),
    (Read(Register("rdi"), Deref(8, width=4, block_id=True), offset=-1), "blockid[$rdi+8]-1"),
])
def test_descriptions_are_the_old_ones(ref, text):
    assert ref.describe() == text
    assert ref_of(ref_fields(ref)) == ref


def _every_recipe():
    for engine in discover_engines()[0].values():
        yield from engine.probe_recipes()


def test_every_recipe_survives_the_wire_and_the_helpers_json():
    recipes = list(_every_recipe())
    assert len(recipes) > 10
    for recipe in recipes:
        assert wire.recipe_of(json.loads(json.dumps(wire.recipe_fields(recipe)))) == recipe, recipe.key
        for ref in (recipe.before, recipe.after, recipe.length, recipe.pgno, recipe.context):
            if ref is not None:
                assert ref_of(json.loads(json.dumps(ref_fields(ref)))) == ref
