"""The Hotspots, Waits and Timeline docks with pytest-qt: events built with the real
dataclasses for the view logic, and one real run in the main window."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from PySide6.QtCore import QPointF, Qt

from tdescope.app.events import HotspotLeaves, HotspotWindow, WaitFigure, WaitFigures, WaitSample, WaitSpan, WaitSpans, WorkloadProgress
from tdescope.app.hotspots.glossary import load_glossary
from tdescope.app.observe.observed import ObservedRun
from tdescope.ui.docks.hotspots import HotspotsDock
from tdescope.ui.docks.timeline import TimelineDock
from tdescope.ui.docks.waits import WaitsDock

SO = "/venv/sqlcipher3/_sqlite3.so"
DSOS = {"aesni_cbc_encrypt": SO, "sha512_block_data_order_avx2": SO, "sqlite3VdbeExec": SO,
        "memcpy": "/usr/lib/libc.so.6", "main": "/bin/app", "[unknown]": "[unknown]"}


def _win(start, enc: bool) -> HotspotWindow:
    stacks = {"main;sqlite3VdbeExec": 10, "main;memcpy": 3}
    if enc:
        stacks.update({"main;sqlite3VdbeExec;aesni_cbc_encrypt": 6, "main;sha512_block_data_order_avx2": 4})
    return HotspotWindow(ts=start + 1, start=start, pid=7, stacks=stacks, dsos=DSOS)


@pytest.fixture
def run() -> ObservedRun:
    """Two seconds encrypted, two plain, with progress, waits and leaf offsets."""
    r = ObservedRun()
    r.add_waits([WaitSample(1000 + i * 0.05, 7, 7, "os", "CPU" if i < 40 else "File I/O",
                            "on CPU" if i < 40 else "pread64") for i in range(80)])
    r.add_progress([WorkloadProgress(1000 + t, "ab_dml", side, done, 2)
                    for t, side, done in ((1, "encrypted", 1), (2, "encrypted", 2), (3, "plain", 1), (4, "plain", 2))])
    r.add_windows([_win(1000, True), _win(1001, True), _win(1002, False), _win(1003, False)])
    r.add_leaves([HotspotLeaves(1001.5, 7, {"aesni_cbc_encrypt": {0x10: 4, 0x14: 2}})])
    return r


def test_hotspot_table_filter_crypto_and_scope(qtbot, qtmodeltester, run):
    dock = HotspotsDock(run, load_glossary("sqlite", "openssl"))
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh()
    qtmodeltester.check(dock.model)
    syms = {dock.model.rows[i].symbol for i in range(dock.model.rowCount())}
    assert {"aesni_cbc_encrypt", "sqlite3VdbeExec", "memcpy", "main"} <= syms
    # whole run: 20 crypto self samples of 72
    assert dock.crypto_label.text() == f"time in crypto: {100 * 20 / 72:.1f}%"
    row = dock.model.row_of("aesni_cbc_encrypt")
    assert "crypto" in dock.model.index(row, 5).data()
    assert "AES" in dock.model.index(row, 6).data()  # glossary column
    assert "AES" in dock.model.index(row, 0).data(Qt.ItemDataRole.ToolTipRole)
    # sorted by self % descending: the hottest first
    first = dock.proxy.index(0, 0).data()
    assert first == "sqlite3VdbeExec"
    dock.filter.setText("sha512")
    assert dock.proxy.rowCount() == 1 and dock.proxy.index(0, 0).data() == "sha512_block_data_order_avx2"
    dock.filter.setText("AES-CBC")  # matches the glossary text too
    assert dock.proxy.index(0, 0).data() == "aesni_cbc_encrypt"
    dock.filter.clear()
    # the last window is plain: no crypto
    dock.scope_window.setChecked(True)
    assert dock.crypto_label.text() == "time in crypto: 0.0%"
    assert dock.status.text().startswith("13 samples")


def test_flame_graph_focus_and_reset(qtbot, run):
    dock = HotspotsDock(run, {})
    qtbot.addWidget(dock)
    dock.resize(700, 500)
    dock.show()
    dock.tabs.setCurrentIndex(1)
    flame = dock.flame
    assert flame.root.value == 72
    qtbot.waitExposed(flame)
    qtbot.wait(20)
    flame.repaint()
    # the frame one row above the root's child "main", at the left edge, is a child of main
    row_y = flame.height() - 18 * 3 + 5
    node = flame.node_at(2, row_y)
    assert node is not None and node.parent.name == "main"
    clicked = []
    flame.frameClicked.connect(clicked.append)
    qtbot.mouseClick(flame, Qt.MouseButton.LeftButton, pos=QPointF(2, row_y).toPoint())
    assert flame.focus_node() is node and clicked == [node.name]
    flame.repaint()
    # focused: the node spans the whole width
    assert flame.node_at(flame.width() - 3, row_y) is node
    root_y = flame.height() - 5
    qtbot.mouseClick(flame, Qt.MouseButton.LeftButton, pos=QPointF(5, root_y).toPoint())
    assert flame.focus_node() is flame.root


def test_the_flame_graph_shows_the_top_of_deep_stacks(qtbot):
    """Issue #23 item 3: a stack deeper than the dock is tall is scrolled to, never clipped: the graph
    is as tall as its deepest stack, in a scroll area that opens on the root."""
    deep = ";".join(f"frame{i}" for i in range(60)) + ";sha512_block_data_order_avx2"
    dock = HotspotsDock(ObservedRun(), {})
    qtbot.addWidget(dock)
    dock.resize(700, 400)
    dock.show()
    dock.tabs.setCurrentIndex(1)
    flame = dock.flame
    flame.set_stacks({deep: 10, "main;other": 5})
    qtbot.waitExposed(flame)
    assert flame.depth() == 62 and flame.height() >= 62 * 18  # the root row, then 61 frames
    bar = dock.flame_scroll.verticalScrollBar()
    qtbot.waitUntil(lambda: bar.maximum() > 0 and bar.value() == bar.maximum(), timeout=3000)  # the root in view
    flame.grab()  # paints the whole graph, the part scrolled out of view too
    top = flame.node_at(2, flame.height() - 62 * 18 + 5)
    assert top is not None and top.name == "sha512_block_data_order_avx2"


def _pixel_of(flame, name: str):
    """The colour painted at the middle of the frame called ``name`` (the first drawn)."""
    image = flame.grab().toImage()
    rect = next(r for r, node in flame._hits if node.name == name)
    return image.pixelColor(rect.center().toPoint())


def test_the_filter_box_highlights_matching_frames_in_the_flame_graph(qtbot, run):
    from tdescope.ui.views.flamegraph import MATCH_COLOR, _color

    dock = HotspotsDock(run, load_glossary("sqlite", "openssl"))
    qtbot.addWidget(dock)
    dock.resize(900, 500)
    dock.show()
    dock.tabs.setCurrentIndex(1)
    flame = dock.flame
    qtbot.waitExposed(flame)
    assert _pixel_of(flame, "memcpy") == _color("memcpy") and flame.matched == 0
    dock.filter.setText("VDBEexec")  # any case, as the table filters
    # sqlite3VdbeExec and the AES call under it: 16 samples in each encrypted window, 10 in each plain one
    assert flame.matched == 52 and flame.root.value == 72
    assert _pixel_of(flame, "sqlite3VdbeExec") == MATCH_COLOR
    faded = _pixel_of(flame, "memcpy")
    assert faded != _color("memcpy") and faded.lightness() > _color("memcpy").lightness()
    assert _pixel_of(flame, "aesni_cbc_encrypt") != MATCH_COLOR  # inside a match, not a match itself
    assert dock.proxy.rowCount() == 1  # the table shows the same one function
    dock.filter.setText("AES-CBC")  # the glossary sentence, as in the table
    assert flame.matched == 12 and _pixel_of(flame, "aesni_cbc_encrypt") == MATCH_COLOR
    dock.filter.setText("libc.so")  # the library
    assert flame.matched == 12 and _pixel_of(flame, "memcpy") == MATCH_COLOR
    dock.filter.clear()
    assert flame.matched == 0 and _pixel_of(flame, "sqlite3VdbeExec") == _color("sqlite3VdbeExec")
    # the search stays on as new windows arrive
    dock.filter.setText("sha512")
    run.add_windows([_win(1004, True)])
    dock.refresh()
    assert flame.matched == 12 and flame.root.value == 95


def test_diff_ranks_the_functions_encryption_adds(qtbot, run):
    dock = HotspotsDock(run, {})
    qtbot.addWidget(dock)
    dock.show()
    dock.tabs.setCurrentIndex(2)
    top = [dock.diff_proxy.index(i, 0).data() for i in range(2)]
    assert set(top) == {"aesni_cbc_encrypt", "sha512_block_data_order_avx2"}
    assert "Encrypted phase 46 samples" in dock.diff_label.text()


@pytest.fixture(scope="module")
def hot_exe(tmp_path_factory) -> Path:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("hot") / "hot"
    src = Path(__file__).parent / "clients" / "hot.c"
    subprocess.run(["cc", "-O1", "-g", "-fno-omit-frame-pointer", "-o", str(out), str(src)], check=True)
    return out


def test_disassembly_off_the_gui_thread_with_heat(qtbot, hot_exe):
    run = ObservedRun()
    run.add_windows([HotspotWindow(ts=2, start=1, pid=1, stacks={"main;hot_loop": 9}, dsos={"hot_loop": str(hot_exe)})])
    run.add_leaves([HotspotLeaves(2, 1, {"hot_loop": {0: 1}})])
    dock = HotspotsDock(run, {"hot_loop": "The known hot function of the test client."})
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh()
    view = dock.table
    idx = dock.proxy.mapFromSource(dock.model.index(dock.model.row_of("hot_loop"), 0))
    view.doubleClicked.emit(idx)
    assert dock.tabs.currentWidget() is dock.disasm and dock.disasm.busy
    qtbot.waitUntil(lambda: not dock.disasm.busy, timeout=10000)
    rows = dock.disasm.model.rows
    assert rows and rows[0].samples == 1 and "instructions" in dock.disasm.title.text()
    assert dock.disasm.about.text().startswith("The known hot function")
    assert any(r.insn.mnemonic == "imul" for r in rows)
    run.add_leaves([HotspotLeaves(3, 1, {"hot_loop": {0: 2, rows[1].insn.address - rows[0].insn.address: 5}})])
    dock.refresh(force=True)
    assert [r.samples for r in dock.disasm.model.rows[:2]] == [3, 5]
    # kernel code is not disassembled: one line says why
    dock.disasm.show_function("do_syscall_64", "[kernel.kallsyms]", "", {})
    assert "only code in a file on disk" in dock.disasm.title.text() and not dock.disasm.busy


def test_waits_chart_table_and_range(qtbot, qtmodeltester, run):
    dock = WaitsDock(run)
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh()
    qtmodeltester.check(dock.model)
    assert [(r.wait_class, r.samples) for r in dock.model.rows] == [("CPU", 40), ("File I/O", 40)]
    x, y = dock.chart.curves["File I/O"].getData()
    # stacked: File I/O sits on top of CPU; 5 samples per 0.25 s bucket at 20 Hz = 1 thread
    assert max(y) == pytest.approx(1.0) and "Lock" not in dock.chart.curves
    dock.set_range((1002.5, 1004.0))
    assert [(r.wait_class, r.samples) for r in dock.model.rows] == [("File I/O", 30)]
    assert dock.chart.region.isVisible()
    dock.set_range(None)
    assert len(dock.model.rows) == 2 and not dock.chart.region.isVisible()


def test_a_range_fills_the_waits_chart_the_legend_stays_off_it_and_percent_shows(qtbot, run):
    """Issue #23 item 17: with a range selected the chart's axis is the range (not 100 s with the data
    squeezed right); the legend sits below the plot, not on it; the % column is whole."""
    run.add_waits([WaitSample(1100.0, 7, 7, "os", "CPU", "on CPU")])  # the run went on: 100 s of axis
    dock = WaitsDock(run)
    qtbot.addWidget(dock)
    dock.resize(420, 500)
    dock.show()
    dock.refresh()
    qtbot.waitExposed(dock)
    dock.set_range((1002.5, 1004.0))
    (lo, hi), _ = dock.chart.viewRange()
    assert 2.0 <= lo <= 2.5 and 4.0 <= hi <= 4.6, (lo, hi)
    dock.refresh(force=True)  # new samples do not pull it back to the live edge
    assert dock.chart.viewRange()[0] == [lo, hi]
    legend = dock.chart.legend  # under the chart, not on it
    assert "CPU" in legend.text() and legend.isVisible() and legend.geometry().top() >= dock.chart.geometry().bottom()
    header = dock.table.horizontalHeader()
    assert header.sectionPosition(4) + header.sectionSize(4) <= dock.table.viewport().width()
    assert header.sectionSize(4) >= header.sectionSizeHint(4)
    dock.set_range(None)
    assert dock.chart.follow


def test_timeline_range_filters_hotspots_and_waits(qtbot, run):
    timeline = TimelineDock(run)
    hot = HotspotsDock(run, {})
    waits = WaitsDock(run)
    for w in (timeline, hot, waits):
        qtbot.addWidget(w)
        w.show()
    timeline.rangeChanged.connect(hot.set_range)
    timeline.rangeChanged.connect(waits.set_range)
    timeline.refresh()
    assert len(timeline.windows.opts["x0"]) == 4 and len(timeline.sides.opts["x0"]) == 2
    hot.refresh()
    assert hot.crypto_label.text() != "time in crypto: 0.0%"
    with qtbot.waitSignal(timeline.rangeChanged) as sig:
        timeline.set_range(1002.2, 1003.8)  # the plain side only
    assert sig.args[0] == pytest.approx((1002.2, 1003.8))
    assert hot.crypto_label.text() == "time in crypto: 0.0%"
    assert "selected range" in hot.status.text() and hot.status.text().startswith("26 samples")
    assert [r.wait_class for r in waits.model.rows] == ["File I/O"]
    with qtbot.waitSignal(timeline.rangeChanged) as sig:
        timeline.filter.setChecked(False)
    assert sig.args[0] is None
    assert hot.status.text().startswith("72 samples")


@pytest.mark.perf
def test_exact_waits_table_adds_up_batches_and_follows_the_range(qtbot, qtmodeltester, run):
    lat = tuple([0] * 17 + [3] + [0] * 22)  # 131..262 µs
    munmap = WaitFigure("ebpf", "Memory operation", "munmap", 3, 600.0, 200.0, 260.0, 250.0, lat,
                        ((131072, 3),))
    pread = WaitFigure("ebpf", "File I/O", "pread64", 3, 30.0, 10.0, 12.0, 12.0, tuple([0] * 13 + [3] + [0] * 26),
                       ((8192, 3),))
    run.add_exact([WaitFigures(1001.0, 7, 1.0, (munmap,)), WaitFigures(1002.0, 7, 1.0, (munmap, pread)),
                   WaitFigures(1004.0, 7, 1.0, (pread,))])
    dock = WaitsDock(run)
    qtbot.addWidget(dock)
    dock.refresh(force=True)
    qtmodeltester.check(dock.exact_model)
    rows = {r.syscall: r for r in dock.exact_model.rows}
    assert rows["munmap"].count == 6 and dict(rows["munmap"].sizes) == {131072: 6}
    assert dock.exact_model.data(dock.exact_model.index(0, 7)) == "131072 B × 6"
    assert "source: eBPF" in dock.exact_label.text() and "12 calls" in dock.exact_label.text()
    dock.set_range((1003.2, 1003.8))  # the last second only
    assert [r.syscall for r in dock.exact_model.rows] == ["pread64"]
    # the sampled long waits go on the timeline's waits lane as bars of their length (Idle left out)
    run.add_spans([WaitSpans(1002.0, 7, (WaitSpan(1001.5, 0.25, 7, "Sync", "fsync"),
                                         WaitSpan(1001.9, 0.05, 7, "Idle", "epoll_wait")))])
    timeline = TimelineDock(run)
    qtbot.addWidget(timeline)
    timeline.refresh()
    assert list(timeline.wait_spans.items) == ["Sync"]  # one item per class, Idle left out
    assert list(timeline.wait_spans.items["Sync"].opts["x0"]) == [pytest.approx(1.5)]
    assert list(timeline.wait_spans.items["Sync"].opts["width"]) == [pytest.approx(0.25)]


def test_main_window_observes_a_real_run(qtbot, qsettings):
    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.app.hotspots.crypto import is_crypto
    from tdescope.app.hotspots.profile import check_perf
    from tdescope.ui.window.main_window import MainWindow
    from tdescope.ui.window.menus import Menu

    if check_perf() is not None:
        pytest.skip(check_perf())
    engines, _ = discover_engines()
    win = MainWindow(engines["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    try:
        win.connect_engine(ConnectParams(lab=True))
        # perf attaches on a worker thread after connecting: the run starts once it samples (a thread the
        # lab starts while perf is still attaching would go unsampled, which is what a user's Run races too)
        qtbot.waitUntil(lambda: win.observation.observation is not None and win.observation.observation.hotspots_on,
                        timeout=30000)
        obs = win.observation
        dock = win.workload_dock
        dock.capture.setChecked(False)
        dock._spins["groups"].setValue(24)
        dock.rounds.setValue(0)
        qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
        qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=60000)
        # unwinding DWARF stacks makes perf script lag a few windows behind on a loaded 2-core machine
        qtbot.waitUntil(lambda: len(obs.run.windows) >= 3 and obs.hotspots_dock.model.rowCount() > 5,
                        timeout=40000)
        rows = obs.hotspots_dock.model.rows
        by_self = [r.symbol for r in sorted(rows, key=lambda r: -r.self_samples)]  # callers lead by total now
        assert any(is_crypto(s) for s in by_self[:40]), by_self[:40]
        assert {s.side for s in obs.run.spans} == {"encrypted", "plain"}
        obs.waits_dock.raise_()
        qtbot.waitUntil(lambda: obs.waits_dock.model.rowCount() > 0, timeout=5000)
        assert "CPU" in {r.wait_class for r in obs.waits_dock.model.rows}
        # the exact OS waits: the eBPF tracer timed the worker's pwrite64/pread64 calls, with their sizes
        qtbot.waitUntil(lambda: obs.waits_dock.exact_model.rowCount() > 0, timeout=5000)
        exact = {r.syscall: r for r in obs.waits_dock.exact_model.rows}
        assert exact["pwrite64"].source == "ebpf" and exact["pwrite64"].count > 100 and exact["pwrite64"].sizes
        assert "source: eBPF" in obs.waits_dock.exact_label.text()
        assert any(s.wait_class == "Sync" for s in obs.run.wait_spans)  # fsyncs of >= 50 us, sampled
        # the View menu lists the new docks, the Observe menu toggles the samplers
        view = win.menus[Menu.VIEW]
        assert {"Hotspots", "Waits", "Timeline"} <= {a.text() for a in view.actions()}
        obs.hotspots_action.setChecked(False)
        qtbot.waitUntil(lambda: not obs.observation.hotspots_on, timeout=5000)
        assert obs.observation.waits_on
    finally:
        win.shutdown()
    assert win.observation.observation is None
