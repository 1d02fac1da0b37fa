"""A session file recorded before the typing pass (issue #25, items 1-2) replays, and re-recording what it
holds writes the same bytes: str-Enums and keyword-only dataclasses changed the code, not the file.

``data/recordings/before-types.tds`` was written by the code of commit c76cfd1 (one capture of every
direction kind, old empty ``plaintext_side``/``context_kind``, every window state, two problems, a result
that says its capture round the old way).
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from tdescope.app.events import CaptureWindowState, Direction, PageCapture, PlaintextSide, Problem, WorkloadResult
from tdescope.app.session import codec
from tdescope.app.session.reader import SessionReader

RECORDING = Path(__file__).parent / "data" / "recordings" / "before-types.tds"


@pytest.fixture()
def recording(tmp_path):
    path = tmp_path / "before-types.tds"
    shutil.copyfile(RECORDING, path)
    path.chmod(0o600)
    return path


def _stored(path) -> list[tuple[float, str, str]]:
    with sqlite3.connect(path) as con:
        return list(con.execute("SELECT ts, kind, payload FROM events ORDER BY id"))


def test_every_event_of_the_old_recording_replays(recording):
    with SessionReader(recording, writable=False) as reader:
        events = list(reader.events())
    assert [type(e).__name__ for e in events] == [kind for _, kind, _ in _stored(recording)]
    captures = [e for e in events if isinstance(e, PageCapture)]
    assert [c.seq for c in captures] == [1, 2, 3, 4, 5]
    assert captures[0].plaintext == captures[0].after and captures[1].plaintext == captures[1].before
    assert captures[2].where is not None and captures[2].where.value == 1663
    assert [e.state.value for e in events if isinstance(e, CaptureWindowState)] == ["armed", "paused", "disarmed"]
    assert next(e for e in events if isinstance(e, WorkloadResult)).capture_round
    assert len([e for e in events if isinstance(e, Problem)]) == 2


def test_recording_again_what_it_holds_writes_the_same_bytes(recording):
    with SessionReader(recording, writable=False) as reader:
        events = list(reader.events())
    again = [(e.ts, codec.encode(e).kind, codec.encode(e).payload) for e in events]
    # the one change: an old capture's unsaid plaintext side ("") is said once read (a read: both sides;
    # a decrypting call that returned: its output); every capture recorded since says it already
    said = {"mdread": "both", "pgp_cfb_decrypt": "after"}
    expected = [(ts, kind, payload.replace('"plaintext_side":""', f'"plaintext_side":"{side}"'))
                for ts, kind, payload in _stored(recording)
                for side in [next((v for k, v in said.items() if f'"symbol":"{k}"' in payload), "")]]
    assert again == expected
    assert sum('"plaintext_side":""' in payload for _, _, payload in _stored(recording)) == 2


def test_the_words_read_back_are_typed(recording):
    with SessionReader(recording, writable=False) as reader:
        captures = list(reader.events(kinds=[PageCapture]))
    assert [c.direction for c in captures] == [Direction.DECRYPT, Direction.ENCRYPT, Direction.READ,
                                               Direction.DECRYPT, Direction.MARKER]
    assert all(type(c.direction) is Direction and type(c.plaintext_side) is PlaintextSide for c in captures)
    assert [f"{c.plaintext_side}" for c in captures] == ["after", "before", "both", "after", "both"]
    assert f"{captures[2].direction:<6}|" == "read  |" and str(captures[0].direction) == "decrypt"
