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


def test_a_process_that_is_gone_has_no_threads_and_no_stops():
    child = subprocess.Popen(["true"])
    child.wait()
    assert thread_ids(child.pid) == [] and stopped_threads(child.pid) == []
    figures = ThreadStops(child.pid).start().stop()
    assert figures.threads == 0 and figures.longest_s == 0.0
