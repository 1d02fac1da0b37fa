"""Observation of a real target: perf + /proc (+ an engine wait source) into one sink;
side spans and the observed-run aggregates the live views read."""

from __future__ import annotations

import subprocess
import threading
import time
from collections import Counter

import pytest

from conftest import wait_for
from tdescope.app.engines.api import WorkloadControl
from tdescope.app.events import HotspotWindow, Problem, WaitSample, WorkloadProgress
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.hotspots.profile import check_perf
from tdescope.app.events import HotspotLeaves
from tdescope.app.observe.sampling import Observation
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.waits.os_sampler import WAIT_CLASSES
from tdescope.app.observe.timeline import SideSpan, side_of, side_spans


class Sink:
    def __init__(self) -> None:
        self.events = []
        self.lock = threading.Lock()

    def __call__(self, ev) -> None:
        with self.lock:
            self.events.append(ev)

    def of(self, kind):
        with self.lock:
            return [e for e in self.events if isinstance(e, kind)]


@pytest.mark.perf
def test_observation_of_the_lab_sees_crypto_and_classifies_waits(lab):
    problem = check_perf()
    if problem is not None:
        pytest.skip(problem)
    sink = Sink()
    # start_blocking: perf holds its events before the workload starts a thread (the attach race)
    obs = Observation(lab.server_pid(), sink, window_s=0.5).start_blocking()
    control = WorkloadControl(sink)
    workload = next(w for w in lab.workloads() if w.name == "ab_dml")
    params = {**workload.params, "groups": 48}  # each side longer than a 0.5 s window, so windows fall in one side

    def drive() -> None:
        while not control.cancelled:
            workload.run(params, control)

    runner = threading.Thread(target=drive, daemon=True)
    runner.start()
    try:
        # perf script lags behind on a loaded 2-core box (DWARF stacks): wait for windows, not for a clock
        def plain_window_seen() -> bool:  # a hotspot window that began after the plain side started
            plain = [e.ts for e in sink.of(WorkloadProgress) if e.side == "plain"]
            return bool(plain) and any(w.start > plain[0] for w in sink.of(HotspotWindow))

        wait_for(lambda: len(sink.of(HotspotWindow)) >= 5 and plain_window_seen(), timeout=30, interval=0.1,
                 what="5 hotspot windows, one on the plain side")
    finally:
        obs.stop()
        control.cancel()
        runner.join(30)
    assert not obs.hotspots_on and not obs.waits_on
    assert not sink.of(Problem), sink.of(Problem)
    run = ObservedRun()
    run.add_windows(sink.of(HotspotWindow))
    run.add_leaves(sink.of(HotspotLeaves))
    run.add_waits(sink.of(WaitSample))
    run.add_progress(sink.of(WorkloadProgress))
    assert len(run.windows) >= 4
    top = [r.symbol for r in run.profile().top(12)]
    assert any(is_crypto(s) for s in top), top
    assert any(s.startswith(("aesni_", "sha512_block")) for s in top), top
    # the disassembly heat has offsets for the crypto leaves
    crypto_leaves = [s for s in run._heat if s.startswith(("aesni_", "sha512_block"))]
    assert crypto_leaves and sum(run.heat(crypto_leaves[0]).values()) > 0
    waits = sink.of(WaitSample)
    assert len(waits) > 40 and {w.wait_class for w in waits} <= set(WAIT_CLASSES)
    busy = Counter(w.wait_class for w in waits if w.wait_class != "Idle")  # its stdin reader idles
    assert busy.most_common(1)[0][0] == "CPU", busy
    # both sides ran, and the windows were told apart
    sides = run.side_profiles()
    assert {"encrypted", "plain"} <= set(sides), [s.side for s in run.spans]


def test_perf_missing_is_one_problem_and_waits_go_on(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no perf here
    target = subprocess.Popen(["/bin/sleep", "600"])
    sink = Sink()
    try:
        obs = Observation(target.pid, sink, wait_hz=40).start()
        wait_for(lambda: sink.of(Problem) and len(sink.of(WaitSample)) >= 10, what="the perf problem and 10 waits")
        obs.set_hotspots(True)  # asked again (it blocks for the perf check): nothing new to say
        obs.stop()
    finally:
        target.kill()
        target.wait()
    problems = sink.of(Problem)
    assert len(problems) == 1, problems
    assert problems[0].source == "hotspots" and "perf not found" in problems[0].message
    assert "\n" not in problems[0].message
    waits = sink.of(WaitSample)
    assert Counter(w.wait_class for w in waits).most_common(1)[0][0] == "Idle"
    assert not sink.of(HotspotWindow)


class CountingSource:
    """A minimal engine wait source (the real ones arrive with PostgreSQL and Oracle)."""

    def __init__(self, pid: int, fail_after: int | None = None) -> None:
        self.pid, self.calls, self.fail_after = pid, 0, fail_after

    def sample(self):
        self.calls += 1
        if self.fail_after is not None and self.calls > self.fail_after:
            raise ConnectionError("server closed the connection")
        return [WaitSample(time.time(), self.pid, self.pid, "testdb", "IO", "DataFileRead")]


def test_engine_waits_beside_os_waits_and_a_failing_source_stops_alone():
    target = subprocess.Popen(["/bin/sleep", "600"])
    sink = Sink()

    def samples(sink, source):
        return [w for w in sink.of(WaitSample) if w.source == source]

    try:
        good = CountingSource(target.pid)
        obs = Observation(target.pid, sink, hotspots=False, wait_source=good, engine_hz=20).start()
        wait_for(lambda: len(samples(sink, "testdb")) >= 5 and samples(sink, "os"), what="engine and OS waits")
        obs.stop()
        # every call of the source became one sample (a call under way at stop lands just after)
        wait_for(lambda: good.calls == len(samples(sink, "testdb")), what="each engine call as one sample")

        sink2 = Sink()
        bad = CountingSource(target.pid, fail_after=2)
        obs = Observation(target.pid, sink2, hotspots=False, wait_source=bad, engine_hz=20).start()
        wait_for(lambda: sink2.of(Problem), what="the failing source's problem")
        os_before = len(samples(sink2, "os"))
        wait_for(lambda: len(samples(sink2, "os")) >= os_before + 5, what="OS waits after the failure")
        obs.stop()
    finally:
        target.kill()
        target.wait()
    problems = sink2.of(Problem)
    assert len(problems) == 1 and "ConnectionError" in problems[0].message
    assert bad.calls == 3  # the failing source was not asked again while the OS waits went on


def test_pause_stops_the_waits_and_resume_brings_back_only_what_ran():
    target = subprocess.Popen(["/bin/sleep", "10"])
    try:
        sink = Sink()
        obs = Observation(target.pid, sink, hotspots=False, wait_hz=40).start_blocking()
        assert obs.waits_on
        obs.pause()
        obs.pause()  # twice: the second must not forget that the waits ran
        assert not obs.waits_on
        paused = len(sink.of(WaitSample))
        time.sleep(0.2)  # a paused sampler would have taken ~8 samples by now
        assert len(sink.of(WaitSample)) <= paused + 1  # one under way at the pause may land
        obs.resume()
        obs.resume()
        assert obs.waits_on
        wait_for(lambda: len(sink.of(WaitSample)) >= paused + 5, what="OS waits after resume")
        obs.stop()
        quiet = Observation(target.pid, Sink(), hotspots=False, waits=False).start_blocking()
        quiet.pause()
        quiet.resume()
        assert not quiet.waits_on  # resume turns on only what ran before the pause
        quiet.stop()
    finally:
        target.kill()
        target.wait()


def _progress(ts, side, done, total=4, workload="ab_dml"):
    return WorkloadProgress(ts, workload, side, done, total)


@pytest.mark.parametrize("events, expected", [
    # four steps of 1 s each side: the span starts one step before its first event
    ([_progress(101, "encrypted", 1), _progress(102, "encrypted", 2), _progress(103, "encrypted", 3),
      _progress(104, "plain", 1), _progress(105, "plain", 2)],
     [SideSpan("ab_dml", "encrypted", 100, 103), SideSpan("ab_dml", "plain", 103, 105)]),
    # one event per side (cold/warm): starts at the previous event
    ([_progress(10, "encrypted", 1, 2, "cold_warm"), _progress(12.5, "plain", 2, 2, "cold_warm")],
     [SideSpan("cold_warm", "encrypted", 9, 10), SideSpan("cold_warm", "plain", 10, 12.5)]),
    # a second run of the same side restarts done: a new span
    ([_progress(1, "plain", 1), _progress(2, "plain", 2), _progress(50, "plain", 1), _progress(51, "plain", 2)],
     [SideSpan("ab_dml", "plain", 0, 2), SideSpan("ab_dml", "plain", 49, 51)]),
    ([], []),
])
def test_side_spans(events, expected):
    assert side_spans(reversed(events)) == expected


def test_side_of_picks_the_largest_overlap():
    spans = [SideSpan("w", "encrypted", 0, 10), SideSpan("w", "plain", 10, 14)]
    assert side_of(8, 11, spans) == "encrypted"
    assert side_of(9.5, 13, spans) == "plain"
    assert side_of(20, 21, spans) is None


def test_observed_run_ranges_and_wait_top():
    run = ObservedRun(bucket_s=0.5)
    run.add_windows([
        HotspotWindow(ts=101, start=100, pid=1, stacks={"main;aesni_cbc_encrypt": 6, "main;memcpy": 2}, dsos={}),
        HotspotWindow(ts=102, start=101, pid=1, stacks={"main;sqlite3VdbeExec": 8}, dsos={}),
    ])
    assert run.profile().samples == 16
    assert run.profile(101.5, 102).samples == 8
    assert run.last_profile().top(1)[0].symbol == "sqlite3VdbeExec"
    assert run.stacks() == {"main;aesni_cbc_encrypt": 6, "main;memcpy": 2, "main;sqlite3VdbeExec": 8}
    waits = [WaitSample(100 + i * 0.1, 1, 1, "os", "CPU" if i < 10 else "File I/O",
                        "on CPU" if i < 10 else "pread64") for i in range(20)]
    waits.append(WaitSample(100.5, 1, 1, "os", "Idle", "epoll_wait"))
    run.add_waits(waits)
    top = run.waits.top(5, exclude=("Idle",))
    assert [(r.wait_class, r.samples) for r in top] == [("CPU", 10), ("File I/O", 10)]
    assert top[0].pct == pytest.approx(50.0)
    ranged = run.waits.top(5, 101.0, 102.0)
    assert [(r.wait_class, r.samples) for r in ranged] == [("File I/O", 10)]
    assert run.waits.series["CPU"][:2] == [5, 5] and sum(run.waits.series["File I/O"]) == 10



@pytest.mark.perf
def test_observation_passes_its_call_graph_choice_to_perf():
    """``callgraph="none"``: leaf-only stacks (the default, DWARF, would give the callers too)."""
    problem = check_perf()
    if problem is not None:
        pytest.skip(problem)
    burn = subprocess.Popen(["python3", "-c", "import hashlib, time\nt = time.time()\n"
                             "while time.time() - t < 30: hashlib.sha256(b'x' * 4096).digest()"])
    sink = Sink()
    try:
        obs = Observation(burn.pid, sink, waits=False, window_s=0.5, callgraph="none").start_blocking()
        try:
            wait_for(lambda: any(w.stacks for w in sink.of(HotspotWindow)), timeout=20, interval=0.1,
                     what="a hotspot window with samples")
        finally:
            obs.stop()
    finally:
        burn.kill()
        burn.wait()
    stacks = [s for w in sink.of(HotspotWindow) for s in w.stacks]
    assert stacks and all(";" not in s for s in stacks), stacks[:3]
