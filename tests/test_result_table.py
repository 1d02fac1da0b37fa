"""One result model, rendered twice (issue #25 item 3): the Workload dock and the report draw the same
:class:`ResultTable`, intervals are written by one function, and the report draws the session by the
window's own domain rules (side spans, hotspot self time)."""

from __future__ import annotations

import html
import re
from pathlib import Path

from tdescope.app.ab.result_table import Verdict, ab_table, interval_text, single_table
from tdescope.app.ab.runner import summarize
from tdescope.app.events import ABResult, HotspotWindow, PhaseTiming, RoundTime, WorkloadProgress, WorkloadResult
from tdescope.app.hotspots.profile import Profile
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.report.model import build_report, render_html
from tdescope.app.report.session_plots import hotspot_rows, timeline_lanes
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta
from tdescope.app.session.reader import SessionReader

T0 = 1_700_000_000.0
SOURCE = Path(__file__).resolve().parent.parent / "tdescope"


def _ab(ratios=(1.5, 1.4, 1.6, 1.45, 1.55)) -> ABResult:
    times = [RoundTime(0, "encrypted", {"total": 9.0}), RoundTime(0, "plain", {"total": 1.0})]
    for n, r in enumerate(ratios, 1):
        times += [RoundTime(n, "encrypted", {"total": r, "io": 2 * r}), RoundTime(n, "plain", {"total": 1.0, "io": 2.0})]
    return ABResult(T0, "ab_dml", "A/B DML", {}, len(ratios), 1, tuple(times), summarize(times),
                    "bootstrap 95 % interval of the median", "off")


def _recorded(path: Path, *events) -> Path:
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        for ev in events:
            rec.record(ev)
    return path


def test_intervals_are_written_by_one_function_only():
    """A hand-written ``{low:.2f}–{high:.2f}`` anywhere but :func:`interval_text` fails here."""
    by_hand = re.compile(r"f\}\s*[–-]\s*\{|\}\}\s*[–-]\s*\{\{")  # f-string and Jinja: "…f}–{…", "}}–{{"
    allowed = SOURCE / "app" / "ab" / "result_table.py"
    found = [f"{p.relative_to(SOURCE)}:{n}" for p in [*SOURCE.rglob("*.py"), *SOURCE.rglob("*.j2")] if p != allowed
             for n, line in enumerate(p.read_text().splitlines(), 1) if by_hand.search(line)]
    assert found == [], found
    assert interval_text(1.404, 1.6) == "1.40–1.60" and interval_text(1.0, 2.0, "×", 1) == "1.0–2.0×"


def test_cells_are_numbers_with_their_interval_and_verdict():
    table = ab_table(_ab())
    total = table.rows[0]
    assert total[0].value == "total" and total[3].value == 1.5 and total[3].unit == "×"
    assert (total[3].interval.low, total[3].interval.high) == (1.4, 1.6) and total[3].verdict is Verdict.COST
    assert table.text_rows()[0] == ("total", "1.500", "1.000", "1.50×", "1.40–1.60")
    assert table.ratio.text == "1.50×" and table.interval == "1.40–1.60"
    noisy = ab_table(_ab((0.8, 1.3, 0.9, 1.2, 1.0))).ratio
    assert noisy.verdict is Verdict.NO_CLEAR_COST
    one = single_table(WorkloadResult(T0, "w", {}, (PhaseTiming("encrypted", "total", 2.0),), {}))
    assert one.text_rows() == [("total", "2.000", "—", "—")] and one.ratio is None  # a side that did not run


def test_the_dock_and_the_report_render_the_same_cells(qtbot, tmp_path):
    from tdescope.ui.views.ab_results import ABResultsView

    result = _ab()
    view = ABResultsView()
    qtbot.addWidget(view)
    view.add(result)
    shown = [tuple(view.table.item(r, c).text() for c in range(view.table.columnCount()))
             for r in range(view.table.rowCount())]
    # the dock's header words are short (every column shows in a 450-px dock); its tooltips are the table's own
    header = tuple(view.table.horizontalHeaderItem(c).toolTip() for c in range(view.table.columnCount()))
    expected = ab_table(result)
    assert header == expected.header and shown == expected.text_rows()
    assert view.table.item(0, 3).toolTip() == "95 % interval 1.40–1.60×: cost"
    with SessionReader(_recorded(tmp_path / "ab.tds", result), writable=False) as reader:
        (table,) = build_report(reader).results
        page = html.unescape(render_html(build_report(reader)))
    assert table.header == expected.header and table.text_rows() == expected.text_rows()
    enc, plain, ratio, interval = expected.text_rows()[0][1:]
    assert (f'<td>total</td><td class="num">{enc}</td><td class="num">{plain}</td>'
            f'<td class="num" title="cost">{ratio}</td><td class="num">{interval}</td>') in page


def test_the_report_draws_the_window_spans_for_the_same_recording(tmp_path):
    """Report and window cut sides by one rule (``side_spans``), so they draw the same spans from one file."""
    progress = [WorkloadProgress(T0 + t, "ab_dml", side, done, 3) for t, side, done in
                [(0.0, "encrypted", 1), (0.5, "encrypted", 2), (3.5, "encrypted", 3),  # a 3-s step: still one run
                 (4.0, "plain", 1), (4.4, "plain", 2), (4.8, "plain", 3)]]
    with SessionReader(_recorded(tmp_path / "spans.tds", *progress), writable=False) as reader:
        lanes = timeline_lanes(reader, [], T0 + 10)
        events = list(reader.events(kinds=[WorkloadProgress]))
    window = ObservedRun()  # what the timeline dock draws, fed in batches as the pump delivers them
    window.add_progress(events[:2])
    window.add_progress(events[2:])
    drawn = {lane.name: list(lane.spans) for lane in lanes if lane.name.startswith("workload")}
    assert drawn == {f"workload {side}": [(s.start, s.end, s.side) for s in window.spans if s.side == side]
                     for side in ("encrypted", "plain")}
    assert len(drawn["workload encrypted"]) == 1  # a 2-s gap rule would have cut it in two


def test_the_report_hotspots_are_the_profile_top(tmp_path):
    """Self time is ``Profile.top``'s (ties broken by total, then name), not recomputed by the report."""
    stacks = {"main;work;zeta": 5, "main;alpha": 5, "main;work": 2}
    window = HotspotWindow(T0 + 1, T0, 1, stacks, {})
    with SessionReader(_recorded(tmp_path / "hot.tds", window), writable=False) as reader:
        report = build_report(reader)
    top = [r.symbol for r in hotspot_rows(Profile.from_windows([window]))]
    assert top == ["alpha", "zeta", "work"]  # insertion order would put zeta first
    svg = next(p for p in report.plots if p.name == "hotspots").svg
    assert [svg.index(f">{name}<") for name in top] == sorted(svg.index(f">{name}<") for name in top)


def test_the_matrix_panel_draws_the_ratios_as_numbers(qtbot):
    """The PostgreSQL panel's bars are the timings' ratios, not its table's one-decimal text read back."""
    from tdescope.plugins.postgres.panel import MatrixPanel
    from tdescope.plugins.postgres.workloads import matrix_table

    timings = (PhaseTiming("plain", "total", 0.03), PhaseTiming("aes128", "total", 0.1234),
               PhaseTiming("aes128 no-mdc", "total", 0.0987))
    result = WorkloadResult(T0, "matrix", {"rows": 1000}, timings, {})
    panel = MatrixPanel()
    qtbot.addWidget(panel)
    panel.show_result(result)
    (bars,) = [i for i in panel.plot.listDataItems() + panel.plot.getPlotItem().items if hasattr(i, "opts")
               and "height" in i.opts][:1]
    assert list(bars.opts["height"]) == [1.0, 0.1234 / 0.03, 0.0987 / 0.03]
    assert panel.table.item(1, 3).text() == "4.1" == matrix_table(result).rows[1][3].text
