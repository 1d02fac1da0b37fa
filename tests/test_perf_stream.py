"""The streaming hotspot sampler: one perf record piped into one perf script for the whole
observation, windows cut by the samples' own time (real perf on real processes), and the pure cutter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from conftest import compile_client, wait_for
from tdescope.app.hotspots.perf_script import Frame, Sample
from tdescope.app.hotspots.profile import HotspotSampler, Profile, check_perf
from tdescope.app.hotspots.time_windows import WindowCutter
from tdescope.app.system.procstat import process_state


def _sample(ts: float, leaf: str = "f") -> Sample:
    return Sample("t", 1, 1, ts, 1, "cpu-clock", (Frame(0x10, leaf, 0, "/bin/t"),))


def _names(cuts) -> list[list[str]]:
    return [[s.leaf.symbol for s in c.samples] for c in cuts]


# --- the cutter, pure ----------------------------------------------------------------------------

def test_a_window_goes_out_once_a_later_sample_has_come():
    cut = WindowCutter(origin=100.0, length=1.0)
    cut.add(_sample(100.2, "a"))
    cut.add(_sample(100.9, "b"))
    assert cut.due(now=101.5, idle=False) == []  # the stream has not passed 101.0 yet
    cut.add(_sample(101.1, "c"))
    done = cut.due(now=101.5, idle=False)
    assert [(c.start, c.end) for c in done] == [(100.0, 101.0)] and _names(done) == [["a", "b"]]
    cut.add(_sample(103.4, "d"))  # a quiet second, then a sample: the empty window goes out too
    done = cut.due(now=103.5, idle=False)
    assert [(c.start, c.end) for c in done] == [(101.0, 102.0), (102.0, 103.0)]
    assert _names(done) == [["c"], []]


def test_a_quiet_stream_closes_windows_after_the_grace_only_when_the_pipes_are_empty():
    cut = WindowCutter(origin=0.0, length=1.0, grace=1.0, cap=10.0)
    cut.add(_sample(0.5))
    assert cut.due(now=1.5, idle=True) == []  # within the grace: stragglers may still come
    assert cut.due(now=2.5, idle=False) == []  # data waits in a pipe: perf script is behind, not idle
    done = cut.due(now=2.5, idle=True)
    assert [(c.start, c.end) for c in done] == [(0.0, 1.0)]  # (1.0, 2.0) is still within its grace
    done = cut.due(now=15.0, idle=False)  # past the cap: out whatever the pipes hold
    assert [c.end for c in done] == [2.0, 3.0, 4.0, 5.0]


def test_a_straggler_counts_in_the_next_window_and_is_counted_late():
    cut = WindowCutter(origin=0.0, length=1.0)
    cut.add(_sample(-0.1, "attach"))  # taken while perf attached: the first window, not late
    cut.add(_sample(1.2, "b"))
    assert _names(cut.due(now=1.3, idle=False)) == [["attach"]]
    cut.add(_sample(0.9, "late"))
    assert cut.late == 1
    cut.add(_sample(2.1, "c"))
    assert _names(cut.due(now=2.2, idle=False)) == [["b", "late"]]


def test_at_the_end_of_the_stream_the_last_window_is_cut_at_its_last_moment():
    cut = WindowCutter(origin=0.0, length=1.0)
    for ts in (0.1, 1.5, 2.2):
        cut.add(_sample(ts))
    done = cut.rest(now=2.4)
    assert [(c.start, c.end, len(c.samples)) for c in done] == [(0.0, 1.0, 1), (1.0, 2.0, 1), (2.0, 2.4, 1)]
    assert WindowCutter(0.0, 1.0).rest(now=0.5) == []  # nothing sampled: no window


# --- real perf -----------------------------------------------------------------------------------

def _need_perf() -> None:
    problem = check_perf()
    if problem is not None:
        pytest.skip(problem)


def _alive(pid: int) -> bool:
    return process_state(pid) not in ("", "Z")


@pytest.mark.perf
def test_windows_hold_the_samples_of_their_own_time_with_callers_unwound(tmp_path):
    """A target spins in ``leaf_one`` then in ``leaf_two``: the windows before the switch hold only
    the first, those after only the second, every sample lies inside its window's edges, and the
    callers (built without frame pointers) are unwound: main -> run -> middle_one -> leaf_one."""
    _need_perf()
    exe = compile_client("phases.c", tmp_path / "phases", "-fomit-frame-pointer")
    target = subprocess.Popen([str(exe), "2.0", "2.0"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    pairs, windows, errors = [], [], []
    try:
        with HotspotSampler(target.pid, frequency=199, window_s=0.5, on_samples=pairs.append,
                            on_window=windows.append, on_error=errors.append) as sampler:
            offset = time.time() - time.monotonic()  # the epoch of the monotonic clock perf stamps with
            target.stdin.write("go\n")
            target.stdin.flush()
            switch = float(target.stdout.readline().split()[1]) + offset
            wait_for(lambda: not sampler.running, timeout=60, what="the sampler's end at the target's exit")
    finally:
        target.kill()
        target.wait()
    assert errors == [f"process {target.pid} exited; hotspot sampling stopped"]
    assert len(pairs) == len(windows) >= 6
    for samples, w in zip(pairs, windows):
        assert all(w.start - 0.01 <= s.ts + offset <= w.ts + 0.01 for s in samples), (w.start, w.ts)
    assert all(a.ts == pytest.approx(b.start) for a, b in zip(windows, windows[1:]))  # contiguous
    before = Profile.from_windows([w for w in windows if w.ts < switch - 0.02])
    after = Profile.from_windows([w for w in windows if w.start > switch + 0.02])
    assert before.stat("leaf_one").self_samples > 50 and before.stat("leaf_two").self_samples == 0
    assert after.stat("leaf_two").self_samples > 50 and after.stat("leaf_one").self_samples == 0
    stacks = [s for w in windows for s in w.stacks]
    assert any(s.endswith("main;run;middle_one;leaf_one") for s in stacks), stacks[:5]
    assert any(s.endswith("main;run;middle_two;leaf_two") for s in stacks), stacks[:5]
    assert sampler.late_samples <= 0.01 * sum(sum(w.stacks.values()) for w in windows)


BURSTY = r"""
import hashlib, sys, time
print("ready", flush=True)
sys.stdin.readline()
for _ in range(4):  # 0.15 s of work, then 1.2 s of sleep: a database serving a query now and then
    t = time.monotonic()
    while time.monotonic() - t < 0.15:
        hashlib.sha256(b"x" * 4096).digest()
    time.sleep(1.2)
"""


@pytest.mark.perf
def test_a_bursty_targets_samples_land_in_the_windows_of_their_bursts():
    """perf script prints a batch once the next one has come: without the metronome in perf record's
    pid list, each burst of a bursty target came out with the next burst (measured: half the
    samples 3 s late), in the wrong window."""
    _need_perf()
    target = subprocess.Popen([sys.executable, "-c", BURSTY], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    windows, errors = [], []
    try:
        assert target.stdout.readline().strip() == "ready"
        # 499 Hz, not the default: the sample threshold below was set for it
        with HotspotSampler(target.pid, frequency=499, window_s=0.5, on_window=windows.append,
                            on_error=errors.append) as sampler:
            target.stdin.write("go\n")
            target.stdin.flush()
            wait_for(lambda: not sampler.running, timeout=60, what="the sampler's end at the target's exit")
    finally:
        target.kill()
        target.wait()
    total = sum(sum(w.stacks.values()) for w in windows)
    busy = [w for w in windows if w.stacks]
    print("samples", total, "late", sampler.late_samples, "windows with samples", len(busy), "of", len(windows))
    assert total > 40 and sampler.late_samples <= 0.1 * total
    assert 4 <= len(busy) <= 8  # each burst in the one or two windows of its time


@pytest.mark.perf
def test_stopping_the_sampler_leaves_no_perf(tmp_path):
    _need_perf()
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    target = subprocess.Popen([str(exe), "60"])
    windows = []
    try:
        sampler = HotspotSampler(target.pid, window_s=0.5, on_window=windows.append)
        sampler.start()
        pids = sampler.child_pids
        assert pids is not None and all(_alive(p) for p in pids)
        wait_for(lambda: len(windows) >= 2, timeout=30, what="2 hotspot windows")
        sampler.stop()
        assert not any(_alive(p) for p in pids), [open(f"/proc/{p}/cmdline").read() for p in pids if _alive(p)]
        assert not sampler.running
    finally:
        target.kill()
        target.wait()


@pytest.mark.perf
def test_a_paused_sampler_takes_no_samples_and_resumes_without_a_new_perf(tmp_path):
    """pause() turns perf's events off in the kernel and keeps both perfs (and what perf script has
    loaded): windows cut while paused are empty, and after resume() the same perf samples again."""
    _need_perf()
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    target = subprocess.Popen([str(exe), "60"])
    windows = []

    def sampled_after(t: float) -> list:
        return [w for w in windows if w.start > t]

    try:
        with HotspotSampler(target.pid, window_s=0.5, on_window=windows.append) as sampler:
            pids = sampler.child_pids
            wait_for(lambda: any(w.stacks for w in windows), timeout=30, what="a window with samples")
            assert sampler.pause()
            paused = time.time() + 1.0  # perf record (niced) acts on the command at its next poll
            wait_for(lambda: len(sampled_after(paused)) >= 2, timeout=30, what="2 windows while paused")
            assert [sum(w.stacks.values()) for w in sampled_after(paused)][:2] == [0, 0]
            assert sampler.resume()
            resumed = time.time() + 1.0
            wait_for(lambda: any(w.stacks for w in sampled_after(resumed)), timeout=30,
                     what="a window with samples after resume")
            assert sampler.child_pids == pids and all(_alive(p) for p in pids)
    finally:
        target.kill()
        target.wait()


OWNER = r"""
import sys, time
from tdescope.app.hotspots.perf_record import HotspotSampler
sampler = HotspotSampler(int(sys.argv[1]), window_s=0.5, on_window=lambda w: print("window", flush=True))
sampler.start()
print(*sampler.child_pids, flush=True)
time.sleep(600)
"""


@pytest.mark.perf
@pytest.mark.parametrize("busy", [True, False], ids=["busy", "idle"])
def test_kill_9_of_the_owner_leaves_no_perf(tmp_path, busy):
    """Both perfs run in sessions of their own; they end when the owner is killed (perf record at the
    hang-up of its control fd, and its reaper; perf script then at the end of its input, and its
    reaper), the metronome at EOF on its stdin. An idle target is the sharp case: no sample flows, so
    no broken pipe would end them."""
    _need_perf()
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    target = subprocess.Popen([str(exe), "60"] if busy else ["sleep", "60"])
    owner = subprocess.Popen([sys.executable, "-c", OWNER, str(target.pid)], stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in owner.stdout.readline().split()]
        assert len(pids) == 3 and all(_alive(p) for p in pids)
        timer = threading.Timer(60, owner.kill)  # no window within 60 s: EOF, and the assert below says so
        timer.start()
        try:
            assert owner.stdout.readline() == "window\n", "no window through the pipeline within 60 s"
        finally:
            timer.cancel()
        os.kill(owner.pid, signal.SIGKILL)
        owner.wait()
        wait_for(lambda: not any(_alive(p) for p in pids), timeout=30, interval=0.05,
                 what="perf record, perf script and the metronome gone after kill -9 of their owner")
        assert _alive(target.pid)  # the target goes on, untouched
    finally:
        owner.kill()
        owner.wait()
        target.kill()
        target.wait()
