"""The eBPF wait tracer: attach ``waits.bpf.c`` to one process and read its histograms each second.

:meth:`EbpfWaitTracer.start` loads the program with the target's tgid as a read-only constant and
attaches its three raw tracepoints (no tracefs needed); from then on the kernel times and sizes every
syscall of the process's threads, and its off-CPU time, into per-CPU histograms. A reader thread
sums them once per ``interval_s`` into a cumulative :class:`~tdescope.app.waits.exact.WaitTotals`
and hands it to ``on_totals``: the cost in the workbench is per distinct (syscall, flags, size), not
per call. The program only reads; the kernel detaches it when the file descriptors close, a kill -9
of the workbench included.
"""

from __future__ import annotations

import ctypes
import os
import struct
import time
from collections.abc import Callable
from importlib import resources

from tdescope.app.errors import UserError
from tdescope.app.system.sampler_thread import BackgroundSampler
from tdescope.app.system.bpf_object import BpfObject
from tdescope.app.system.libbpf import possible_cpus
from tdescope.app.waits.ebpf._span_ring import RingReader
from tdescope.app.waits.exact import LAT_BUCKETS, NR_CPU_QUEUE, SizedKey, Span, SyscallAgg, WaitTotals

__all__ = ["PROGRAMS", "EbpfWaitTracer", "object_path"]

#: The object's programs, attached in this order (what ``bpftool prog`` lists while tracing).
PROGRAMS = ("on_sys_enter", "on_sys_exit", "on_sched_switch")
_N_STATS = 5  # waits.bpf.c's S_NSTATS: calls, no room, unmatched, switches, spans out
_AGG = struct.Struct(f"<3Q{LAT_BUCKETS}Q")
_SPAN = struct.Struct("<QQQIIII")  # waits.bpf.c's struct span


class _Key(ctypes.Structure):
    _fields_ = [("nr", ctypes.c_uint32), ("flags", ctypes.c_uint32), ("size", ctypes.c_uint64)]


#: Where the agent put the object it carries (a zipapp's data is no file libbpf can open); None: package data.
OBJECT_OVERRIDE: str | None = None


def object_path() -> str:
    """Where the compiled tracer lives (built by ``make setup``, shipped as package data)."""
    if OBJECT_OVERRIDE is not None:
        return OBJECT_OVERRIDE
    return str(resources.files("tdescope.app.waits.ebpf") / "waits.bpf.o")


class EbpfWaitTracer(BackgroundSampler):
    """Exact waits of every thread of ``pid``, read each ``interval_s``.

    Parameters
    ----------
    pid : int
    interval_s : float
        How often the histograms are read and handed to ``on_totals``.
    on_totals : callable, optional
        Called with each cumulative :class:`WaitTotals`, from the reader thread.
    on_error : callable, optional
        Called with a one-line message (the process exited, a read failed).
    on_spans : callable, optional
        Called with the sampled :class:`~tdescope.app.waits.exact.Span` list of each read (calls of at least
        ``span_min_ns``, at most ``span_max_per_s`` a second: the timeline's exact wait spans).
    """

    thread_name = "ebpf-wait-tracer"
    join_timeout = 5.0

    def __init__(self, pid: int, interval_s: float = 1.0,
                 on_totals: Callable[[WaitTotals], None] | None = None,
                 on_error: Callable[[str], None] | None = None,
                 on_spans: Callable[[list[Span]], None] | None = None,
                 span_min_ns: int = 50_000, span_max_per_s: int = 200) -> None:
        super().__init__(on_error)
        self.pid = pid
        self.on_spans = on_spans
        self.span_min_ns = span_min_ns
        self.span_max_per_s = span_max_per_s
        self._ring = None
        self._spans: list[Span] = []
        self.interval_s = interval_s
        self.on_totals = on_totals
        self._obj: BpfObject | None = None
        self._links: list = []
        self._ncpu = 1

    def _open(self) -> None:
        """Load and attach (UserError in one line when the kernel or the rights refuse); the loop then reads."""
        if not os.path.exists(f"/proc/{self.pid}"):
            raise UserError(f"no process {self.pid}")
        obj = BpfObject(object_path(), "the wait tracer")
        try:
            obj.set_initial(".rodata", struct.pack("<IIQ", self.pid, self.span_max_per_s, self.span_min_ns))
            obj.load()
            self._ncpu = possible_cpus()
            for name in PROGRAMS:
                self._links.append(obj.attach(name))
            self._ring = RingReader(obj.map_fd("spans"), self._on_span)
        except BaseException:
            for link in self._links:
                link.destroy()
            self._links.clear()
            obj.close()
            raise
        self._obj = obj
        self._clock = time.time() - time.monotonic()  # bpf_ktime_get_ns is CLOCK_MONOTONIC

    def read(self) -> WaitTotals:
        """The histograms now, summed over CPUs (cumulative since :meth:`start`)."""
        obj = self._obj
        if obj is None:
            raise UserError("the wait tracer is not attached")
        stride = (_AGG.size + 7) // 8 * 8
        aggs: dict[SizedKey, SyscallAgg] = {}
        for kb, vb in obj.items(obj.map_fd("aggs"), _Key, stride * self._ncpu):
            nr, flags, size = struct.unpack("<IIQ", kb)
            count = total = mx = 0
            lat = [0] * LAT_BUCKETS
            for cpu in range(self._ncpu):
                c, t, m, *buckets = _AGG.unpack_from(vb, cpu * stride)
                count, total, mx = count + c, total + t, max(mx, m)
                for i, k in enumerate(buckets):
                    lat[i] += k
            aggs[SizedKey(nr, flags, size)] = SyscallAgg(count, total, mx, tuple(lat))
        stats = [0] * _N_STATS
        for kb, vb in obj.items(obj.map_fd("stats"), ctypes.c_uint32, 8 * self._ncpu):
            (i,) = struct.unpack("<I", kb)
            if i < _N_STATS:
                stats[i] = sum(struct.unpack(f"<{self._ncpu}Q", vb))
        calls = sum(a.count for k, a in aggs.items() if k.nr < NR_CPU_QUEUE)
        return WaitTotals(aggs, calls, stats[1], stats[2], time.time())

    def _close(self) -> None:
        """Hand over a last read (the calls since the previous one), detach and unload."""
        if self._obj is not None:
            try:
                self._hand_over()
            except Exception as err:  # errors cross threads as messages
                self._error(f"eBPF wait tracer failed: {err!r}")
        if self._ring is not None:
            self._ring.close()
            self._ring = None
        for link in self._links:
            link.destroy()
        self._links.clear()
        if self._obj is not None:
            self._obj.close()
            self._obj = None

    def _loop(self) -> None:
        try:
            while not self._stop.wait(self.interval_s):
                if not os.path.exists(f"/proc/{self.pid}"):
                    self._error(f"process {self.pid} exited; eBPF wait tracing stopped")
                    return
                self._hand_over()
        except Exception as err:  # errors cross threads as messages
            self._error(f"eBPF wait tracer failed: {err!r}")

    def _hand_over(self) -> None:
        if self.on_totals is not None:
            self.on_totals(self.read())
        if self._ring is not None:
            self._ring.consume()
            spans, self._spans = self._spans, []
            if spans and self.on_spans is not None:
                self.on_spans(spans)

    def _on_span(self, data: bytes) -> None:
        start, dur, size, tid, nr, flags, _ = _SPAN.unpack_from(data)
        self._spans.append(Span(start / 1e9 + self._clock, dur / 1e9, tid, SizedKey(nr, flags, size)))

