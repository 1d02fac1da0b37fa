"""Drops pyqtgraph items held in cycles on the GUI thread while a worker thread allocates (issue #27, item 15).

Run by tests/test_gc_policy.py in a subprocess with a timeout: a deadlock in a collection fails the test
instead of blocking the suite. With ``policy`` the workbench's GC policy (``collect_on_gui_thread``) is on,
as in ``run_gui`` and replay; with ``plain`` it is off and the dropped objects are plain Python cycles (Qt
items without the policy are the hazard itself: that run once died of SIGSEGV in a worker's collection).
Prints one JSON line: collections on the worker and the GUI thread, objects still alive at the end.
"""

import gc
import json
import sys
import threading
import time
import weakref

import pyqtgraph as pg
from PySide6.QtWidgets import QApplication, QLabel

app = QApplication(sys.argv[:1])
if sys.argv[1] == "policy":
    from tdescope.ui.gui_thread.gc_policy import collect_on_gui_thread

    collector = collect_on_gui_thread(0.05)
main = threading.main_thread()
on_gui, on_worker = [0], [0]


def _count(phase, _info):
    if phase == "start":
        (on_gui if threading.current_thread() is main else on_worker)[0] += 1


gc.callbacks.append(_count)
stop = threading.Event()


def allocate():  # a sampler parsing perf script: containers, so generation 0 fills
    while not stop.is_set():
        _ = [{"frame": [i]} for i in range(2000)]


worker = threading.Thread(target=allocate)
worker.start()
plot = pg.PlotWidget()
dropped = []
deadline = time.monotonic() + float(sys.argv[2])


class Plain:
    pass


while time.monotonic() < deadline:
    if sys.argv[1] == "plain":
        items = [Plain() for _ in range(10)]
    else:
        items = [plot.plot([1, 2, 3], [3, 1, 2]) for _ in range(10)]
    for item in items:
        item.me = item  # a cycle: only the cyclic collector frees it
    dropped += [weakref.ref(item) for item in items]
    if sys.argv[1] != "plain":
        label = QLabel("timeline label")
        label.me = label
        dropped.append(weakref.ref(label))
        plot.clear()  # as the charts do when a run is picked
        del label
    del items, item
    app.processEvents()
end = time.monotonic() + 30  # the worker allocates on: the GUI thread's timer reaches the older generations
while any(r() is not None for r in dropped) and time.monotonic() < end:
    app.processEvents()
    time.sleep(0.01)
stop.set()
worker.join()
print(json.dumps({"worker": on_worker[0], "gui": on_gui[0], "alive": sum(r() is not None for r in dropped),
                  "dropped": len(dropped)}))
