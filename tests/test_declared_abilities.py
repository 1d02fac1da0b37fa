"""Abilities a call site asks for by Protocol, not by name: plugin docks and probe handles (issue #25 item 6)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import pytest  # noqa: E402

from tdescope.app.engines import discover_engines  # noqa: E402
from tdescope.app.engines.api import Inventory  # noqa: E402
from tdescope.app.engines.capabilities import ShowsInventory, ShowsResults  # noqa: E402
from tdescope.app.events import WorkloadResult  # noqa: E402
from tdescope.app.probe.backend import DetachesAnywhere  # noqa: E402
from tdescope.app.probe.ebpf.backend import EbpfHandle  # noqa: E402
from tdescope.app.probe.gdb_backend import GdbHandle  # noqa: E402
from tdescope.ui.docks.plugin_docks import EngineDocks, create_engine_docks  # noqa: E402

ENGINES, _ = discover_engines()


@pytest.mark.parametrize("engine, inventory_views, result_views", [
    ("oracle", ["oracle-dock"], []),
    ("postgres", [], ["PostgresMatrixDock"]),
    ("sqlcipher", [], []),
])
def test_a_plugins_docks_are_sorted_by_what_they_declare(qtbot, engine, inventory_views, result_views):
    from PySide6.QtWidgets import QMainWindow

    window = QMainWindow()
    qtbot.addWidget(window)
    docks = create_engine_docks(ENGINES[engine], window)
    assert [d.objectName() for d in docks.inventory_views] == inventory_views
    assert [d.objectName() for d in docks.result_views] == result_views
    for view in docks.inventory_views:
        view.show_inventory(Inventory(engine, (("Wallet", "status", "OPEN"),)))
    for view in docks.result_views:
        view.show_result(WorkloadResult(0.0, "matrix", {}, (), {}, False,
                                        table=(("cipher", "rows", "s", "ratio"), ("plain", "10", "0.1", "1.0"))))


def test_a_dock_that_declares_nothing_is_placed_but_fed_nothing(qtbot):
    from PySide6.QtWidgets import QDockWidget

    class Shows:
        def show_inventory(self, inventory):
            pass

    class ShowsDock(QDockWidget, Shows):
        pass

    plain, shows = QDockWidget("plain"), ShowsDock("shows")
    for dock in (plain, shows):
        qtbot.addWidget(dock)
    docks = EngineDocks.of([plain, shows])
    assert docks.docks == (plain, shows) and docks.inventory_views == (shows,) and docks.result_views == ()
    assert isinstance(shows, ShowsInventory) and not isinstance(plain, ShowsResults)


def test_probe_handles_declare_what_only_their_backend_can_do():
    """Only eBPF's probes come out from any thread (the window's deadline timer); a gdb handle's stop figures
    (MetersStops, a data member) are checked on real windows in test_threadstops.py."""
    assert issubclass(EbpfHandle, DetachesAnywhere)
    assert not issubclass(GdbHandle, DetachesAnywhere)
