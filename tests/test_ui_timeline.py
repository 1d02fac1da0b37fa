"""The Timeline dock teaches: the axis shows activity, zooms to a run, never goes below 0, and notes
appear on it."""

from __future__ import annotations

from tdescope.app.events import Marker, WaitSample, WorkloadProgress
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.session.notes import Note, NoteTarget
from tdescope.ui.docks.timeline import TimelineDock

T0 = 1_700_000_000.0


def _run() -> ObservedRun:
    run = ObservedRun()
    # the window opened at T0 and sat idle for 500 s; then two 5-s runs, 60 s apart
    run.add_waits([WaitSample(T0, 1, 1, "os", "Idle", "idle")])
    for k, start in enumerate((500.0, 565.0), 1):
        run.add_markers([Marker(T0 + start, f"ab_dml run {k} start")])
        run.add_progress([WorkloadProgress(T0 + start + i, "ab_dml", "encrypted" if i < 3 else "plain", i, 5)
                          for i in range(1, 6)])
        run.add_captures([T0 + start + 0.5, T0 + start + 1.0])
        run.add_markers([Marker(T0 + start + 5.0, f"ab_dml run {k} end")])
    return run


def _dock(qtbot) -> TimelineDock:
    dock = TimelineDock(_run())
    qtbot.addWidget(dock)
    dock.resize(900, 220)
    dock.show()
    dock.refresh(force=True)
    qtbot.wait(20)
    return dock


def test_a_finished_run_is_what_the_axis_shows(qtbot):
    dock = _dock(qtbot)
    lo, hi = dock.plot.viewRange()[0]
    assert 560 < lo < 565 and 570 < hi < 575, (lo, hi)  # the last run, not 575 s of mostly idle time


def test_zoom_to_all_activity_skips_the_idle_start_and_time_never_goes_negative(qtbot):
    dock = _dock(qtbot)
    dock.zoom_all.click()
    lo, hi = dock.plot.viewRange()[0]
    assert 490 < lo < 500 and 570 < hi < 580, (lo, hi)
    dock.plot.setXRange(-50, 10, padding=0)
    assert dock.plot.viewRange()[0][0] >= 0
    dock.zoom_run.click()
    lo, hi = dock.plot.viewRange()[0]
    assert 560 < lo < 565 and 570 < hi < 575


def test_range_selection_starts_on_the_last_run(qtbot):
    dock = _dock(qtbot)
    dock.zoom_all.click()
    seen = []
    dock.rangeChanged.connect(seen.append)
    dock.filter.setChecked(True)
    start, end = seen[-1]
    assert (start - T0, end - T0) == (565.0, 570.0)


def test_notes_are_drawn_where_they_point(qtbot):
    dock = _dock(qtbot)
    notes = [Note(1, T0, T0, NoteTarget("capture", ts=T0 + 500.5, seq=1), "ciphertext of page 3"),
             Note(2, T0, T0, NoteTarget("range", ts=T0 + 566.0, ts_end=T0 + 568.0), "plain side")]
    dock.set_notes(notes)
    xs, _ = dock.notes.getData()
    assert list(xs) == [500.5, 566.0]
    assert [p.data() for p in dock.notes.points()] == ["ciphertext of page 3", "plain side"]
    dock.zoom_all.click()
    dock.set_notes([])
    assert len(dock.notes.getData()[0]) == 0


def test_labels_of_runs_and_sides_never_collide(qtbot):
    """Issue #23 item 5: runs' names sit in their own row above the sides' names; two runs starting
    close together do not write over each other."""
    run = _run()
    run.add_markers([Marker(T0 + 566.0, "lesson tde-dml-cost run 3 start"),
                     Marker(T0 + 566.2, "lesson block-before-after run 4 start")])
    dock = TimelineDock(run)
    qtbot.addWidget(dock)
    dock.resize(900, 220)
    dock.show()
    dock.refresh(force=True)
    dock.zoom_run.click()
    qtbot.wait(20)
    shown = [label for _x, label in dock._run_labels if label.isVisible()]
    sides = [label for label in dock._labels.used if label.isVisible()]
    assert shown and sides
    rects = [label.sceneBoundingRect() for label in shown + sides]
    for i, a in enumerate(rects):
        for b in rects[i + 1:]:
            assert not a.intersects(b), (a, b)
    assert not all(label.isVisible() for _x, label in dock._run_labels)  # the crowded one steps aside
