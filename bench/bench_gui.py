"""GUI responsiveness while pages are captured: event-loop stalls during a capture storm.

The real MainWindow (offscreen) runs the lab's A/B DML workload with a 1000-page
capture window; a 5 ms QTimer records the gaps between its ticks. A gap well
over 5 ms is the GUI thread busy (or starved): the stall.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

from bench._report import goal

goal("gui_capture_storm_pairs", "pages captured while the GUI was measured")
goal("gui_stall_p99_ms", "event-loop stall, 99th percentile, during the capture storm", "≤ 50", lambda v: v <= 50)
goal("gui_stall_max_ms", "longest event-loop stall during the capture storm", "≤ 100", lambda v: v <= 100)
goal("startup_s", "launch to window shown (offscreen, in-process)", "≤ 3", lambda v: v <= 3)


def run(quick: bool) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    t_start = time.perf_counter()
    from PySide6.QtCore import QElapsedTimer, QEventLoop, QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.main_window import MainWindow

    sys.setswitchinterval(0.001)  # as tdescope.ui.app.run_gui does
    app = QApplication.instance() or QApplication([])
    tmp = tempfile.mkdtemp(prefix="tdescope-bench-gui-")
    window = MainWindow(discover_engines()[0]["sqlcipher"], QSettings(f"{tmp}/s.ini", QSettings.Format.IniFormat))
    window.show()
    app.processEvents()
    startup = time.perf_counter() - t_start
    window.connect_engine(ConnectParams(options={"lab": True}))

    def spin(cond, timeout):
        end = time.time() + timeout
        while time.time() < end and not cond():
            app.processEvents(QEventLoop.ProcessEventsFlag.AllEvents, 20)

    spin(lambda: window.session is not None, 60)
    dock = window.workload_dock
    n = 400 if quick else 1000
    dock.max_captures.setValue(n)
    dock._spins["groups"].setValue(200)
    dock._spins["cache_pages"].setValue(20)
    gaps: list[float] = []
    clock = QElapsedTimer()
    clock.start()
    last = [clock.nsecsElapsed()]

    def tick():
        now = clock.nsecsElapsed()
        gaps.append((now - last[0]) / 1e6)
        last[0] = now

    timer = QTimer()
    timer.setInterval(5)
    timer.timeout.connect(tick)
    timer.start()
    dock.run_button.click()
    spin(lambda: window.captures_dock.model.rowCount() >= n, 300)
    timer.stop()
    window.cancel()
    spin(lambda: dock.run_button.isEnabled(), 60)
    captured = window.captures_dock.model.rowCount()
    window.close()
    gaps.sort()
    return {
        "gui_capture_storm_pairs": captured,
        "gui_stall_p99_ms": round(gaps[int(len(gaps) * 0.99)], 1) if gaps else None,
        "gui_stall_max_ms": round(gaps[-1], 1) if gaps else None,
        "startup_s": round(startup, 2),
    }


if __name__ == "__main__":
    print(run(quick="--quick" in sys.argv))
