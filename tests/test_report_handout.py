"""The report as a class handout (issue #23 items 13-14): each run is named for what ran, and the captures
shown are the ones the notes and lesson cards point to, then one per kind of page, each saying why."""

from __future__ import annotations

import html
import os
import sqlite3

import pytest

from tdescope.app.engines import discover_engines
from tdescope.app.events import LessonCard, PageCapture, PhaseTiming, WaitSample, WorkloadProgress, WorkloadResult
from tdescope.app.report.model import build_report, render_html
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta
from tdescope.app.session.notes import NoteStore, NoteTarget
from tdescope.app.session.reader import SessionReader

T0 = 1_700_000_000.0
COLD_WARM = "Cold vs warm read (seed 002)"


def _pages(tmp_path) -> list[bytes]:
    """The pages of a real SQLite file: a header page, table and index interiors and leaves."""
    path = tmp_path / "plain.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA page_size = 4096")
        db.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
        db.execute("CREATE INDEX t_v ON t(v)")
        db.executemany("INSERT INTO t(v) VALUES (?)", [(f"abc_{i:06d}" * 4,) for i in range(3000)])
    data = path.read_bytes()
    return [data[i:i + 4096] for i in range(0, len(data), 4096)]


@pytest.fixture
def lesson_session(tmp_path):
    """A free run, then a lesson whose card cites capture #40, with 60 captures of real pages."""
    pages = _pages(tmp_path)
    path = tmp_path / "lesson.tds"
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(WorkloadResult(T0 + 1, "ab_dml", {}, (PhaseTiming("encrypted", "total", 3.0),
                                                         PhaseTiming("plain", "total", 2.0)), {}, label="A/B DML"))
        rec.record(WorkloadProgress(T0 + 2, "lesson:block-before-after", "lesson", 1, 3, "capturing"))
        for seq in range(1, 61):
            pgno = 1 + (seq * 7) % len(pages)
            rec.record(PageCapture(T0 + 3 + seq * 0.01, seq, "sqlcipher_page_cipher", "decrypt", pgno,
                                   os.urandom(4096), pages[pgno - 1], 20.0, "sqlcipher"))
        rec.record(WorkloadResult(T0 + 4, "cold_warm", {}, (), {}, table=(("", "cold (ms)", "warm (ms)"),
                                                                          ("encrypted", "9.1", "0.5")),
                                  label=COLD_WARM))
        rec.record(LessonCard(T0 + 5, "block-before-after", "Block before and after decryption", "sqlcipher",
                              "q", "seed 003", ("p",), ("o",), "same direction", "t", figures={"seq": 40}))
    store = NoteStore(path)
    store.add(NoteTarget("capture", ts=T0 + 3 + 0.55, seq=55), "look at this one")
    store.close()
    return path


def test_a_lessons_runs_are_named_for_the_lesson(lesson_session):
    with SessionReader(lesson_session, writable=False) as reader:
        report = build_report(reader, discover_engines()[0]["sqlcipher"].page_decoder())
    titles = [t.title for t in report.results]
    assert any(t.startswith("A/B DML") for t in titles), titles  # a free run keeps its own name
    lesson = [t for t in titles if COLD_WARM in t]
    assert lesson and lesson[0].startswith("Lesson “Block before and after decryption”: its run of " + COLD_WARM)


def test_the_captures_shown_are_the_cited_ones_then_one_per_kind_of_page(lesson_session):
    decoder = discover_engines()[0]["sqlcipher"].page_decoder()
    with SessionReader(lesson_session, writable=False) as reader:
        report = build_report(reader, decoder, max_captures=4)
        wide = build_report(reader, decoder, max_captures=20)
    seqs = [int(c.title.split("#")[1].split(":")[0]) for c in report.captures]
    why = {s: c.why for s, c in zip(seqs, report.captures)}
    assert why[40] == "the lesson card “Block before and after decryption” cites it"
    assert why[55] == "a note points to it"
    others = [c for s, c in zip(seqs, report.captures) if s not in (40, 55)]
    assert 1 <= len(others) <= 4 and all(c.why.startswith("the first ") for c in others)
    kinds = [c.page_type for c in others]
    assert len(set(kinds)) == len(kinds), kinds  # one per kind of page, not the first four captures
    assert {c.page_type for c in wide.captures} > {c.page_type for c in report.captures} or len(wide.captures) > 4
    assert "those the notes and lesson cards point to" in report.captures_note and "--captures N" in report.captures_note
    page = render_html(report)
    assert "Shown: the lesson card “Block before and after decryption” cites it." in page
    assert html.unescape(report.captures_note) in html.unescape(page)


def test_a_note_made_from_a_lesson_card_keeps_its_table_and_verdict(lesson_session):
    """Issue #23 item 15: "Add card to notes" writes the card's text; the report shows it as the card
    (verdict, published beside ours), and any other note keeps its line breaks."""
    with SessionReader(lesson_session, writable=False) as reader:
        card = next(iter(reader.events(kinds=[LessonCard])))
    store = NoteStore(lesson_session)
    store.add(NoteTarget("range", ts=T0 + 2, ts_end=T0 + 5), card.text())
    store.add(NoteTarget("free"), "first line\nsecond line")
    store.close()
    with SessionReader(lesson_session, writable=False) as reader:
        report = build_report(reader)
    page = render_html(report)
    notes = page[page.index("<h2>Notes</h2>"):]
    assert "the lesson card “Block before and after decryption”" in notes
    assert "<th>Published</th><th>Ours</th>" in notes and "<b>same direction</b>: t" in notes
    assert "white-space: pre-wrap" in notes and "first line\nsecond line" in notes


def test_the_timeline_figure_is_cropped_to_what_happened(tmp_path):
    """Issue #23 item 16: ten minutes idle, then a 6-s run: the figure shows the run, not 10 minutes."""
    import re
    import time as _time

    path = tmp_path / "idle.tds"
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(WaitSample(T0, 1, 1, "os", "Idle", "idle"))  # the window opened; samplers ran from then
        rec.record(WorkloadProgress(T0 + 600.0, "ab_dml", "encrypted", 1, 2))
        rec.record(WorkloadProgress(T0 + 603.0, "ab_dml", "plain", 2, 2))
        rec.record(WorkloadProgress(T0 + 606.0, "ab_dml", "plain", 2, 2))
    with SessionReader(path, writable=False) as reader:
        report = build_report(reader)
    plot = next(p for p in report.plots if p.name == "timeline")
    clocks = re.findall(r">(\d\d:\d\d:\d\d)</text>", plot.svg)
    # a side's span starts a step before its first event (side_spans, as the window draws it), then a pad
    first = _time.strftime("%H:%M:%S", _time.localtime(T0 + 600.0 - 5))
    assert clocks and min(clocks) >= first, clocks  # the axis starts at the run, not at the idle start
    assert "Shown:" in plot.caption and "where something happened" in plot.caption


@pytest.mark.parametrize("name", ["handout.html", "handout.pdf"])
def test_a_report_file_is_private_like_the_session_it_shows(qapp, lesson_session, tmp_path, name):
    """DESIGN: every file holding captured bytes (sessions, dumps, reports) is 0600, whatever the umask;
    a report shows capture bytes (masked plaintext, but ciphertext and structure) and notes. (``qapp``: the
    PDF is drawn in this process, by the QApplication the widget tests share.)"""
    import os
    import stat

    from tdescope.commands.report import export

    out = tmp_path / name
    old = os.umask(0o022)
    try:
        export(lesson_session, out)
    finally:
        os.umask(old)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    out.write_bytes(b"")
    out.chmod(0o644)  # an existing file is not widened either: written again, it is 0600
    export(lesson_session, out)
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
