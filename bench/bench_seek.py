"""GUI stalls while seeking through an hour-long recorded session (issue #25, item 5).

The synthetic one-hour session of :mod:`bench.bench_session` (hotspot windows at 1 Hz, OS waits at
20 Hz x 4 threads, 300 captures, progress, results) is opened in the real replay window (offscreen),
and the play head is moved as a class moves it: to the end (the whole file), back to the middle
(the views reset, then refill), on, back again, then a slider drag from start to end (a seek every
100 ms). A GUI-thread :class:`~bench._stalls.Heartbeat` (5 ms) measures the gaps meanwhile; each
seek is followed until the views hold its events (the feeder caught up, the pump empty).

Goal: stall p99 <= 50 ms, with its 95 % interval. Also reported: the longest stall and how long the
views take to hold everything up to the end (the hour) after one seek.

Run alone: ``python -m bench.bench_seek [--quick]`` (JSON on stdout); ``--quick`` takes 20 minutes
of session instead of 60.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from pathlib import Path

from bench._report import goal
from bench._stalls import Heartbeat, spin, stall_figures

goal("seek_stall_p99_ms", "GUI stall while seeking through a 1 h replay, 99th percentile (5 ms heartbeat)", "≤ 50",
     lambda v: v <= 50)
goal("seek_stall_cpu_p99_ms", "the same gaps in GUI-thread CPU time (the work, not the wait for a core), p99",
     "≤ 50", lambda v: v <= 50)
goal("seek_stall_max_ms", "longest GUI stall while seeking through the 1 h replay")
goal("seek_to_end_s", "seek from the start to the end of the hour: until the views hold every event, s")

#: The scripted seeks, as fractions of the session's length (after the replay opened at 0).
JUMPS = (1.0, 0.5, 0.75, 0.25, 1.0, 0.0)
#: Then a slider dragged from start to end: this many seeks, 100 ms apart.
DRAG_STEPS = 30


def run(quick: bool) -> dict:
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from PySide6.QtCore import QSettings, QTimer
    from PySide6.QtWidgets import QApplication

    from bench.bench_session import synthesise
    from tdescope.ui.gui_thread.gc_policy import collect_on_gui_thread
    from tdescope.ui.window.main_window import open_replay_window

    minutes = 20.0 if quick else 60.0
    tmp = Path(tempfile.mkdtemp(prefix="tdescope-bench-seek-"))
    counts = synthesise(tmp / "hour.tds", minutes)
    sys.setswitchinterval(0.001)  # as tdescope FILE.tds does (ui/app.py)
    app = QApplication.instance() or QApplication([])
    collector = collect_on_gui_thread()  # noqa: F841 - as a replay window runs (tdescope FILE.tds)
    window = open_replay_window(str(tmp / "hour.tds"), QSettings(str(tmp / "s.ini"), QSettings.Format.IniFormat))
    window.show()
    player = window.replay.player

    def settled() -> bool:
        return player.caught_up and window.pump.idle

    spin(settled, 60)
    beat = Heartbeat(5)
    beat.start()
    took: list[float] = []
    for fraction in JUMPS:
        t0 = time.monotonic()
        player.seek(fraction * player.duration)
        spin(settled, 600)
        took.append(time.monotonic() - t0)
    steps = iter(range(1, DRAG_STEPS + 1))
    drag = QTimer()
    drag.setInterval(100)
    drag.timeout.connect(lambda: (player.seek(next(steps, DRAG_STEPS) / DRAG_STEPS * player.duration)))
    t0 = time.monotonic()
    drag.start()
    spin(lambda: player.position >= player.duration, 60)
    drag.stop()
    spin(settled, 600)
    drag_s = time.monotonic() - t0
    beat.stop()
    events = window.captures_dock.model.rowCount()
    window.close()
    return {
        **stall_figures("seek_stall", beat),
        "seek_to_end_s": round(took[0], 2),
        "seek_each_s": [round(t, 2) for t in took],
        "seek_drag_s": round(drag_s, 2),
        "seek_session_minutes": minutes,
        "seek_session_events": sum(v for k, v in counts.items() if k != "write_s"),
        "seek_captures_shown": events,
        "seek_load_avg_1m": round(os.getloadavg()[0], 2),
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
