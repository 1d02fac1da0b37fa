"""Python's cyclic garbage collector runs on the GUI thread only.

A collection runs on whichever thread happens to allocate. On a sampler's or
capture window's thread it can free a dead window's pyqtgraph items (Python
objects in cycles that own QObjects): ``~QObject`` there takes a Qt mutex and
waits for the GIL while the GUI thread holds the GIL waiting for that mutex: a
deadlock (design notes, "Qt objects and the cyclic garbage collector"). So the
workbench turns automatic collection off and collects from a QTimer on the GUI
thread (pyqtgraph's :class:`~pyqtgraph.util.garbage_collector.GarbageCollector`,
same generation thresholds as Python's own); reference counting still frees
everything outside a cycle, on any thread.
"""

from __future__ import annotations

__all__ = ["collect_on_gui_thread"]

#: Seconds between the GUI thread's checks of the collector's thresholds.
INTERVAL_S = 0.5


def collect_on_gui_thread(interval_s: float = INTERVAL_S):
    """Disable automatic collection and collect on the calling (GUI) thread's timer; keep the result alive."""
    from pyqtgraph.util.garbage_collector import GarbageCollector

    return GarbageCollector(interval=interval_s)
