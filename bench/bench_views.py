"""GUI-thread cost of one refresh of the Hotspots, Waits and Timeline views after a long run.

Real events are recorded first: the lab runs A/B DML for a few seconds under
:class:`~tdescope.app.observe.sampling.Observation` (perf + /proc). They are then
replayed, shifted in time, to build a long history (minutes of windows and
wait samples), and the views are measured as the GUI meets them: every
100 ms tick takes that tick's events (what the pump hands over), updates the
run, refreshes the docks and repaints them synchronously. One figure per
Hotspots tab (Table, Flame graph, Encrypted vs plain), as only the current
tab is refreshed. Goal: ≤ 50 ms per refresh at ≥ 5 Hz.

Run alone: ``python -m bench.bench_views [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import dataclasses
import json
import os
import statistics
import sys
import threading
import time

from bench._report import goal

goal("views_history_min", "observed history replayed before measuring (minutes)")
goal("views_events_recorded", "real events recorded from the lab (windows + waits + progress)")
for _tab in ("table", "flame", "diff"):
    goal(f"views_refresh_{_tab}_p95_ms", f"GUI work per 100 ms tick, Hotspots tab '{_tab}', p95 (wall)",
         "≤ 50", lambda v: v <= 50)
    goal(f"views_refresh_{_tab}_cpu_p95_ms", f"GUI-thread CPU per 100 ms tick, tab '{_tab}', p95",
         "≤ 50", lambda v: v <= 50)
    goal(f"views_refresh_{_tab}_max_ms", f"GUI work per 100 ms tick, Hotspots tab '{_tab}', max")


def _record(seconds: float) -> list:
    from tdescope.app.engines.api import WorkloadControl
    from tdescope.app.observe.sampling import Observation
    from tdescope.plugins.sqlcipher.lab import LabSession

    events: list = []
    lock = threading.Lock()

    def sink(ev) -> None:
        with lock:
            events.append(ev)

    lab = LabSession()
    try:
        obs = Observation(lab.server_pid(), sink).start_blocking()
        control = WorkloadControl(sink)
        workload = next(w for w in lab.workloads() if w.name == "ab_dml")

        def drive() -> None:
            while not control.cancelled:
                workload.run({**workload.params, "groups": 30}, control)

        t = threading.Thread(target=drive, daemon=True)
        t.start()
        time.sleep(seconds)
        obs.stop()
        control.cancel()
        t.join(30)
    finally:
        lab.close()
    return events


def _shifted(events: list, dt: float) -> list:
    out = []
    for ev in events:
        changes = {"ts": ev.ts + dt}
        if hasattr(ev, "start") and isinstance(ev.start, float):
            changes["start"] = ev.start + dt
        out.append(dataclasses.replace(ev, **changes))
    return out


def run(quick: bool) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtWidgets import QApplication, QMainWindow
    from PySide6.QtCore import Qt

    from tdescope.app.events import HotspotLeaves, HotspotWindow, WaitSample, WorkloadProgress
    from tdescope.app.hotspots.glossary import load_glossary
    from tdescope.app.observe.observed import ObservedRun
    from tdescope.ui.docks.hotspots import HotspotsDock
    from tdescope.ui.docks.timeline import TimelineDock
    from tdescope.ui.docks.waits import WaitsDock

    recorded = [e for e in _record(8.0 if quick else 15.0)
                if isinstance(e, (HotspotWindow, HotspotLeaves, WaitSample, WorkloadProgress))]
    recorded.sort(key=lambda e: e.ts)
    t_first, t_last = recorded[0].ts, recorded[-1].ts
    span = t_last - t_first + 0.5
    history_min = 5 if quick else 20
    copies = int(history_min * 60 / span) + 1
    timeline = [e for i in range(copies) for e in _shifted(recorded, i * span)]

    app = QApplication.instance() or QApplication([])
    win = QMainWindow()
    win.resize(1500, 900)
    run_ = ObservedRun()
    hot = HotspotsDock(run_, load_glossary("sqlite", "openssl"), win)
    waits = WaitsDock(run_, parent=win)
    tl = TimelineDock(run_, win)
    # all three visible at once: the worst case (tabified docks skip hidden ones)
    win.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, hot)
    win.addDockWidget(Qt.DockWidgetArea.LeftDockWidgetArea, waits)
    win.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, tl)
    win.show()
    app.processEvents()

    handlers = {HotspotWindow: run_.add_windows, HotspotLeaves: run_.add_leaves,
                WaitSample: run_.add_waits, WorkloadProgress: run_.add_progress}

    def feed(batch: list) -> None:
        by: dict = {}
        for ev in batch:
            by.setdefault(type(ev), []).append(ev)
        for kind, evs in by.items():
            handlers[kind](evs)

    # history, untimed, except the last 30 s per measured tab
    n_hist = len(timeline)
    cut = next(i for i, e in enumerate(timeline) if e.ts >= timeline[-1].ts - 3 * 30)
    feed(timeline[:cut])
    for d in (hot, waits, tl):
        d.refresh(force=True)
    app.processEvents()
    out = {"views_history_min": history_min, "views_events_recorded": len(recorded),
           "views_events_replayed": n_hist}
    pos = cut
    for tab_i, tab in enumerate(("table", "flame", "diff")):
        hot.tabs.setCurrentIndex(tab_i)
        app.processEvents()
        costs, cpu = [], []
        t_tick = timeline[pos].ts
        end_tab = t_tick + 30
        while pos < len(timeline) and t_tick < end_tab:
            t_tick += 0.1
            j = pos
            while j < len(timeline) and timeline[j].ts < t_tick:
                j += 1
            t0, c0 = time.perf_counter(), time.thread_time()
            feed(timeline[pos:j])
            for d in (hot, waits, tl):
                d.refresh()
                d.repaint()
            costs.append((time.perf_counter() - t0) * 1000)
            cpu.append((time.thread_time() - c0) * 1000)
            pos = j
        costs.sort()
        out[f"views_refresh_{tab}_median_ms"] = round(statistics.median(costs), 2)
        out[f"views_refresh_{tab}_p95_ms"] = round(costs[int(0.95 * (len(costs) - 1))], 2)
        out[f"views_refresh_{tab}_max_ms"] = round(costs[-1], 2)
        # CPU time of the GUI thread: the work itself, without waiting for a core other
        # processes hold (the wall figures above include that wait on a loaded box)
        cpu.sort()
        out[f"views_refresh_{tab}_cpu_p95_ms"] = round(cpu[int(0.95 * (len(cpu) - 1))], 2)
        out[f"views_refresh_{tab}_cpu_max_ms"] = round(cpu[-1], 2)
    out["views_load_avg_1m"] = os.getloadavg()[0]
    out["views_windows_in_history"] = len(run_.windows)
    out["views_wait_samples_in_history"] = run_.waits.samples
    out["views_symbols_in_run"] = len(run_.profile().total_counts)
    win.close()
    return out


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
