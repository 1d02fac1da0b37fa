"""The event pump: its budget covers the subscribers' work, and a replay can wait for it or drop its backlog."""

import time

from tdescope.ui.gui_thread.event_pump import EventPump


def _work(seconds: float) -> None:
    """Hold the GUI thread for ``seconds`` of its CPU time (work, as a subscriber's is)."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _pump(qtbot, **kw) -> EventPump:
    pump = EventPump(**kw)
    pump.stop()  # drained by hand below
    return pump


def test_a_drain_whose_subscribers_overran_the_budget_takes_fewer_events_next_time(qtbot):
    pump = _pump(qtbot, budget_ms=5.0)
    taken, cost = [], [0.1]

    def slow(batch):  # twenty times the 5 ms budget, whatever the batch
        taken.append(len(batch))
        _work(cost[0])

    pump.subscribe(int, slow)
    for i in range(20000):
        pump.put(i)
    pump.drain()
    pump.drain()
    # a drain that cost twenty times its budget takes a twentieth as many events next time (50 at least)
    assert taken[1] <= max(50, taken[0] // 20)
    cost[0] = 0.0
    while pump.drain():
        pass
    assert sum(taken) == 20000 and pump.idle  # nothing lost, only spread over more ticks


def test_cheap_subscribers_let_the_batch_grow_back(qtbot):
    pump = _pump(qtbot, budget_ms=5.0)
    cost = [0.1]
    taken = []
    pump.subscribe(int, lambda batch: (taken.append(len(batch)), _work(cost[0])))
    for i in range(30000):
        pump.put(i)
    pump.drain()
    pump.drain()
    cost[0] = 0.0
    while pump.drain():
        pass
    assert max(taken[2:]) > taken[1]


def test_when_idle_runs_after_the_last_queued_event_reached_its_subscriber(qtbot):
    pump = _pump(qtbot)
    seen, order = [], []
    pump.subscribe(int, seen.extend)
    pump.when_idle(lambda: order.append("at once"))  # nothing queued
    for i in range(12000):
        pump.put(i)
    pump.when_idle(lambda: order.append(len(seen)))
    assert order == ["at once"]
    while pump.drain():
        pass
    pump.drain()
    assert order == ["at once", 12000]


def test_discard_drops_the_backlog_and_room_comes_back(qtbot):
    pump = _pump(qtbot, room=100)
    seen = []
    pump.subscribe(int, seen.extend)
    for i in range(40):
        pump.put(i)
    assert pump.has_room and not pump.idle and not pump.catching_up  # fewer than the smallest drain takes
    for i in range(110):
        pump.put(i)
    assert not pump.has_room and pump.catching_up
    assert pump.discard() == 150
    assert pump.has_room and pump.idle and pump.drain() == 0 and seen == []


def test_an_item_put_with_a_weight_counts_as_that_many_events(qtbot):
    """A replay's batch is one item standing for hundreds of events: the room, the backlog and the drain's
    limit count events, or a few thousand batches (the whole file) would queue as "room to spare"."""
    pump = _pump(qtbot, room=1000)
    taken = []
    pump.subscribe(bytes, lambda batch: taken.extend(batch))
    pump.subscribe(int, lambda batch: taken.extend(batch))
    for i in range(3):
        pump.put(bytes([i]), weight=256)
    assert pump.queued == 768 and pump.has_room and pump.catching_up
    pump.put(bytes([3]), weight=256)
    assert pump.queued == 1024 and not pump.has_room  # four items, 1,024 events: over the room
    pump._limit = 300  # a drain that may take 300 events takes two batches (256 + 256 reaches it), not 300
    assert pump.drain() == 512 and taken == [b"\x00", b"\x01"] and pump.queued == 512
    pump.put(7)  # weight 1, as every live event
    assert pump.discard() == 513 and pump.queued == 0 and pump.idle and pump.has_room


def test_a_backlog_is_drained_at_three_times_the_rate_and_the_rate_comes_back(qtbot):
    """A seek's backlog: ticks come three times as often (each still within its budget), so the views hold
    the hour about as soon as when the decoding ran in the window's process; a live stream keeps 15 Hz."""
    pump = EventPump(interval_ms=66)
    pump.subscribe(int, lambda batch: None)
    try:
        assert pump._timer.interval() == 66
        pump._limit = 100
        for i in range(1000):
            pump.put(i)
        pump.drain()
        assert pump.catching_up and pump._timer.interval() == 22
        while pump.drain():
            pass
        assert pump.idle and pump._timer.interval() == 66
    finally:
        pump.stop()


def test_a_drain_takes_one_event_at_least_however_late_it_runs(qtbot):
    """A tick whose thread lost the CPU before its first take (a busy run saw a drain deliver nothing, and a
    loop of drains end with events still queued) still delivers one: no budget is spent before the first."""
    pump = _pump(qtbot, budget_ms=0.0)
    seen = []
    pump.subscribe(int, seen.extend)
    for i in range(3):
        pump.put(i)
    while pump.drain():
        pass
    assert seen == [0, 1, 2] and pump.idle
