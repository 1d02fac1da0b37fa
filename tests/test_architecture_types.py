"""The shape of the types (issue #25, items 1 and 2): words are Enums, growing dataclasses are built by
name, errors are told apart by class. Each test fails on a return of the old shape, and shows it can."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

import tdescope
from tdescope.app.engines.api import Constant, ProbeRecipe, Read, Register
from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import CaptureWindowState, Direction, LostConnection, PageCapture, PlaintextSide, Problem
from tdescope.app.experiment import Experiment, WorkloadRun
from tdescope.app.probe.backend import Happened
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
    recipe = ProbeRecipe("k", "l", ("f",), Read(Register("rdi")), Constant(8), direction="read",
                         plaintext_side="")
    assert recipe.direction is Direction.READ and recipe.plaintext_side is None and recipe.side is PlaintextSide.BOTH
    assert f"{recipe.direction:>5}" == " read" and str(PlaintextSide.AFTER) == "after"
    with pytest.raises(ValueError):
        PageCapture(1.0, 1, "f", "decrypted", 1, b"", b"")


#: An error told apart by its words: a list of words searched in a message, or a message searched for a phrase
#: that names a kind of failure. Reading a foreign program's output (ssh's stderr, perf's, Oracle's trace
#: files) is parsing, not this; those modules are not in this list.
_ERROR_BY_WORDS = re.compile(r"""any\(\s*w in low for w in _LOST\)|["'](connection lost|exited while armed)["']\s+"""
                             r"""(not )?in\s+(message|why|text|str\()""")


def test_errors_are_told_apart_by_class_not_by_their_words():
    """Issue #25 item 1: a lost connection is a ConnectionLost (raised) or a LostConnection (published), a
    target's exit is ``CaptureSummary.target_exited``; no module looks for them in a message."""
    assert _lines_matching(_ERROR_BY_WORDS) == []
    assert _ERROR_BY_WORDS.search('if self.error is None or (source == "capture" and "exited while armed" in message):')
    assert _ERROR_BY_WORDS.search('return why if "connection lost" in why else f"{self.dest}: lost ({why})"')
    assert _ERROR_BY_WORDS.search("    return any(w in low for w in _LOST)")


class _Session:
    """A session whose driver's errors are all 'connection gone' when ``gone``."""

    own_target = False

    def __init__(self, gone: bool) -> None:
        self.gone = gone

    def server_pid(self) -> int:
        return 1

    def connection_lost(self, exc: BaseException) -> bool:
        return self.gone


class _Workload:
    name = label = "w"

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def run(self, params, control):
        raise self.exc


@pytest.mark.parametrize("exc, gone, lost", [
    (ConnectionLost("connection lost: the agent exited"), False, True),
    (UserError("connection lost: said in words only"), False, False),  # words are not a class
    (OSError("server closed the connection unexpectedly"), True, True),  # the session tells, by its rule
    (OSError("server closed the connection unexpectedly"), False, False),
])
def test_a_run_says_a_lost_connection_by_class(exc, gone, lost):
    events = []
    exp = Experiment(_Session(gone), "fake", events.append, run=WorkloadRun(workload=_Workload(exc), params={}), pid=1)
    exp.start().wait(10)
    assert [type(e) for e in events] == [LostConnection if lost else Problem]
    assert isinstance(events[0], Problem)  # a LostConnection is a Problem: the CLIs print it the same way


def test_the_targets_exit_wins_over_what_follows_it_by_what_ended_the_window():
    exited = CaptureSummary(captures=2, reason=Happened.TARGET_EXITED.value, armed_symbol="f", locations=(),
                            stopped_s=0.0, elapsed_s=1.0, error="pid 7 exited while armed (2 pages captured)",
                            ended_by=Happened.TARGET_EXITED)
    assert exited.target_exited and not CaptureSummary.failed("no symbol f").target_exited
    assert CaptureSummary.failed("gone", lost=True).lost
    words_only = dataclasses.replace(exited, ended_by=None)  # the reason's words are for people, not for code
    assert not words_only.target_exited


#: A summary's reason compared with a backend's words, or its counters and guard report read as dicts.
_SUMMARY_AS_TEXT = re.compile(r"""reason\s*(==|!=)\s*Happened\.|\.(counters|guard)(\[|\.get\(| or \{\})""")


def test_a_summarys_counters_guard_and_ending_are_typed():
    """Issue #25 item 2: ``CaptureSummary.counters`` is a :class:`WindowCounts` holding the backend's own
    stats type, ``guard`` a :class:`GuardReport`, and what ended the window a :class:`Happened`."""
    from tdescope.app.gdb.guard import GuardReport
    from tdescope.app.probe.stats import EbpfStats, GdbStats, WindowCounts

    types = {f.name: f.type for f in dataclasses.fields(CaptureSummary)}
    assert (types["counters"], types["guard"], types["ended_by"]) == (
        "WindowCounts | None", "GuardReport | None", "Happened | None")
    assert {f.name: f.type for f in dataclasses.fields(WindowCounts)}["probe"] == "GdbStats | EbpfStats"
    assert dataclasses.is_dataclass(GuardReport) and dataclasses.is_dataclass(EbpfStats) and GdbStats().lost == 0
    assert _lines_matching(_SUMMARY_AS_TEXT) == []
    assert _SUMMARY_AS_TEXT.search('return self.reason == Happened.TARGET_EXITED.value')  # the check can fail
    assert _SUMMARY_AS_TEXT.search('counters = s.counters or {}') and _SUMMARY_AS_TEXT.search('s.counters["hits"]')


def test_capture_limits_hold_no_gdb_only_knob():
    """Issue #25 item 2: the stop budget, the watchdog and ``accept_stop`` are gdb's alone, in ``limits.stops``."""
    from tdescope.app.probe.limits import CaptureLimits, StopLimits, stop_budget

    gdb_only = {"max_busy_fraction", "max_burst_s", "watchdog_s", "accept_stop"}
    assert {f.name for f in dataclasses.fields(CaptureLimits)} & gdb_only == set()
    assert {f.name for f in dataclasses.fields(StopLimits)} == gdb_only
    assert isinstance(CaptureLimits().stops, StopLimits) and isinstance(stop_budget(False), StopLimits)
    with pytest.raises(TypeError):
        CaptureLimits(max_busy_fraction=0.5)
    assert stop_budget(True, 0.2, accept_stop=True) == StopLimits(max_busy_fraction=0.2, max_burst_s=0.5,
                                                                   accept_stop=True)
    assert stop_budget(False) == StopLimits() and stop_budget(False, accept_stop=True).accept_stop


def test_what_every_engine_reads_of_a_connection_is_declared_not_an_option():
    """Issue #25 item 1: ``lab``, ``prompt``, ``pid`` and ``allow_critical`` are ConnectParams fields; the
    options (each engine's own settings) refuse them, so the old shape fails where it is built."""
    from tdescope.app.engines.api import ConnectParams

    params = ConnectParams(dsn="host=db1", pid=42, allow_critical=True, options={"port": 5433})
    assert (params.lab, params.pid, params.allow_critical, params.prompt) == (False, 42, True, None)
    for key in ("lab", "prompt", "pid", "allow_critical"):
        with pytest.raises(TypeError, match=f"say it as ConnectParams\\({key}="):
            ConnectParams(options={key: True})
    with pytest.raises(TypeError):
        ConnectParams("host=db1")  # by name: it grows


#: Issue #25 leftovers: an A/B side, the total phase, a cold/warm scan, a lesson's verdict, a window's end, a
#: note's kind, the window's recording mode, layout or teaching view, or an entropy verdict compared as a
#: string (or a verdict spelled as one), where a Side, a PhaseName, a LessonVerdict, an EndReason or a
#: Happened, a NoteKind, a RecordingMode, an Arrangement or a TeachingView, or a Randomness is the word.
_LEFTOVER_WORDS = re.compile(
    r"""(==|!=|\bin|\bnot in)\s*\(?\s*\{?["'](encrypted|plain|total|cold|warm|cancelled|failed|cannot run"""
    r"""|live|idle|replay|pages|compact|medium|looks \w+|too short to judge)["']"""
    r"""|kind\s*(==|!=|in|not in)\s*\(?\s*["'](capture|bytes|hotspot|symbol|wait|range|free)["']"""
    r"""|\{\s*["']encrypted["'],\s*["']plain["']\s*\}\s*<="""
    r"""|["'](same direction|no comparison|inconclusive)["']"""
    r"""|Happened\.\w+\.value|_reason\s*=\s*["'](error|timeout|cancelled|limit: max \w+)["']""")


def test_sides_phases_verdicts_and_window_ends_are_words_of_their_enums():
    """The words stay the same in JSON, recordings and text (str-valued Enums); only the comparisons and
    the spelling moved into ``Side``/``PhaseName``, ``LessonVerdict`` and ``EndReason``/``Happened``."""
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             if path.relative_to(PACKAGE).as_posix() not in ("app/events/lessons.py",)  # where the words are spelled
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if _LEFTOVER_WORDS.search(line) and not line.lstrip().startswith("#")]
    assert found == []
    for old in ('if row[0].value == "total" or x:', 'index = 0 if ev.side == "encrypted" else 1',
                'if {"encrypted", "plain"} <= set(w.sides):', 'card.verdict not in ("cannot run", "cancelled")',
                'SAME, DIFFERENT = "same direction", "different"', 'return self.reason == Happened.TARGET_EXITED.value',
                'self._reason = "timeout"', 'if set(spans) != {"cold", "warm"}:', 'if t.kind == "bytes":',
                'if self.mode != "live":', 'if view == "pages":', 'if kind == "compact":',
                'elif judged in ("too short to judge", "empty"):'):
        assert _LEFTOVER_WORDS.search(old), old  # the check can fail


def test_the_words_read_back_the_same_and_typed():
    from tdescope.app.events import LessonCard, LessonVerdict, PhaseName, PhaseTiming, Side, WorkloadResult
    from tdescope.app.lessons import verdicts as analyses
    from tdescope.app.probe.backend import EndReason
    from tdescope.app.session.codec import decode, encode

    card = LessonCard(1.0, "l", "L", "sqlcipher", "q?", "seed", ("p",), ("o",), LessonVerdict.SAME, "why")
    enc = encode(card)
    assert '"verdict":"same direction"' in enc.payload  # the file's words did not change
    back = decode(enc.kind, enc.ts, enc.payload, {})
    assert back == card and back.verdict is LessonVerdict.SAME  # and a card read back is typed
    assert "Verdict: same direction: why" in card.text()
    assert {type(v) for v in (analyses.SAME, analyses.DIFFERENT, analyses.INCONCLUSIVE, analyses.NO_COMPARISON)} == {
        LessonVerdict}
    with pytest.raises(ValueError):
        LessonCard(1.0, "l", "L", "e", "q", "s", (), (), "maybe", "")  # not a verdict
    result = WorkloadResult(1.0, "w", {}, (PhaseTiming("encrypted", "total", 2.0), PhaseTiming(Side.PLAIN, PhaseName.TOTAL, 1.0)), {})
    assert result.total(Side.ENCRYPTED) == 2.0 and result.ratio() == 2.0
    assert encode(result).payload.count('"total"') == 2
    assert f"{EndReason.MAX_SECONDS}" == "limit: max seconds" and Happened.TARGET_EXITED == "target exited"
    summary = CaptureSummary(captures=0, reason="target exited", armed_symbol=None, locations=(), stopped_s=0.0,
                             elapsed_s=0.0, ended_by=Happened.TARGET_EXITED)  # as the agent's wire brings it back
    assert summary.target_exited
    assert not dataclasses.replace(summary, ended_by=None).target_exited  # the words alone say nothing
