"""ThreadStops: what a process's threads felt, read from /proc (a real child stopped with SIGSTOP)."""

import os
import signal
import subprocess
import time

from conftest import wait_for
from tdescope.app.system.threadstops import ThreadStops, stopped_threads, thread_ids


def test_a_stopped_thread_is_seen_while_stopped_and_after():
    child = subprocess.Popen(["sleep", "60"])
    meter = ThreadStops(child.pid).start()
    try:
        assert thread_ids(child.pid) == [child.pid] and stopped_threads(child.pid) == []
        os.kill(child.pid, signal.SIGSTOP)
        wait_for(lambda: meter.current_s() > 0.05, what="the stop under way")
        assert stopped_threads(child.pid) == [child.pid]
        mark = time.monotonic()
        assert meter.current_s(after=mark + 60) == 0.0  # no sweep after that time yet
        os.kill(child.pid, signal.SIGCONT)
        wait_for(lambda: meter.current_s() == 0.0, what="the thread running again")
        figures = meter.stop()
        assert figures.threads == 1 and figures.longest_s > 0.05
        assert figures.most_stopped_s > 0.0 and figures.all_stopped_s > 0.0 and figures.sweeps > 1
    finally:
        meter.stop()
        child.kill()
        child.wait()


def test_the_stop_bound_holds_the_whole_stop_and_waits_for_its_end():
    child = subprocess.Popen(["sleep", "60"])
    meter = ThreadStops(child.pid).start()
    try:
        wait_for(lambda: meter.last_sweep > time.monotonic() - 1 and meter.stop_bound(0.0) == 0.0,
                 what="a sweep that saw no stop")
        os.kill(child.pid, signal.SIGSTOP)
        wait_for(lambda: meter.current_s() > 0, what="the stop seen")
        seen_stopped = time.monotonic()
        time.sleep(0.1)
        assert meter.stop_bound(seen_stopped) is None  # under way: it may yet grow
        os.kill(child.pid, signal.SIGCONT)
        continued = time.monotonic()
        wait_for(lambda: meter.stop_bound(continued) is not None, what="a sweep that saw it run again")
        # the stop lasted at least from when it was seen to the SIGCONT, whenever the sampler ran
        assert meter.stop_bound(continued) >= continued - seen_stopped
        assert meter.stop_bound(seen_stopped - 60) == 0.0  # it began after that: not counted
    finally:
        meter.stop()
        child.kill()
        child.wait()


def test_a_process_that_is_gone_has_no_threads_and_no_stops():
    child = subprocess.Popen(["true"])
    child.wait()
    assert thread_ids(child.pid) == [] and stopped_threads(child.pid) == []
    figures = ThreadStops(child.pid).start().stop()
    assert figures.threads == 0 and figures.longest_s == 0.0


def test_the_stop_bucket_fills_with_stops_drains_with_time_and_caps_a_catch_up():
    from tdescope.app.probe.stop_cost import StopBucket

    bucket = StopBucket(duty=0.01, burst_s=0.025)
    assert bucket.feed(5.0, 100.0) is None  # the first feed only starts it: 5 s before are not charged
    assert bucket.feed(5.010, 100.020) is None  # 10 ms stopped in 20 ms: under the 25 ms burst
    resume_in = bucket.feed(5.030, 100.040)  # 20 ms more: over it
    assert resume_in is not None and abs(resume_in - bucket.debt / 0.01) < 1e-9 and 2.5 < resume_in < 3.0
    bucket.start(5.030, 103.0)
    assert bucket.debt == 0.0 and bucket.feed(5.5, 103.010) is None  # a 470 ms catch-up counts 10 ms at most
    full = StopBucket(duty=1.0, burst_s=0.025)
    full.start(0.0, 0.0)
    assert all(full.feed(t * 0.05, t * 0.05) is None for t in range(1, 100))  # 100 %: never over
