"""GUI responsiveness while pages are captured: event-loop stalls during a capture storm.

The real MainWindow (offscreen) is connected to the SQLCipher lab, with live
observation running as a user gets it (perf hotspots, OS and engine waits; the
Hotspots, Timeline and captures views refreshing). A 5 ms QTimer records the
gaps between its ticks; a gap well over 5 ms is the GUI thread busy (or
starved): the stall.

Runs of the lab's A/B DML with a tiny page cache (20 pages), from the
Workload dock's Run button:

1. unarmed, to measure the rate at which the target decrypts pages on its own
   (the *offered* capture rate): seconds per group, unarmed;
2. armed, the storm: N pages captured (every decrypt hit, until N). Decrypts per
   group = captures ÷ groups completed while armed, so offered decrypts/s =
   decrypts per group ÷ unarmed seconds per group. The stall figures are over
   this run (gdb backend).
3. the eBPF storm: every decrypt captured, flat out, for a few seconds (the
   capture window runs in a worker process that sends the window a sample),
   while a user clicks through the captures (the next row every 100 ms: each
   click decodes a page and redraws the page view).

Stalls are the gaps of a GUI-thread heartbeat (:class:`bench._stalls.Heartbeat`),
also in GUI-thread CPU time; p99 with a 95 % interval over all the gaps of a kind.
"""

from __future__ import annotations

import gc
import os
import statistics
import sys
import tempfile
import time

from bench._report import goal
from bench._stalls import Heartbeat, percentile, stall_figures

goal("gui_offered_captures_per_s", "decrypts/s the unarmed lab offers to the probe (tiny cache)", "≥ 1000",
     lambda v: v >= 1000)
goal("gui_delivered_captures_per_s", "captures/s that reached the window during the storm")
goal("gui_capture_storm_pairs", "pages captured while the GUI was measured")
goal("gui_stall_p99_ms", "event-loop stall, 99th percentile of each storm, median over storms", "≤ 50", lambda v: v <= 50)
goal("gui_stall_max_ms", "longest event-loop stall over all the storms", "≤ 100", lambda v: v <= 100)
goal("gui_refresh_p99_ms", "observation views refresh (10 Hz timer), 99th percentile, during the storm")
goal("gui_ebpf_storm_pages", "pages the eBPF probe captured during the eBPF storm (every decrypt, flat out)")
goal("gui_ebpf_storm_pages_per_s", "same, per second")
goal("gui_ebpf_shown", "of those, captures the window was sent (a sample, from the worker process)")
goal("gui_ebpf_stall_p99_ms", "event-loop stall during the eBPF storm, 99th percentile of each, median", "≤ 50",
     lambda v: v <= 50)
goal("gui_ebpf_stall_max_ms", "longest event-loop stall over the eBPF storms")
goal("gui_ebpf_clicks", "captures clicked during the eBPF storms (one every 100 ms)")
goal("gui_ebpf_clicks_shown", "of those clicks, pages shown (the latest click wins: fast clicks skip pages)")

#: The storm's workload: small groups so several complete inside the armed window.
PARAMS = {"groups": 400, "ids_per_group": 200, "cache_pages": 20}


def run(quick: bool) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.app.events import CaptureWindowState, WorkloadProgress
    from tdescope.ui.window.main_window import MainWindow

    sys.setswitchinterval(0.001)  # as tdescope.ui.app.run_gui does
    app = QApplication.instance() or QApplication([])
    tmp = tempfile.mkdtemp(prefix="tdescope-bench-gui-")
    window = MainWindow(discover_engines()[0]["sqlcipher"], QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
    window.show()
    app.processEvents()
    gc.freeze()  # as run_gui does once the window is built
    window.connect_engine(ConnectParams(lab=True))

    def spin(cond, timeout):
        # an idle event loop, as app.exec() is: a busy processEvents() loop would hold
        # the GIL and a core that the capture and observation threads need
        loop, poll = QEventLoop(), QTimer()
        end = time.time() + timeout
        poll.timeout.connect(lambda: (cond() or time.time() > end) and loop.quit())
        poll.start(50)
        if not cond():
            loop.exec()
        poll.stop()

    spin(lambda: window.session is not None, 60)
    spin(lambda: window.observation.observation is not None, 10)
    dock = window.workload_dock
    progress: list[WorkloadProgress] = []
    window.live.subscribe(lambda ev: progress.append(ev) if isinstance(ev, WorkloadProgress) else None)
    closed: list[CaptureWindowState] = []
    window.live.subscribe(lambda ev: closed.append(ev) if isinstance(ev, CaptureWindowState)
                          and ev.state in ("disarmed", "failed") else None)
    for name, value in PARAMS.items():
        dock._spins[name].setValue(value)

    def run_once(capture: bool, groups: int, n: int, backend: str = "gdb") -> None:
        dock._spins["groups"].setValue(groups)
        dock.rounds.setValue(0)  # one run: the figure is the capture rate, not the ratio
        dock.capture.setChecked(capture)
        dock.max_captures.setValue(n)
        dock.backend.setCurrentIndex(dock.backend.findData(backend))
        closed.clear()
        dock.run_button.click()
        spin(lambda: not dock.run_button.isEnabled(), 10)
        if capture:
            # the window closes at n captures; the worker may have sent a sample of the last ones
            spin(lambda: window.captures_dock.model.rowCount() >= n or closed or dock.run_button.isEnabled(), 300)
            window.cancel()
        spin(lambda: dock.run_button.isEnabled(), 120)

    # 1. unarmed: the target's own pace
    run_once(False, 12, 1)
    enc = [p.ts for p in progress if p.side == "encrypted"]
    s_per_group = (enc[-1] - enc[0]) / (len(enc) - 1)
    progress.clear()
    window.captures_dock.clear()

    # 2. the storms, measured: each its own p99; the figure is their median
    n, storms = (400, 2) if quick else (1000, 3)
    p99s, maxes, refresh, offered, delivered, groups_armed, captured_all = [], [], [], [], [], [], []
    storm_beat = Heartbeat(5)
    for _ in range(storms):
        progress.clear()
        window.captures_dock.clear()
        refresh_from = len(window.observation.refresh_ms)
        before = len(storm_beat.gaps)
        storm_beat.start()
        run_once(True, PARAMS["groups"], n)
        storm_beat.stop()
        gaps = storm_beat.gaps[before:]
        refresh += window.observation.refresh_ms[refresh_from:]
        model = window.captures_dock.model
        captured = model.rowCount()
        stamps = sorted(model.row(i)[0].ts for i in range(captured))
        t0, t1 = stamps[0], stamps[-1]
        groups = sum(1 for p in progress if p.side == "encrypted" and t0 <= p.ts <= t1)
        if groups:
            offered.append(captured / groups / s_per_group)
        delivered.append((captured - 1) / (t1 - t0))
        groups_armed.append(groups)
        captured_all.append(captured)
        p99s.append(percentile(gaps, 0.99))
        maxes.append(max(gaps))
    ebpf = _ebpf_storms(window, dock, spin, 2 if quick else 3, 4.0 if quick else 8.0)
    window.close()
    return {
        **ebpf,
        "gui_offered_captures_per_s": round(statistics.median(offered)) if offered else None,
        "gui_delivered_captures_per_s": round(statistics.median(delivered)),
        "gui_capture_storm_pairs": min(captured_all),
        "gui_stall_p99_ms": round(statistics.median(p99s), 1),
        "gui_stall_max_ms": round(max(maxes), 1),
        "gui_stall_p99_all_ms": [round(v, 1) for v in p99s],
        "gui_refresh_p99_ms": round(percentile(refresh, 0.99), 1) if refresh else None,
        "gui_unarmed_s_per_group": round(s_per_group, 4),
        "gui_groups_while_armed": groups_armed,
        **stall_figures("gui_all_stall", storm_beat),
    }


def _ebpf_storms(window, dock, spin, storms: int, seconds: float) -> dict:
    """Every decrypt of the flat-out lab captured by eBPF for ``seconds``, the GUI measured meanwhile."""
    from PySide6.QtCore import QTimer

    from tdescope.app.events import CaptureWindowState

    states: list[CaptureWindowState] = []
    window.live.subscribe(lambda ev: states.append(ev) if isinstance(ev, CaptureWindowState) else None)
    p99s, maxes, pages, rates, shown = [], [], [], [], []
    beat = Heartbeat(5)
    clicks, drawn = [0], []
    view = window.captures_dock.view

    def click_next() -> None:  # the next row, as a user clicking down the Captures table
        n = view.model().rowCount()
        if n:
            view.setCurrentIndex(view.model().index(clicks[0] % n, 0))
            clicks[0] += 1

    clicker = QTimer()
    clicker.setInterval(100)
    clicker.timeout.connect(click_next)
    presenter = window.capture_presenter
    real_ready = presenter._ready
    presenter._ready = lambda prepared: (drawn.append(prepared.capture.seq), real_ready(prepared))
    for _ in range(storms):
        states.clear()
        window.captures_dock.clear()
        dock._spins["groups"].setValue(PARAMS["groups"])
        dock.rounds.setValue(0)
        dock.capture.setChecked(True)
        dock.max_captures.setValue(100000)
        dock.backend.setCurrentIndex(dock.backend.findData("ebpf"))
        dock.run_button.click()
        spin(lambda: any(s.state == "armed" for s in states), 30)
        first = max((s.captures for s in states), default=0)
        t0 = time.monotonic()
        before = len(beat.gaps)
        beat.start()
        clicker.start()
        spin(lambda: time.monotonic() - t0 >= seconds, seconds + 5)
        clicker.stop()
        beat.stop()
        gaps = beat.gaps[before:]
        window.cancel()
        spin(lambda: dock.run_button.isEnabled(), 120)
        done = [s for s in states if s.state in ("disarmed", "failed")]
        total = done[-1].captures if done else max(s.captures for s in states)
        pages.append(total - first)
        rates.append((total - first) / seconds)
        shown.append(window.captures_dock.model.rowCount())
        p99s.append(percentile(gaps, 0.99))
        maxes.append(max(gaps))
    presenter._ready = real_ready
    return {"gui_ebpf_storm_pages": min(pages), "gui_ebpf_storm_pages_per_s": round(statistics.median(rates)),
            "gui_ebpf_shown": min(shown), "gui_ebpf_stall_p99_ms": round(statistics.median(p99s), 1),
            "gui_ebpf_stall_max_ms": round(max(maxes), 1), "gui_ebpf_stall_p99_all_ms": [round(v, 1) for v in p99s],
            "gui_ebpf_clicks": clicks[0], "gui_ebpf_clicks_shown": len(drawn),
            **stall_figures("gui_ebpf_all_stall", beat)}


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
