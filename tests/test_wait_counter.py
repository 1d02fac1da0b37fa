"""The one wait counter: top-N over a range, per-class series, rows read from a session file."""

from __future__ import annotations

import pytest

from tdescope.app.events import WaitSample
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta
from tdescope.app.waits.counter import WaitCounter


def ws(ts, cls, ev, source="os", tid=1):
    return WaitSample(ts=ts, pid=1, tid=tid, source=source, wait_class=cls, event=ev)


# Five OS samples from 100.0 and two engine ones; one OS sample arrives late (a second sampler).
RUN = [ws(100.0, "CPU", "on CPU"), ws(100.1, "File I/O", "pread64"), ws(100.2, "File I/O", "pread64"),
       ws(100.3, "Idle", "epoll_wait"), ws(100.2, "User I/O", "db file sequential read", "oracle"),
       ws(100.6, "File I/O", "pread64", tid=2), ws(100.05, "CPU", "on CPU", tid=3),
       ws(100.7, "CPU", "ON CPU", "oracle")]


@pytest.mark.parametrize("n, start, end, exclude, expected", [
    # whole run: pct within each source (6 OS samples, 2 engine ones)
    (3, None, None, (), [("os", "File I/O", "pread64", 3, 50.0), ("os", "CPU", "on CPU", 2, 100 / 3),
                          ("oracle", "CPU", "ON CPU", 1, 50.0)]),
    # ties rank by source, class, event
    (9, None, None, ("Idle",), [("os", "File I/O", "pread64", 3, 60.0), ("os", "CPU", "on CPU", 2, 40.0),
                                ("oracle", "CPU", "ON CPU", 1, 50.0),
                                ("oracle", "User I/O", "db file sequential read", 1, 50.0),
                                ]),
    # a range is closed at both ends and sees the late sample in its place
    (9, 100.05, 100.2, ("Idle",), [("os", "File I/O", "pread64", 2, 200 / 3),
                                   ("oracle", "User I/O", "db file sequential read", 1, 100.0),
                                   ("os", "CPU", "on CPU", 1, 100 / 3)]),
    # open-ended ranges
    (9, 100.6, None, (), [("oracle", "CPU", "ON CPU", 1, 100.0), ("os", "File I/O", "pread64", 1, 100.0)]),
    (1, None, 100.0, (), [("os", "CPU", "on CPU", 1, 100.0)]),
    # nothing in range, everything excluded
    (9, 200.0, 300.0, (), []),
    (9, None, None, ("CPU", "File I/O", "Idle", "User I/O"), []),
])
def test_top(n, start, end, exclude, expected):
    counter = WaitCounter()
    counter.add(RUN)
    rows = counter.top(n, start, end, exclude=exclude)
    assert [(r.source, r.wait_class, r.event, r.samples) for r in rows] == [e[:4] for e in expected]
    assert [r.pct for r in rows] == pytest.approx([e[4] for e in expected])
    assert counter.samples == len(RUN)


@pytest.mark.parametrize("origin, bucket_s, os_series, engine_series, merged", [
    # origin = first sample; the late OS sample lands in its own bucket
    (None, 0.25, {"CPU": [2], "File I/O": [2, 0, 1], "Idle": [0, 1]},
     {"User I/O": [1], "CPU": [0, 0, 1]},
     {"CPU": [2, 0, 1], "File I/O": [2, 0, 1], "Idle": [0, 1, 0], "User I/O": [1, 0, 0]}),
    # a run's origin before the first sample shifts the buckets
    (99.5, 0.5, {"CPU": [0, 2], "File I/O": [0, 2, 1], "Idle": [0, 1]},
     {"User I/O": [0, 1], "CPU": [0, 0, 1]},
     {"CPU": [0, 2, 1], "File I/O": [0, 2, 1], "Idle": [0, 1, 0], "User I/O": [0, 1, 0]}),
    # samples before the origin are in no bucket
    (100.15, 0.25, {"File I/O": [1, 1], "Idle": [1]},
     {"User I/O": [1], "CPU": [0, 0, 1]},
     {"File I/O": [1, 1, 0], "Idle": [1, 0, 0], "User I/O": [1, 0, 0], "CPU": [0, 0, 1]}),
])
def test_series(origin, bucket_s, os_series, engine_series, merged):
    counter = WaitCounter(bucket_s, origin)
    counter.add(RUN)
    assert {c: v for c, v in counter.series.items() if v} == os_series
    assert counter.engine_series == engine_series
    assert counter.class_series(3) == merged
    assert counter.class_series(1) == {c: v[:1] for c, v in merged.items() if v[0]}


def test_bucket_index_truncates_like_sqlite():
    # 0.3 // 0.1 == 2.0 but int(0.3 / 0.1) == 2 and 1.0 // 0.1 == 9.0 where 1.0 / 0.1 == 10.0:
    # the bucket is the truncated quotient, as the report's SQL computed it
    counter = WaitCounter(0.1, origin=0.0)
    counter.add([ws(1.0, "CPU", "on CPU")])
    assert counter.series["CPU"] == [0] * 10 + [1]


def test_rows_count_like_samples():
    samples, rows = WaitCounter(0.25), WaitCounter(0.25)
    samples.add([ws(100.0, "CPU", "on CPU", tid=t) for t in range(3)] + [ws(100.5, "Lock", "futex")]
                + [ws(100.25, "Other", "x", "postgres")])
    rows.add_rows([(100.0, "os", "CPU", "on CPU")] * 3 + [(100.5, "os", "Lock", "futex"),
                                                          (100.25, "postgres", None, "x")])  # no class: Other
    assert rows.samples == samples.samples == 5
    assert rows.top() == samples.top()
    assert rows.top(start=100.1, end=100.4) == samples.top(start=100.1, end=100.4)
    assert rows.series == samples.series and rows.engine_series == samples.engine_series


def test_recorded_rows_count_like_the_live_samples(tmp_path):
    samples = [ws(1000.0 + k / 20, cls, ev, src, tid) for k in range(40) for tid, (src, cls, ev) in enumerate([
        ("os", "CPU" if k % 3 else "File I/O", "on CPU" if k % 3 else "pread64"),
        ("os", "Idle", "epoll_wait"), ("oracle", "User I/O", "db file sequential read")])]
    samples.append(ws(999.0, "Lock", "futex"))  # recorded late, read in its place
    with SessionRecorder(tmp_path / "s.tds", SessionMeta()) as rec:
        for s in samples:
            rec.record(s)
    with SessionReader(tmp_path / "s.tds") as reader:
        rows = reader.wait_rows()
    assert rows == sorted(((s.ts, s.source, s.wait_class, s.event) for s in samples), key=lambda r: r[0])
    live, recorded = WaitCounter(0.3, 999.0), WaitCounter(0.3, 999.0)
    live.add(samples)
    recorded.add_rows(rows)
    assert recorded.top(20) == live.top(20)
    assert recorded.top(20, 1000.5, 1001.0) == live.top(20, 1000.5, 1001.0)
    assert recorded.class_series(12) == live.class_series(12)
