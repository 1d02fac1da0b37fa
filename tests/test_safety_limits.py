"""The stop budget's companions: the hit-rate cap, per-hit stop time, and the stopped time shown live.

Real gdb on the real SQLCipher client (tests/clients/sqlcipher_app.py) reading
continuously, so hits happen all the time while armed.
"""

from __future__ import annotations

import re
import statistics
import time

import pytest

from conftest import proc_state, tracer_pid
from tdescope.app.probe.window import CaptureLimits, CaptureWindow
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, PageCapture
from tdescope.app.gdb.guard import text_mismatches
from tdescope.app.probe.limits import StopLimits
from tdescope.plugins.sqlcipher.engine import DECRYPT

pytestmark = pytest.mark.gdb


def _run_window(app, limits):
    events = []
    window = CaptureWindow(app.pid, DECRYPT, limits, "sqlcipher", events.append, events.append)
    summary = window.run()
    return summary, [e for e in events if isinstance(e, PageCapture)], \
        [e for e in events if isinstance(e, CaptureWindowState)]


def test_hit_rate_cap_disarms_the_window(sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    summary, captures, _ = _run_window(app, CaptureLimits(max_captures=100_000, max_seconds=20, max_hits_per_s=40,
                                                          stops=StopLimits(max_busy_fraction=1.0)))
    assert summary.reason == "limit: hit rate", summary
    assert summary.elapsed_s < 6  # closed itself long before the window's 20 s
    assert 30 <= len(captures) <= 45  # about one second's worth at the cap
    assert tracer_pid(app.pid) == 0 and text_mismatches(app.pid) == []
    app.stop()
    code, out, _ = app.finish()
    assert code == 0 and out.startswith("ok ")


def test_stopped_time_is_reported_live_while_armed_and_stops_are_short(sqlcipher_app):
    """'armed' states every half second carry the cumulative stopped time; each hit's stop is short."""
    app = sqlcipher_app()
    app.go()
    for _attempt in range(2):
        summary, captures, states = _run_window(app, CaptureLimits(max_captures=100_000, max_seconds=1.6, max_hits_per_s=100_000,
                                                                   stops=StopLimits(max_busy_fraction=1.0)))
        # the watchdog cutting a window short (a stop over 250 ms: gdb descheduled on a loaded 2-core
        # machine, seen once in a full-suite run) is the other safety promise at work: try once more
        if not summary.reason.startswith("watchdog"):
            break
    assert summary.reason == "limit: max seconds", summary
    armed = [s for s in states if s.state == "armed"]
    assert len(armed) >= 3  # the arming itself, then progress at ~0.5 s and ~1.0 s (and ~1.5 s)
    progress = armed[1:]
    assert all(p.captures > 0 and p.stopped_s > 0 for p in progress)
    assert [p.stopped_s for p in progress] == sorted(p.stopped_s for p in progress)  # cumulative
    assert states[-1].state == "disarmed" and states[-1].stopped_s >= progress[-1].stopped_s
    stops = sorted(c.stop_us for c in captures)
    p99 = stops[int(len(stops) * 0.99) - 1]
    print(f"\n{len(stops)} captures: stop per hit p50 {statistics.median(stops):.0f} µs, p99 {p99:.0f} µs")
    assert p99 <= 20_000  # the promise: per-hit stop p99 <= 20 ms (bench/ measures the real figure)
    assert proc_state(app.pid) in "RS"
    app.stop()
    assert app.finish()[0] == 0


@pytest.mark.parametrize("field, value", [
    ("max_captures", 0), ("max_captures", -3), ("max_captures", 10**9),
    ("max_seconds", 0), ("max_seconds", -1), ("max_seconds", 1e9),
    ("max_busy_fraction", 0), ("max_busy_fraction", 2),
    ("watchdog_s", 0), ("watchdog_s", 1e6),
    ("max_hits_per_s", 0), ("max_hits_per_s", -1),
    ("first_hit_timeout", 0), ("first_hit_timeout", -5),
])
def test_absurd_limits_are_refused_with_one_line(field, value):
    with pytest.raises(UserError) as info:
        if field in ("max_busy_fraction", "watchdog_s"):
            StopLimits(**{field: value})
        else:
            CaptureLimits(**{field: value})
    assert "\n" not in str(info.value)


def test_the_defaults_are_the_promises():
    limits = CaptureLimits()
    assert limits.stops.max_busy_fraction == 0.01 and limits.stops.watchdog_s == 0.25 and limits.max_hits_per_s == 1000


# -- the GUI ----------------------------------------------------------------------

@pytest.fixture
def window(lab_window):
    return lab_window


def _stopped_ms(text: str) -> float:
    m = re.search(r"target stopped ([\d.]+) ms", text)
    return float(m.group(1)) if m else -1.0


def _choose_backend(window, name: str) -> None:
    combo = window.workload_dock.backend
    combo.setCurrentIndex(combo.findData(name))


def test_status_bar_shows_stopped_time_live_while_armed(qtbot, window):
    window.workload_dock.max_captures.setValue(100000)
    window.workload_dock._spins["groups"].setValue(100000)
    _choose_backend(window, "gdb")
    armed: list[CaptureWindowState] = []
    window.pump.subscribe(CaptureWindowState, lambda batch: armed.extend(e for e in batch if e.state == "armed"))
    window.workload_dock.run_button.click()
    qtbot.waitUntil(lambda: window.probe_status.armed_label.text().strip() == "ARMED · gdb", timeout=30000)
    # live from the first ARMED state: the attach-and-arm stop is already counted (progress with pages
    # follows every half second, unless the hit-rate cap closes the window first, which depends on whether
    # the workload was encrypting or decrypting when the probe went in: the window-level test pins progress)
    qtbot.waitUntil(lambda: window.probe_status.stopped_label.text().startswith("armed:")
                    and _stopped_ms(window.probe_status.stopped_label.text()) > 0, timeout=10000)
    assert "of wall time" in window.probe_status.stopped_label.text()
    assert window.probe_status.armed_label.text().strip() == "ARMED · gdb"
    window.statusBar().grab().save("/tmp/tdescope-armed-statusbar.png")
    window.cancel()
    qtbot.waitUntil(lambda: window.probe_status.stopped_label.text().startswith("probe window closed"), timeout=30000)
    print("\n" + window.probe_status.stopped_label.text())
    assert armed and armed[0].stopped_s > 0.01  # the attach-and-arm stop is counted from the start, not hidden
    assert [a.stopped_s for a in armed] == sorted(a.stopped_s for a in armed)  # cumulative
    assert [a.captures for a in armed] == sorted(a.captures for a in armed)
    assert window.probe_status.armed_label.text().strip() == "not armed"
    assert tracer_pid(window.session.server_pid()) == 0


def test_status_bar_shows_a_window_paused_by_its_stop_budget(qtbot, window):
    window.feed(CaptureWindowState(time.time(), state="paused", captures=41, stopped_s=0.0262,
                                   message="stop budget (1% of wall time) spent: breakpoint out of pid 7, re-arms in 2.6 s"))
    qtbot.waitUntil(lambda: window.probe_status.armed_label.text().strip() == "PAUSED", timeout=5000)
    assert window.probe_status.stopped_label.text().startswith("stop budget spent: 41 pages, target stopped 26.2 ms")
    assert window.probe_status.stopped_label.text().endswith("re-arms in 2.6 s")
    window.feed(CaptureWindowState(time.time(), state="armed", captures=41, stopped_s=0.0262, message="sqlcipher_page_cipher in pid 7"))
    qtbot.waitUntil(lambda: window.probe_status.armed_label.text().strip() == "ARMED", timeout=5000)


def test_capture_spin_box_clamps_absurd_values(window):
    spin = window.workload_dock.max_captures
    spin.setValue(-5)
    assert spin.value() == 1
    spin.setValue(10**9)
    assert spin.value() == 100000
    for s in window.workload_dock._spins.values():
        s.setValue(-1)
        assert s.value() >= 1


def test_status_bar_shows_the_ebpf_rate_and_losses_live(qtbot, window):
    window.workload_dock.max_captures.setValue(100000)
    window.workload_dock._spins["groups"].setValue(100000)
    _choose_backend(window, "ebpf")
    window.workload_dock.run_button.click()
    qtbot.waitUntil(lambda: window.probe_status.armed_label.text().strip() == "ARMED · eBPF", timeout=30000)
    pages = re.compile(r"armed: (\d+) pages( \(\d+ shown\))? of (\d+) hits, lost 0, probes added [\d.]+ ms")
    qtbot.waitUntil(lambda: (m := pages.match(window.probe_status.stopped_label.text())) is not None
                    and int(m.group(1)) > 0, timeout=15000)
    window.statusBar().grab().save("/tmp/tdescope-ebpf-statusbar.png")
    window.cancel()
    qtbot.waitUntil(lambda: window.workload_dock.run_button.isEnabled(), timeout=30000)
    assert "not armed" in window.probe_status.armed_label.text()


@pytest.mark.gdb
def test_the_arming_stop_in_the_summary_matches_the_targets_own_view(sqlcipher_app):
    """``capture``'s arming_stop_ms is what /proc shows of the target's first stop (gdb's attach and arming):
    never less than a witness saw it stopped, at most 20 % over the witness's bound (the product's own sampler
    is coarser, 5 ms)."""
    import json
    import subprocess
    import sys
    import threading

    app = sqlcipher_app()
    app.go()
    spans: list[tuple[float, float]] = []  # each stop the witness saw: (at least, at most) how long it lasted
    done = threading.Event()

    def watch() -> None:  # the target's own view, every 0.5 ms; a late sample only widens a stop's bounds
        ran = first = last = None  # when a sample last saw it run (read began), first and last saw it stopped
        while not done.is_set():
            began = time.perf_counter()
            state = proc_state(app.pid)
            read = time.perf_counter()
            if state in ("t", "T"):
                first = read if first is None else first
                last = began
            else:
                if first is not None:
                    spans.append((last - first, read - (ran if ran is not None else first)))
                    first = None
                ran = began
            time.sleep(0.0005)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        out = subprocess.run([sys.executable, "-m", "tdescope", "capture", "--pid", str(app.pid), "--backend", "gdb",
                              "--count", "1", "--timeout", "20", "--json"], capture_output=True, text=True, timeout=60)
    finally:
        done.set()
        watcher.join()
    assert out.returncode == 0, out.stderr
    summary = json.loads(out.stdout.splitlines()[-1])
    arming = summary["arming_stop_ms"]
    # the first stop is the attach and arming (the hit's and the detach's come after; under load the detach's
    # can be the longest: 795 ms against an arming of 790)
    at_least, at_most = (b * 1000 for b in spans[0])
    assert summary["total_stopped_ms"] >= arming > 0
    # before: gdb's bracket (attach sent to ^running read), 686 ms where the witness saw 471 ms on a busy machine
    assert at_least - 1 <= arming <= 1.2 * at_most, (arming, at_least, at_most, spans[:4])
    app.stop()
    assert app.finish()[0] == 0
