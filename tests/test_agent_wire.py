"""A ``CAPTURES`` frame (protocol 3): binary rows then the pages, back to the same ``PageCapture`` events,
and every frame that lies about its sizes refused in one line (``app/remote/wire.py``).
"""

from __future__ import annotations

import io
import os

import pytest

from tdescope.app.events import PageCapture
from tdescope.app.remote import wire
from tdescope.app.remote.protocol import CAPTURE_ROW, Kind, ProtocolError, encode, encode_parts, read_frame


def _captures() -> list[PageCapture]:
    out = []
    for i, (nb, na) in enumerate([(4096, 4096), (1024, 0), (0, 16), (65536, 65536)]):
        out.append(PageCapture(1.7e9 + i / 3, i + 1, "sqlcipher_page_cipher", "decrypt", [-1, 0, 7, 2**40][i],
                               os.urandom(nb), os.urandom(na), 0.1 * i, "sqlcipher", "after",
                               [-1, 12345, 2**62, -7][i], "relation"))
    return out


def test_a_batch_crosses_the_stream_and_comes_back_equal():
    caps = _captures()
    head, parts = wire.captures_frame(caps)
    raw = encode_parts(Kind.CAPTURES, head, parts)
    assert raw == encode(Kind.CAPTURES, head, b"".join(parts))  # one frame, however it is assembled
    kind, header, payload = read_frame(io.BytesIO(raw))
    assert kind is Kind.CAPTURES and "caps" not in header and header["n"] == len(caps)
    assert wire.captures_of(header, payload) == caps


def _frame() -> tuple[dict, bytes]:
    head, parts = wire.captures_frame(_captures()[:2])
    return head, b"".join(parts)


@pytest.mark.parametrize("change, fragment", [
    (lambda h, p: ({**h, "n": 3}, p), "page lengths past the payload"),  # a page read as a row
    (lambda h, p: ({**h, "n": 10**6}, p), "more rows than its payload"),
    (lambda h, p: ({**h, "n": -1}, p), "more rows than its payload"),
    (lambda h, p: ({**h, "n": "x"}, p), "bad field"),
    (lambda h, p: ({k: v for k, v in h.items() if k != "symbol"}, p), "bad field"),
    (lambda h, p: (h, p[:-1]), "page lengths past the payload"),
    (lambda h, p: (h, p + b"\0"), "payload longer than its pages"),
    (lambda h, p: (h, CAPTURE_ROW.pack(0.0, 0.0, 1, 1, -1, 2**31, 0) + p[CAPTURE_ROW.size:]),
     "page lengths past the payload"),
])
def test_a_frame_that_lies_about_its_sizes_is_one_line(change, fragment):
    head, payload = change(*_frame())
    with pytest.raises(ProtocolError, match=fragment) as caught:
        wire.captures_of(head, payload)
    assert "\n" not in str(caught.value)


def test_the_captures_pipe_is_widened_and_a_socket_is_left_alone():
    import fcntl
    import socket

    from tdescope.app.remote.protocol import PIPE_BYTES, widen_pipe

    r, w = os.pipe()
    try:
        assert fcntl.fcntl(w, 1032) < PIPE_BYTES  # F_GETPIPE_SZ: the kernel's default first
        assert widen_pipe(w) and fcntl.fcntl(r, 1032) == PIPE_BYTES  # one pipe: both ends see it
    finally:
        os.close(r)
        os.close(w)
    a, b = socket.socketpair()
    with a, b:
        assert not widen_pipe(a.fileno())


# -- recipes, limits and summaries (issue #25 item 2: typed, and over the wire as JSON) ------------------------

def _json(fields: dict) -> dict:
    import json

    return json.loads(json.dumps(fields))


def test_limits_cross_the_wire_with_their_stop_limits():
    from tdescope.app.probe.limits import CaptureLimits, StopLimits

    limits = CaptureLimits(max_captures=7, max_seconds=3, max_kept_per_s=50,
                           stops=StopLimits(max_busy_fraction=0.5, max_burst_s=0.5, watchdog_s=1, accept_stop=True))
    assert wire.limits_of(_json(wire.to_fields(limits))) == limits
    assert wire.limits_of({"max_captures": 3}) == CaptureLimits(max_captures=3)
    with pytest.raises(ProtocolError, match="stop limits"):
        wire.limits_of({"stops": {"colour": 1}})
    with pytest.raises(ProtocolError, match="limits"):
        wire.limits_of({"max_busy_fraction": 0.5})  # the old, flat shape


@pytest.mark.parametrize("backend", ["gdb", "ebpf"])
def test_a_summary_crosses_the_wire_typed(backend):
    from tdescope.app.gdb.guard import GuardReport
    from tdescope.app.probe.backend import Happened
    from tdescope.app.probe.stats import EbpfStats, GdbStats, WindowCounts
    from tdescope.app.probe.window import CaptureSummary

    probe = GdbStats(busy_s=0.1, hits=9, reinserted=2) if backend == "gdb" else EbpfStats(busy_s=0.2, hits=9, lost=1, emitted=8)
    summary = CaptureSummary(captures=5, reason="target exited", armed_symbol="f", locations=("0x1",), stopped_s=0.1,
                             elapsed_s=2.0, backend=backend, ended_by=Happened.TARGET_EXITED,
                             counters=WindowCounts(probe=probe, captured=5, thinned=1, not_kept=2, messages=0),
                             guard=GuardReport(restored=1, fast_ms=0.2, ms=0.9, continued=True))
    back = wire.summary_of(_json(wire.summary_fields(summary)))
    assert back == summary and type(back.counters.probe) is type(probe) and back.target_exited
    bare = CaptureSummary.failed("no symbol f")
    assert wire.summary_of(_json(wire.summary_fields(bare))) == bare
    fields = _json(wire.summary_fields(summary))
    fields["counters"]["probe"]["kind"] = "perf"
    with pytest.raises(ProtocolError, match="no known probe"):
        wire.summary_of(fields)
