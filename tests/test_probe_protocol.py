"""The probe protocol as tables: frames -> captures and notices, spec -> JSON, exact helper commands,
window state transitions; and the gdb-side helper's writer read back by the workbench's reader.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from tdescope.app.engines.api import Constant, DebugArg, ProbeRecipe, Read, Register
from tdescope.app.events import CaptureWindowState
from tdescope.app.gdb.mi import check_command
from tdescope.app.probe import frames as frames_module
from tdescope.app.probe.backend import Armed, Closed, Happened, TargetNews
from tdescope.app.probe.frames import Frame, FrameKind, Notice, notice_of, pack, pack_notice, unpack
from tdescope.app.probe.gdb_backend import HELPER, arm_command, disarm_command, resume_command, source_command
from tdescope.app.probe.limits import StopLimits
from tdescope.app.probe.spec import ProbeSpec
from tdescope.app.probe.spool import REORDER_S, FramePairs, SpoolReader
from tdescope.app.probe.stats import EbpfStats, GdbStats
from tdescope.app.probe.window import TRANSITIONS, CaptureLimits, CaptureWindow, Phase
from tdescope.plugins.sqlcipher.engine import DECRYPT, ENCRYPT


#: The context the "before" frames carry (a relation OID, a cipher context's address): the capture keeps it.
CTX = 0x7F00_1234_5678


def _before(seq, data, pgno=7, busy=100.0):
    return pack(FrameKind.BEFORE, seq, pgno, CTX, data, busy, ts=float(seq))


def _after(seq, data, busy=50.0):
    return pack(FrameKind.AFTER, seq, -1, -1, data, busy, ts=float(seq) + 0.5)


# -- frames -> captures and notices ------------------------------------------------

@pytest.mark.parametrize("entry_only, stream, captures, closed, paused_for, busy_s", [
    # a pair makes one capture, stamped with the "before" frame's time and page, charged both stops
    (False, [_before(1, b"C1"), _after(1, b"P1")], [(1, 1.0, 7, b"C1", b"P1", 150.0, CTX)], None, None, 0.0),
    # pairs by seq, in any order of return, and out in seq order (issue #27, item 13)
    (False, [_before(1, b"a"), _before(2, b"b"), _after(2, b"B"), _after(1, b"A")],
     [(1, 1.0, 7, b"a", b"A", 150.0, CTX), (2, 2.0, 7, b"b", b"B", 150.0, CTX)], None, None, 0.0),
    # an "after" with no "before" is dropped; a "before" alone waits
    (False, [_after(9, b"x"), _before(3, b"c")], [], None, None, 0.0),
    # an entry-only recipe: a "before" frame is a whole capture
    (True, [_before(4, b"d", pgno=-1)], [(4, 4.0, -1, b"d", b"", 100.0, CTX)], None, None, 0.0),
    # the call never returned (out of scope): an empty "after" still completes the pair
    (False, [_before(5, b"e"), _after(5, b"")], [(5, 5.0, 7, b"e", b"", 150.0, CTX)], None, None, 0.0),
    # notices: closed at a limit, paused by the stop budget, the running stopped time
    (False, [pack_notice(Notice.WINDOW_CLOSED, reason="hit rate")], [], "limit: hit rate", None, 0.0),
    (False, [pack_notice(Notice.PAUSED, resume_in=2.5, busy_s=0.03)], [], None, 2.5, 0.03),
    (False, [pack_notice(Notice.BUSY, busy_s=0.2), pack_notice(Notice.BUSY, busy_s=0.1)], [], None, None, 0.2),
    (False, [pack_notice(Notice.DISARMED, captures=3, completed=3, busy_s=0.4)], [], None, None, 0.4),
    # notices that change nothing here
    (False, [pack_notice(Notice.RETURN_SITE, address=0x401000), pack_notice(Notice.RESUMED),
             pack_notice(Notice.PROBE_ERROR, message="x")], [], None, None, 0.0),
])
def test_frames_make_captures_and_notices(entry_only, stream, captures, closed, paused_for, busy_s):
    pairs = FramePairs(lambda *a: a, entry_only=entry_only)
    frames, used = unpack(b"".join(stream))
    assert used == sum(map(len, stream))
    assert list(pairs.drain(frames, limit=100)) == captures
    busy = pairs.stats.busy_s if pairs.stats is not None else 0.0
    assert (pairs.closed_reason, pairs.paused_for, busy) == (closed, paused_for, busy_s)
    assert pairs.stats is None or isinstance(pairs.stats, GdbStats)  # gdb's helper's counts, from its notices


def test_each_backend_has_its_stats_type_and_ebpf_sends_no_frame_to_itself():
    """Issue #25 item 2: eBPF's counters were packed into a JSON notice frame, in the same process, for the
    pairs to unpack into a dict; now the window reads them (``read_stats``) as EbpfStats."""
    import inspect

    from tdescope.app.probe.ebpf import backend as ebpf

    assert "Notice.BUSY" not in inspect.getsource(ebpf)
    pairs = FramePairs(lambda *a: a, entry_only=False)
    pairs.count(None)
    assert pairs.stats is None and pairs.stopped_total_s == 0.0
    pairs.count(EbpfStats(busy_s=0.5, hits=9, lost=2, ring_size=4096))
    assert (pairs.stats.hits, pairs.stats.lost, pairs.stopped_total_s) == (9, 2, 0.5)
    assert pairs.stats.ring_size == 4096 and GdbStats().lost == 0


def test_the_capture_limit_holds_and_partial_frames_wait(tmp_path):
    path = tmp_path / "spool.bin"
    stream = b"".join(_before(i, b"p" * 10) for i in range(1, 6))
    path.write_bytes(stream[:-3])  # the last frame half written
    reader = SpoolReader(path)
    pairs = FramePairs(lambda *a: a[0], entry_only=True)
    assert list(pairs.drain(reader.frames(), limit=3)) == [1, 2, 3]
    with open(path, "ab") as fh:
        fh.write(stream[-3:])
    assert list(pairs.drain(reader.frames(), limit=3)) == []  # frames 4 and 5 arrive, over the limit
    assert pairs.captures == 3 and reader.frames() == []
    reader.close()


@pytest.mark.parametrize("notice", list(Notice))
def test_every_notice_round_trips(notice):
    (frame,), _ = unpack(pack_notice(notice, n=1))
    assert frame.kind is FrameKind.NOTICE and notice_of(frame) == (notice, {"n": 1})


def test_an_unknown_notice_is_not_an_error():
    (frame,), _ = unpack(pack(FrameKind.NOTICE, 0, -1, -1, b'{"event": "from-the-future"}', 0.0))
    assert notice_of(frame) == (None, {})


def test_the_gdb_helper_writes_what_the_reader_reads(tmp_path):
    """Both ends for real: gdb's own Python loads the helper, which loads frames.py by path and
    writes every kind of frame; the workbench's SpoolReader reads them back."""
    spool = tmp_path / "spool.bin"
    script = tmp_path / "write.py"
    script.write_text(
        "_State.spool = open(%r, 'ab', buffering=0)\n"
        "_write(BEFORE, 1, 7, 0, b'\\x00before', 12.5)\n"
        "_write(AFTER, 1, 7, 0, b'after\\xff', 3.0)\n"
        "for n in Notice: _notice(n, k=n.value)\n"
        "print('FRAMES', _frames.__file__)\n" % str(spool)
    )
    out = subprocess.run(["gdb", "-batch", "-nx", "-ex", f"source {HELPER}", "-ex", f"source {script}"],
                         capture_output=True, text=True, timeout=60)
    assert "FRAMES" in out.stdout, out.stdout + out.stderr
    helper_frames = out.stdout.split("FRAMES", 1)[1].strip()
    assert os.path.samefile(helper_frames, frames_module.__file__)  # one definition, both sides
    got = SpoolReader(spool).frames()
    assert [(f.kind, f.seq, f.pgno, f.data, f.busy_us) for f in got[:2]] == [
        (FrameKind.BEFORE, 1, 7, b"\x00before", 12.5), (FrameKind.AFTER, 1, 7, b"after\xff", 3.0)]
    assert [notice_of(f) for f in got[2:]] == [(n, {"k": n.value}) for n in Notice]


# -- spec -> JSON ------------------------------------------------------------------------

NAMED = ProbeRecipe("t.named", "named", ("f", "g"), before=Read(DebugArg("in")), length=Constant(16),
                    after=Read(DebugArg("out")), pgno=Read(DebugArg("pgno", "rdx")))
PENDING = ProbeRecipe("t.lib", "lib", ("EVP_DecryptUpdate",), before=Read(Register("rcx")),
                      length=Read(Register("r8")), library="libcrypto", max_length=8192)


@pytest.mark.parametrize("recipe, address, expected", [
    (DECRYPT, 0x7F00, {"symbols": ["sqlcipher_page_cipher"], "at_entry": True, "address": 0x7F00,
                       "before": {"name": None, "register": "r9", "constant": None, "stack": None, "offset": 0},
                       "after": {"name": None, "register": None, "constant": None, "stack": 8, "offset": 0},
                       "condition": [{"name": None, "register": "rcx", "constant": None, "stack": None, "offset": 0}, 0],
                       "allow_pending": False}),
    (ENCRYPT, None, {"at_entry": True, "address": None,
                     "condition": [{"name": None, "register": "rcx", "constant": None, "stack": None, "offset": 0}, 1]}),
    (NAMED, None, {"symbols": ["f", "g"], "at_entry": False, "condition": None,
                   "length": {"name": None, "register": None, "constant": 16, "stack": None, "offset": 0},
                   "pgno": {"name": "pgno", "register": "rdx", "constant": None, "stack": None, "offset": 0}}),
    (PENDING, None, {"at_entry": True, "allow_pending": True, "after": None, "pgno": None, "max_length": 8192}),
])
def test_spec_json(recipe, address, expected, tmp_path):
    limits = CaptureLimits(max_captures=5, max_seconds=9, max_hits_per_s=77,
                           stops=StopLimits(max_busy_fraction=0.5, max_burst_s=0.5))
    spec = ProbeSpec.of(recipe, limits, address)
    data = spec.to_json()
    assert {k: data[k] for k in expected} == expected
    assert {k: data[k] for k in ("max_captures", "max_seconds", "duty", "burst_s", "max_hits_per_s", "spool")} == {
        "max_captures": 5, "max_seconds": 9, "duty": 0.5, "burst_s": 0.5, "max_hits_per_s": 77, "spool": None}
    spec.write(str(tmp_path / "spec.json"))
    assert json.loads((tmp_path / "spec.json").read_text()) == data


def test_spec_json_carries_a_base_adjustment():
    """MariaDB's decrypt call gets src 26 bytes into the page: the helper reads $rdi-26."""
    from tdescope.plugins.mariadb.recipes import recipes

    data = ProbeSpec.of(recipes()[0], CaptureLimits()).to_json()
    assert data["before"] == {"name": None, "register": "rdi", "constant": None, "stack": None, "offset": -26}
    assert data["pgno"] == {"name": None, "register": None, "constant": None, "stack": 16, "offset": 0}


# -- the exact console commands ---------------------------------------------------------

@pytest.mark.parametrize("command, expected", [
    (arm_command("/tmp/tdescope-probe-x/spec.json"), 'python _tdescope_probe.arm("/tmp/tdescope-probe-x/spec.json")'),
    (resume_command(), "python _tdescope_probe.resume()"),
    (disarm_command(), "python _tdescope_probe.disarm()"),
    (source_command(), f"source {HELPER}"),
])
def test_helper_commands_are_exact_and_pass_the_guard(command, expected):
    assert command == expected
    quoted = command.replace("\\", "\\\\").replace('"', '\\"')
    check_command(f'-interpreter-exec console "{quoted}"')  # raises when the guard refuses it


def test_arm_wants_an_absolute_path():
    with pytest.raises(ValueError):
        arm_command("spec.json")


# -- window states -----------------------------------------------------------------------

@pytest.mark.parametrize("start, end", [(a, b) for a in Phase for b in Phase])
def test_transitions(start, end):
    window = CaptureWindow(os.getpid(), NAMED, CaptureLimits(), "t", lambda c: None)
    window.phase = start
    if end in TRANSITIONS[start]:
        window._enter(end)
        assert window.phase is end
    else:
        with pytest.raises(RuntimeError):
            window._enter(end)


class ScriptedHandle:
    """A probe handle that plays a script back: per turn of the window, frame bytes and what the target did."""

    def __init__(self, symbol, turns):
        self.armed = Armed(symbol, ("0x1000",))
        self.arming_stop_s = 0.001
        self.turns = [list(t) + [None] * (2 - len(t)) for t in turns]
        self.calls: list[str] = []

    def start(self):
        self.calls.append("start")

    def read_stats(self):
        return None  # like gdb's: its counts come as notice frames

    def frames(self) -> list[Frame]:
        if not self.turns:
            return []
        data, self.turns[0][0] = self.turns[0][0], b""
        return unpack(data)[0]

    def resume(self):
        self.calls.append("resume")

    def poll(self, timeout):
        time.sleep(timeout)
        return self.turns.pop(0)[1] if self.turns else None

    def disarm(self):
        self.calls.append("disarm")

    def close(self):
        self.calls.append("close")
        return Closed()


class ScriptedBackend:
    name = "scripted"
    stops_target = False  # it plays a script: nothing is stopped (a stopping one is refused on a many-threaded pid)

    def __init__(self, handle):
        self.handle = handle

    def attach(self, pid, spec):
        assert spec.symbols == ("f", "g") and spec.max_captures == 2
        return self.handle


PAIR1, PAIR2 = _before(1, b"a") + _after(1, b"A"), _before(2, b"b") + _after(2, b"B")
EXIT = (b"", TargetNews(Happened.TARGET_EXITED))


@pytest.mark.parametrize("symbol, turns, states, reason, calls", [
    ("f", [(PAIR1,), (PAIR2,)], ["armed", "disarmed"], "limit: max captures", ["start", "disarm", "close"]),
    ("f", [(pack_notice(Notice.PAUSED, resume_in=0.01),), (b"",), (b"",), (PAIR1 + PAIR2,)],
     ["armed", "paused", "armed", "disarmed"], "limit: max captures", ["start", "resume", "disarm", "close"]),
    ("f", [(pack_notice(Notice.WINDOW_CLOSED, reason="hit rate"),)], ["armed", "disarmed"], "limit: hit rate",
     ["start", "disarm", "close"]),
    ("f", [(b"", TargetNews(Happened.SIGNAL_PASSED, "passed a SIGINT on to pid 1")), (PAIR1 + PAIR2,)],
     ["armed", "armed", "disarmed"], "limit: max captures", ["start", "disarm", "close"]),
    ("f", [(b"", TargetNews(Happened.STALLED, "watchdog: target stopped over 250 ms"))], ["armed", "disarmed"],
     "watchdog: target stopped over 250 ms", ["start", "disarm", "close"]),
    ("f", [(PAIR1,), EXIT], ["armed", "failed"], "target exited", ["start", "disarm", "close"]),
    (None, [], ["failed"], "error", ["disarm", "close"]),  # armed nothing: never started, still closed
])
def test_window_runs_a_backend_through_its_states(symbol, turns, states, reason, calls):
    handle = ScriptedHandle(symbol, turns)
    seen: list[CaptureWindowState] = []
    captures = []
    window = CaptureWindow(os.getpid(), NAMED, CaptureLimits(max_captures=2, max_seconds=5), "t", captures.append,
                           seen.append, backend=ScriptedBackend(handle))
    summary = window.run()
    assert [s.state for s in seen] == states
    assert summary.reason == reason and handle.calls == calls
    assert window.phase is (Phase.FAILED if states[-1] == "failed" else Phase.DONE) and not window.armed.is_set()
    if reason == "limit: max captures":
        assert [(c.seq, c.before, c.after) for c in captures] == [(1, b"a", b"A"), (2, b"b", b"B")]
    if reason == "target exited":
        assert summary.error == f"pid {os.getpid()} exited while armed (1 pages captured)"
    if symbol is None:
        assert summary.error == f"pid {os.getpid()} does not use t: symbol f or g not found"


def test_a_call_still_out_holds_later_captures_until_it_returns_or_the_window_ends():
    pairs = FramePairs(lambda *a: a[0], entry_only=False)
    frames, _ = unpack(_before(1, b"a") + _before(2, b"b") + _before(3, b"c") + _after(3, b"C") + _after(2, b"B"))
    assert list(pairs.drain(frames, limit=100)) == []  # 1 is still out: 2 and 3 wait
    frames, _ = unpack(_after(1, b"A"))
    assert list(pairs.drain(frames, limit=100)) == [1, 2, 3]
    frames, _ = unpack(_before(4, b"d") + _before(5, b"e") + _after(5, b"E"))
    assert list(pairs.drain(frames, limit=100)) == []
    assert list(pairs.drain([], limit=100, final=True)) == [5]  # 4 never returned: 5 is not lost


def test_a_call_that_never_returns_holds_nothing_for_long():
    pairs = FramePairs(lambda *a: a[0], entry_only=False)
    stale = pack(FrameKind.BEFORE, 1, 7, 0, b"a", 1.0, ts=10.0)
    later = [pack(FrameKind.BEFORE, 2, 7, 0, b"b", 1.0, ts=10.5 + REORDER_S),
             pack(FrameKind.AFTER, 2, 7, 0, b"B", 1.0, ts=10.6 + REORDER_S)]
    frames, _ = unpack(stale + b"".join(later))
    assert list(pairs.drain(frames, limit=100)) == [2]


def test_a_call_that_never_returns_holds_nothing_for_long_even_when_no_frame_follows(monkeypatch):
    """The probe's count reached, nothing more arrives: probe time stands still, time here does not."""
    import tdescope.app.probe.spool as spool

    now = [1000.0]
    monkeypatch.setattr(spool.time, "monotonic", lambda: now[0])
    pairs = FramePairs(lambda *a: a[0], entry_only=False)
    frames, _ = unpack(_before(1, b"a") + _before(2, b"b") + _after(2, b"B"))
    assert list(pairs.drain(frames, limit=100)) == []  # 1 is still out: 2 waits
    now[0] += REORDER_S - 0.1
    assert list(pairs.drain([], limit=100)) == []
    now[0] += 0.2
    assert list(pairs.drain([], limit=100)) == [2]
