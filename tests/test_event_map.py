"""The closed event map: every event class is in it, and a session file cannot name anything else."""

from __future__ import annotations

import dataclasses
import importlib
import json
import pkgutil
import sqlite3
import subprocess
import sys
import typing

import pytest

import tdescope
from tdescope.app import events
from tdescope.app.events import EVENT_TYPES, Event, Marker, WaitSample
from tdescope.app.session import codec
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta


#: Not importable here: the CLI entry runs on import, the probe helper runs inside gdb.
_NOT_IMPORTED = ("tdescope.__main__", "tdescope.app.gdb._probe_helper")


def _all_modules():
    for info in pkgutil.walk_packages(tdescope.__path__, "tdescope."):
        if not info.name.startswith("tdescope.ui") and info.name not in _NOT_IMPORTED:
            importlib.import_module(info.name)


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def test_every_event_class_in_tdescope_is_in_the_map():
    _all_modules()
    found = {}
    for cls in _subclasses(Event):
        # slots=True dataclasses replace their class: count the one its module exports
        if getattr(sys.modules[cls.__module__], cls.__qualname__, None) is cls and cls.__module__.startswith("tdescope"):
            found[cls.__name__] = cls
    assert found and all(EVENT_TYPES.get(name) is cls for name, cls in found.items()), set(found) - set(EVENT_TYPES)


def test_nested_dataclasses_are_in_the_map():
    nested = set()
    for cls in EVENT_TYPES.values():
        hints = typing.get_type_hints(cls, vars(events))
        for hint in hints.values():
            for arg in typing.get_args(hint) or (hint,):
                if dataclasses.is_dataclass(arg):
                    nested.add(arg)
    assert nested and all(EVENT_TYPES.get(c.__name__) is c for c in nested)


def test_the_map_is_closed():
    with pytest.raises(TypeError):
        EVENT_TYPES["system"] = object  # type: ignore[index]


@pytest.fixture()
def hostile_file(tmp_path):
    path = tmp_path / "hostile.tds"
    with SessionRecorder(path, SessionMeta()) as rec:
        rec.record(Marker(1.0, "start"))
        rec.record(WaitSample(2.0, 1, 1, "os", "CPU", "running"))
    con = sqlite3.connect(path)
    rows = [
        (3.0, "os.system", json.dumps({"command": "touch /tmp/pwned"})),
        (3.1, "system", json.dumps({"command": "touch /tmp/pwned"})),
        (3.2, "Popen", json.dumps({"args": ["sh"]})),
        (3.3, "Event", json.dumps({})),
        (3.4, "__class__", json.dumps({})),
        (3.5, "EVENT_TYPES", json.dumps({})),
        (3.6, "NoSuchEventYet", json.dumps({"x": 1})),
        (3.7, "Marker", json.dumps({"label": "nested", "extra": {"p": {"__dc__": "os.system", "command": "x"}}})),
        (3.8, "Marker", json.dumps(["not", "an", "object"])),
    ]
    con.executemany("INSERT INTO events (ts, kind, payload) VALUES (?, ?, ?)", rows)
    modules = {"system": "os", "Popen": "subprocess", "NoSuchEventYet": "tdescope.app.doctor"}
    con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('event_modules', ?)", (json.dumps(modules),))
    con.commit()
    con.close()
    return path


def test_a_file_naming_other_classes_decodes_to_nothing_harmful(hostile_file):
    with SessionReader(hostile_file) as reader:
        got = list(reader.events())
        skipped = dict(reader.skipped)
    assert [type(e).__name__ for e in got] == ["Marker", "WaitSample", "Marker"]
    assert got[2].extra == {"p": {"command": "x"}}  # unknown nested name: plain data, no object
    assert skipped == {"os.system": 1, "system": 1, "Popen": 1, "Event": 1, "__class__": 1, "EVENT_TYPES": 1,
                       "NoSuchEventYet": 1, "Marker": 1}


def test_reading_a_file_imports_nothing_it_names(hostile_file):
    probe = ("import sys; from tdescope.app.session.reader import SessionReader; "
             f"r = SessionReader({str(hostile_file)!r}); list(r.events()); "
             "print(sorted(m for m in ('tdescope.app.doctor', 'subprocess') if m in sys.modules))")
    before = subprocess.run([sys.executable, "-c", "import sys, tdescope.app.session.file; "
                             "print(sorted(m for m in ('tdescope.app.doctor', 'subprocess') if m in sys.modules))"],
                            capture_output=True, text=True, timeout=60, check=True).stdout
    after = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True).stdout
    assert after == before


@pytest.mark.parametrize("kind", ["os.system", "system", "getattr", "Event", "", "HotspotLeaves.__init__"])
def test_event_class_knows_only_the_map(kind):
    assert codec.event_class(kind) is None


@pytest.mark.parametrize("name", sorted(EVENT_TYPES))
def test_event_class_finds_each_mapped_class(name):
    assert codec.event_class(name) is EVENT_TYPES[name]
