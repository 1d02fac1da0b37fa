"""What a replay's seek costs the GUI thread, kept bounded: a batch of events is drawn once, never once
per event, and the hour's thousands of hotspot windows are not recounted on each redraw (issue #25, item 5).
The stall figures themselves are bench_seek's and bench_gui's (bench/)."""

from __future__ import annotations

from PySide6.QtCore import QEvent, QObject, Qt

from tdescope.app.events import HotspotWindow, PhaseTiming, WorkloadProgress, WorkloadResult
from tdescope.app.hotspots import profile
from tdescope.app.observe.observed import ObservedRun
from tdescope.ui.docks.timeline import TimelineDock, window_brush
from tdescope.ui.docks.workload import WorkloadDock

T0 = 1_700_000_000.0


def _result(k: int) -> WorkloadResult:
    return WorkloadResult(T0 + k, "ab_dml", {"groups": 4},
                          (PhaseTiming("encrypted", "total", 1.5), PhaseTiming("plain", "total", 1.0)), {})


def test_a_batch_of_results_is_drawn_once_and_the_last_is_shown(qtbot, monkeypatch):
    dock = WorkloadDock()
    qtbot.addWidget(dock)
    view = dock.results
    drawn = []
    real = view.show_single
    monkeypatch.setattr(view, "show_single", lambda r: (drawn.append(r), real(r)))
    batch = [_result(k) for k in range(100)]
    dock.show_results(batch)
    assert drawn == [batch[-1]]  # one chart for the hundred runs a seek brings, not a hundred
    assert view.runs() == batch and view.history.count() == 100 and view.history.currentIndex() == 99
    assert dock.progress.value() == 100 and dock.status.text().startswith("Done")
    dock.show_results([_result(100)])  # one more: drawn too
    assert drawn[-1].ts == T0 + 100 and view.history.currentIndex() == 100
    view.history.setCurrentIndex(3)  # picking an older run still shows it
    assert drawn[-1] is batch[3]


class _Paints(QObject):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        self.n += event.type() == QEvent.Type.Paint
        return False


def test_progress_is_set_at_once_and_drawn_with_the_next_frame(qtbot):
    dock = WorkloadDock()
    qtbot.addWidget(dock)
    dock.show()
    qtbot.waitExposed(dock)
    paints = _Paints()
    dock.progress.installEventFilter(paints)
    dock.show_progress([WorkloadProgress(T0, "ab_dml", "encrypted", 1, 4, "group 1/4")])
    assert dock.progress.value() == 12 and dock.progress.updatesEnabled()
    qtbot.waitUntil(lambda: paints.n > 0)  # and it is drawn


def test_windows_are_counted_once_as_they_arrive_not_on_each_redraw(qtbot, monkeypatch):
    run = ObservedRun()
    wins = [HotspotWindow(T0 + s + 1, T0 + s, 1, {"main;f;AES_encrypt": 30, "main;g": 10}, {}) for s in range(50)]
    run.add_windows(wins)
    assert run.window_crypto == [75.0] * 50
    dock = TimelineDock(run)
    qtbot.addWidget(dock)
    counted = []
    real = profile.Profile.from_stacks
    monkeypatch.setattr(profile.Profile, "from_stacks",
                        classmethod(lambda cls, *a, **k: (counted.append(1), real(*a, **k))[1]))
    dock.refresh(force=True)
    dock.refresh(force=True)
    assert counted == []
    assert dock._win_brushes == [window_brush(75.0)] * 50 and window_brush(75.0) is window_brush(75.9)
    assert window_brush(-1) is window_brush(0) and window_brush(250) is window_brush(100)
    run.clear()
    assert run.window_crypto == []


def test_a_seek_back_hides_the_timeline_items_and_draws_with_them_again(qtbot, monkeypatch):
    from tdescope.app.events import Marker

    run = ObservedRun()
    for k in range(20):
        run.add_markers([Marker(T0 + 10 * k, f"ab_dml run {k} start"), Marker(T0 + 10 * k + 5, f"ab_dml run {k} end")])
        run.add_progress([WorkloadProgress(T0 + 10 * k + i, "ab_dml", "encrypted" if i < 3 else "plain", i, 5)
                          for i in range(1, 6)])
    dock = TimelineDock(run)
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh(force=True)
    lines, labels = dock._marker_lines.used, dock._labels.used
    assert len(lines) == 40 and len(dock._run_labels) == 20 and labels
    removed = []
    monkeypatch.setattr(dock.plot, "removeItem", removed.append)
    dock.reset()  # a replay seeking back
    assert removed == [] and not any(item.isVisible() for item in lines + labels)
    added = []
    monkeypatch.setattr(dock.plot, "addItem", added.append)
    run.clear()
    for k in range(10):  # fed again, up to the new play head
        run.add_markers([Marker(T0 + 10 * k, f"ab_dml run {k} start"), Marker(T0 + 10 * k + 5, f"ab_dml run {k} end")])
    dock.refresh(force=True)
    assert added == [] and dock._marker_lines.used == lines[:20]  # the same items, shown again
    assert [line.value() for line in dock._marker_lines.used[:2]] == [0.0, 5.0]
    assert not any(line.isVisible() for line in lines[20:])


def test_wait_spans_are_bars_of_one_brush_per_class_and_captures_are_appended(qtbot, monkeypatch):
    from tdescope.app.events import WaitSpan, WaitSpans

    run = ObservedRun()
    classes = ("Sync", "File I/O", "Idle")
    run.add_spans([WaitSpans(T0 + 1, 7, tuple(WaitSpan(T0 + i / 100, 0.001, 7, classes[i % 3], "x")
                                             for i in range(300)))])
    run.add_captures([T0 + i / 10 for i in range(50)])
    dock = TimelineDock(run)
    qtbot.addWidget(dock)
    dock.refresh(force=True)
    bars = dock.wait_spans.items
    assert sorted(bars) == ["File I/O", "Sync"]  # Idle left out
    # one brush per item: Qt draws its bars in one call (a brush per bar was drawn from Python, bar by bar)
    assert all(item.opts["brushes"] is None and len(item.opts["x0"]) == 100 for item in bars.values())
    assert len(dock.captures.data) == 50
    set_data = []
    monkeypatch.setattr(dock.captures, "setData", lambda *a, **k: set_data.append(a))
    run.add_spans([WaitSpans(T0 + 4, 7, (WaitSpan(T0 + 3.5, 0.01, 7, "Sync", "fsync"),))])
    run.add_captures([T0 + 6.0])
    dock.refresh()
    assert len(bars["Sync"].opts["x0"]) == 101 and bars["Sync"].opts["x0"][-1] == 3.5
    assert set_data == [] and len(dock.captures.data) == 51  # the new point appended, not all made again
    monkeypatch.undo()
    dock.reset()
    assert all(len(item.opts["x0"]) == 0 for item in bars.values()) and len(dock.captures.data) == 0


def test_the_live_hotspot_table_drops_and_adds_symbols_without_a_reset(qtbot, qtmodeltester):
    from tdescope.app.hotspots.profile import SymbolStat
    from tdescope.ui.models.hotspots import HotspotModel, SymbolFilter

    def stat(sym: str, pct: float) -> SymbolStat:
        return SymbolStat(sym, "/lib/libx.so", 1, 1, pct, pct)

    model, proxy = HotspotModel(lambda _s: ""), SymbolFilter()
    proxy.setSourceModel(model)
    proxy.sort(3, Qt.SortOrder.DescendingOrder)
    resets = []
    model.modelReset.connect(lambda: resets.append(1))
    model.set_rows([stat(s, p) for s, p in zip("abcdef", (6, 5, 4, 3, 2, 1))])
    model.set_rows([stat(s, p) for s, p in zip("fgbe", (9, 8, 7, 1))])  # a, c, d gone; g new; the rest moved
    assert resets == []  # a reset re-sorted and re-filtered all 300 rows of a storm's table, 10 times a second
    assert [r.symbol for r in model.rows] == ["f", "g", "b", "e"] and model.row_of("g") == 1  # kept in the sort order
    assert [proxy.index(i, 0).data() for i in range(proxy.rowCount())] == ["f", "g", "b", "e"]
    assert model.rows[model.row_of("f")].total_pct == 9
    qtmodeltester.check(model)


def test_the_hotspot_table_is_sorted_in_python_once_per_refresh_not_by_the_proxy_per_comparison(qtbot):
    from tdescope.app.hotspots.profile import SymbolStat
    from tdescope.ui.docks.hotspots import MAX_ROWS, _table
    from tdescope.ui.models.hotspots import SORT_ROLE, HotspotModel, SymbolFilter

    model, proxy = HotspotModel(lambda _s: ""), SymbolFilter()
    view = _table(model, proxy)
    qtbot.addWidget(view)
    view.sortByColumn(3, Qt.SortOrder.DescendingOrder)  # as the dock does (a header click calls the same)
    asked = []
    real = model.data
    model.data = lambda index, role=Qt.ItemDataRole.DisplayRole: (asked.append(role), real(index, role))[1]
    rows = [SymbolStat(f"f{k}", "/lib/x.so", k, k, (k * 37) % 100 / 1.0, (k * 53) % 100 / 1.0) for k in range(MAX_ROWS)]
    model.set_rows(rows)
    model.set_rows([SymbolStat(r.symbol, r.dso, r.self_samples, r.total_samples, r.self_pct, (r.total_pct * 7) % 100)
                    for r in rows])  # every row's total changes: a storm's refresh
    assert asked.count(SORT_ROLE) == 0  # the proxy no longer asks per comparison (~5,000 calls a refresh)
    shown = [proxy.index(i, 3).data(SORT_ROLE) for i in range(proxy.rowCount())]
    assert shown == sorted(shown, reverse=True) and len(shown) == MAX_ROWS
    view.selectRow(0)
    top = proxy.index(0, 0).data()
    model.set_rows([SymbolStat(r.symbol, r.dso, r.self_samples, r.total_samples, r.self_pct,
                               -1.0 if r.symbol == top else r.total_pct) for r in model.rows])
    selected = view.selectionModel().selectedRows()
    assert [i.data() for i in selected] == [top] and selected[0].row() == MAX_ROWS - 1  # the selection followed it
    view.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # a header click: by symbol
    names = [proxy.index(i, 0).data() for i in range(proxy.rowCount())]
    assert names == sorted(names)


def test_while_the_pump_catches_up_the_observation_docks_are_redrawn_one_at_a_time(qtbot, monkeypatch):
    from PySide6.QtWidgets import QMainWindow

    from tdescope.ui.gui_thread.event_pump import EventPump
    from tdescope.ui.gui_thread.tasks import TaskRunner
    from tdescope.ui.window import observation as observation_module
    from tdescope.ui.window.observation import ObservationController

    class _Engine:
        name = label = "test"

        def glossary(self):
            return {}

    pump, tasks, parent = EventPump(), TaskRunner(), QMainWindow()
    qtbot.addWidget(parent)
    obs = ObservationController(_Engine(), pump.put, pump, tasks, parent)
    obs.timer.stop()
    drawn = []
    for dock in obs.docks:
        monkeypatch.setattr(dock, "refresh", lambda force=False, d=dock: drawn.append(d))
        monkeypatch.setattr(dock, "isVisible", lambda: True)
    monkeypatch.setattr(observation_module, "CATCH_UP_REFRESH_S", 0.0)
    for _ in range(1000):  # a backlog: a replay seeking
        pump.put(object())
    assert pump.catching_up
    for _ in range(6):
        obs.refresh()
    assert len(drawn) == 6 and set(drawn[:3]) == set(obs.docks) and drawn[3:] == drawn[:3]  # in turn, one each time
    pump.discard()
    drawn.clear()
    obs.refresh()
    assert drawn == [obs.docks[0]]  # caught up: all of them, each in its own turn of the event loop
    qtbot.waitUntil(lambda: len(drawn) == 3)
    assert sorted(map(id, drawn)) == sorted(map(id, obs.docks))
    obs.shutdown()
    tasks.shutdown()
    pump.stop()


def test_a_window_published_from_a_producer_thread_is_counted_by_the_pump_not_on_that_thread(qtbot, qsettings,
                                                                                             monkeypatch):
    """Counting a window's stacks on the producer's thread (a replay's feeder) was tried and measured: the
    feeder then held the GIL the GUI thread waits for, and bench_seek's p99 stall went from 120 ms to
    155-228 ms. Python work belongs on the GUI thread in the pump's budget, or in another process."""
    import threading

    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow

    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    counted_on = []
    real = profile.Profile.from_stacks
    monkeypatch.setattr(profile.Profile, "from_stacks",
                        classmethod(lambda cls, *a, **k: (counted_on.append(threading.get_ident()), real(*a, **k))[1]))
    wins = [HotspotWindow(T0 + s + 1, T0 + s, 1, {"main;f;AES_encrypt": 30, "main;g": 10}, {}) for s in range(5)]
    producer = threading.Thread(target=lambda: [win.live.publish(w) for w in wins])
    producer.start()
    producer.join()
    assert counted_on == []  # nothing counted on the producer's thread
    qtbot.waitUntil(lambda: len(win.observation.run.windows) == 5)
    assert set(counted_on) == {threading.get_ident()} and win.observation.run.window_crypto == [75.0] * 5
    win.shutdown()


def test_the_results_chart_is_drawn_when_it_is_seen_not_for_each_batch_behind_the_table(qtbot, monkeypatch):
    dock = WorkloadDock()
    qtbot.addWidget(dock)
    dock.show()
    qtbot.waitExposed(dock)
    view = dock.results
    plotted = []
    real = view._plot_bars
    monkeypatch.setattr(view, "_plot_bars", lambda r: (plotted.append(r), real(r)))
    for k in range(5):  # five batches while the Table tab is up: the chart behind it is not drawn
        dock.show_results([_result(k)])
    assert plotted == [] and view.table.rowCount() > 0
    view.tabs.setCurrentWidget(view.chart)  # the user looks at the chart: the chosen run's, once
    assert plotted == [view.runs()[-1]]
    dock.show_results([_result(5)])  # while it is seen: drawn at once
    assert plotted[-1].ts == T0 + 5 and len(plotted) == 2
    view.tabs.setCurrentWidget(view.table)
    view.clear()
    view.tabs.setCurrentWidget(view.chart)  # nothing left to draw after a clear
    assert len(plotted) == 2


def test_the_captures_table_measures_its_columns_once_and_draws_a_cell_from_its_column_only(qtbot, monkeypatch):
    from tdescope.app.events import PageCapture
    from tdescope.app.probe.capture_record import CaptureRecord
    from tdescope.ui.docks import captures as captures_module
    from tdescope.ui.docks.captures import CapturesDock

    def row(seq):
        cap = PageCapture(T0 + seq, seq, "sqlcipher_page_cipher", "decrypt", seq, b"\0" * 64, b"\1" * 64, 1.0, "sqlcipher")
        return cap, CaptureRecord(seq, cap.ts, seq, cap.symbol, "decrypt", 64, 8.0, 1.0, "index leaf", 3, "", "", 1.0)

    dock = CapturesDock()
    qtbot.addWidget(dock)
    dock.show()
    sized = []
    real = dock.view.resizeColumnsToContents
    monkeypatch.setattr(dock.view, "resizeColumnsToContents", lambda: (sized.append(1), real()))
    dock.add([row(k) for k in range(1, 30)])
    dock.model.clear()  # a replay seeking back
    dock.add([row(k) for k in range(1, 30)])
    assert sized == [1]  # fitted to the first batch once, not again after each seek back
    formatted = []
    monkeypatch.setattr(captures_module.time, "strftime", lambda *a: (formatted.append(1), "12:00:00")[1])
    model = dock.model
    texts = [model.data(model.index(0, col)) for col in range(1, model.columnCount())]
    assert formatted == [] and texts[:2] == [1, 1] and "index leaf" in texts  # no time formatted for other cells
    assert model.data(model.index(0, 0)).startswith("12:00:00.") and formatted == [1]


def test_focusing_the_span_already_shown_moves_nothing(qtbot, monkeypatch):
    from tdescope.app.events import Marker

    run = ObservedRun()
    run.add_markers([Marker(T0, "ab_dml run 1 start"), Marker(T0 + 5, "ab_dml run 1 end")])
    run.add_progress([WorkloadProgress(T0 + 600, "ab_dml", "plain", 1, 5)])
    dock = TimelineDock(run)
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh(force=True)
    dock.focus(T0 + 2)  # the run the moment falls in
    moves = []
    real = dock.plot.setXRange
    monkeypatch.setattr(dock.plot, "setXRange", lambda *a, **k: (moves.append(a), real(*a, **k)))
    dock.focus(T0 + 3)  # the same run: a replay's refreshes ask again and again (each move re-lays every label)
    assert moves == []
    dock.focus(T0 + 500)  # elsewhere: it moves
    assert len(moves) == 1


def test_side_labels_are_set_again_only_for_new_or_moved_spans(qtbot, monkeypatch):
    import pyqtgraph as pg

    run = ObservedRun()
    run.add_progress([WorkloadProgress(T0 + i, "ab_dml", "encrypted" if i % 10 < 5 else "plain", i, 100)
                      for i in range(0, 60)])
    dock = TimelineDock(run)
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh(force=True)
    shown = [(lbl.toPlainText(), lbl.pos().x()) for lbl in dock._labels.used]
    assert len(shown) == len(run.spans) >= 10
    texts = []
    real = pg.TextItem.setText
    monkeypatch.setattr(pg.TextItem, "setText", lambda self, *a, **k: (texts.append(a[0]), real(self, *a, **k)))
    run.add_progress([WorkloadProgress(T0 + i, "ab_dml", "encrypted" if i % 10 < 5 else "plain", i, 100)
                      for i in range(60, 66)])  # two new spans: 60-64 encrypted, 65 plain
    dock.refresh(force=True)
    assert [t for t in texts if t] == ["encrypted", "plain"]  # the new spans' labels only, not every label again
    assert [(lbl.toPlainText(), lbl.pos().x()) for lbl in dock._labels.used][:len(shown)] == shown
