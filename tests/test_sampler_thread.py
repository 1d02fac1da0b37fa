"""BackgroundSampler: the one start/stop lifecycle of perf hotspots, /proc waits and eBPF waits."""

from __future__ import annotations

import threading

import pytest

from conftest import wait_for
from tdescope.app.errors import UserError
from tdescope.app.hotspots.perf_record import HotspotSampler
from tdescope.app.system.sampler_thread import BackgroundSampler
from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer
from tdescope.app.waits.os_sampler import OsWaitSampler


class Ticker(BackgroundSampler):
    """Counts ticks until stopped; reports an error (and stops itself from its own thread) at ``fail_at``."""

    thread_name = "ticker"

    def __init__(self, fail_at: int | None = None, refuse: bool = False, on_error=None) -> None:
        super().__init__(on_error)
        self.fail_at, self.refuse = fail_at, refuse
        self.ticks = self.opened = self.interrupted = self.closed = 0
        self.loop_thread: threading.Thread | None = None

    def _open(self) -> None:
        if self.refuse:
            raise UserError("no process 1234567")
        self.opened += 1

    def _loop(self) -> None:
        self.loop_thread = threading.current_thread()
        while not self._stop.wait(0.001):
            self.ticks += 1
            if self.ticks == self.fail_at:
                self._error("the target went away")
                self.stop()  # from the loop's own thread: must not join itself
                return

    def _interrupt(self) -> None:
        self.interrupted += 1

    def _close(self) -> None:
        self.closed += 1


def test_start_runs_the_loop_in_a_named_daemon_thread_and_stop_ends_it():
    with Ticker() as ticker:
        wait_for(lambda: ticker.ticks > 3)
        assert ticker.running and ticker.loop_thread.name == "ticker" and ticker.loop_thread.daemon
        with pytest.raises(RuntimeError, match="already started"):
            ticker.start()
    assert not ticker.running and not ticker.loop_thread.is_alive()
    assert (ticker.opened, ticker.interrupted, ticker.closed) == (1, 1, 1)
    ticks = ticker.ticks
    ticker.stop()  # idempotent: nothing runs again
    assert ticker.ticks == ticks and ticker.closed == 2


def test_a_refused_open_raises_in_the_callers_thread_and_starts_nothing():
    ticker = Ticker(refuse=True)
    with pytest.raises(UserError, match="no process"):
        ticker.start()
    assert ticker.loop_thread is None and not ticker.running


def test_an_error_in_the_loop_arrives_as_a_message_and_may_stop_the_sampler_from_its_thread():
    errors: list[str] = []
    ticker = Ticker(fail_at=5, on_error=errors.append).start()
    wait_for(lambda: not ticker.running)
    assert errors == ["the target went away"] and ticker.closed == 1 and ticker.ticks == 5
    ticker.stop()


@pytest.mark.parametrize("sampler", [HotspotSampler, OsWaitSampler, EbpfWaitTracer])
def test_every_sampler_has_the_one_lifecycle(sampler):
    """Issue #25 item 6: the start/stop code was written three times (perf_record.py ≈ os_sampler.py)."""
    assert issubclass(sampler, BackgroundSampler)
    own = {"start", "stop", "__enter__", "__exit__", "running", "_error"} & set(vars(sampler))
    assert own == set()
