"""Every item model of the window passes pytest-qt's model tester, empty, filled and after a change."""

from __future__ import annotations

import os

import pytest

from tdescope.app.engines import discover_engines
from tdescope.app.events import HotspotWindow, PageCapture, WorkloadProgress
from tdescope.app.hotspots.disasm import HeatRow, Insn
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.probe.capture_record import describe_capture
from tdescope.ui.docks.captures import CapturesDock, CapturesModel
from tdescope.ui.views.disasm import HeatModel
from tdescope.ui.docks.hotspots import HotspotsDock

DSOS = {"aesni_cbc_encrypt": "/lib/x.so", "sqlite3VdbeExec": "/lib/x.so", "main": "/bin/app"}


def _captures(n: int) -> list:
    decoder = discover_engines()[0]["sqlcipher"].page_decoder()
    out = []
    for i in range(n):
        cap = PageCapture(1_700_000_000.0 + i, i + 1, "sqlcipher_page_cipher", "decrypt", 2 + i,
                          os.urandom(1024), bytes(1024), 20.0, "sqlcipher")
        out.append((cap, describe_capture(cap, decoder, full=False)[0]))
    return out


def test_captures_model(qtmodeltester):
    model = CapturesModel()
    qtmodeltester.check(model)
    model.append(_captures(3))
    model.append(_captures(2))
    qtmodeltester.check(model)
    assert model.rowCount() == 5 and model.columnCount() == 11
    model.clear()
    qtmodeltester.check(model)


def test_captures_dock_sort_proxy(qtbot, qtmodeltester):
    dock = CapturesDock()
    qtbot.addWidget(dock)
    dock.add(_captures(4))
    qtmodeltester.check(dock.proxy)


@pytest.fixture
def hotspots(qtbot) -> HotspotsDock:
    run = ObservedRun()
    run.add_progress([WorkloadProgress(1000 + t, "ab_dml", side, done, 2)
                      for t, side, done in ((0.1, "encrypted", 1), (0.9, "encrypted", 2),
                                            (1.1, "plain", 1), (1.9, "plain", 2))])
    for start, enc in ((1000, True), (1001, False)):
        stacks = {"main;sqlite3VdbeExec": 10}
        if enc:
            stacks["main;sqlite3VdbeExec;aesni_cbc_encrypt"] = 6
        run.add_windows([HotspotWindow(ts=start + 1, start=start, pid=7, stacks=stacks, dsos=DSOS)])
    dock = HotspotsDock(run, {"aesni_cbc_encrypt": "AES in CBC mode"})
    qtbot.addWidget(dock)
    dock.show()
    dock.refresh()
    return dock


def test_hotspot_symbol_filter_proxy(qtmodeltester, hotspots):
    qtmodeltester.check(hotspots.proxy)
    hotspots.filter.setText("aes")
    qtmodeltester.check(hotspots.proxy)
    assert hotspots.proxy.rowCount() == 1


def test_hotspot_diff_model(qtmodeltester, hotspots):
    hotspots.tabs.setCurrentIndex(2)
    assert hotspots.diff_model.rowCount() > 0
    qtmodeltester.check(hotspots.diff_model)
    qtmodeltester.check(hotspots.diff_proxy)


def test_heat_model(qtmodeltester):
    model = HeatModel()
    qtmodeltester.check(model)
    insns = [Insn(0x1000, 4, "66 0f 38 dc", "aesenc", "xmm0, xmm1", is_crypto=True),
             Insn(0x1004, 5, "e8 00 00 00 00", "call", "0x2000", target=0x2000, target_name="f", is_call=True),
             Insn(0x1009, 1, "c3", "ret", "")]
    model.set_rows([HeatRow(insns[0], 7, 70.0), HeatRow(insns[1], 3, 30.0), HeatRow(insns[2], 0, 0.0)])
    qtmodeltester.check(model)
    assert model.index(0, 4).data() == "aesenc xmm0, xmm1"
