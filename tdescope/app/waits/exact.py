"""Exact waits: per (class, syscall) counts, times, percentiles and sizes, with their source.

The eBPF wait tracer (:mod:`tdescope.app.waits.ebpf.tracer`) hands over cumulative
:class:`WaitTotals`: per (syscall number, flags, size) a count, a total and longest time and log2
latency buckets, summed over CPUs. :func:`figures` turns them into :class:`WaitFigure` rows, one per
(class, syscall), as Oracle's V$SESSION_EVENT and its event histograms show them: count, total,
average, p50, p99 and, for memory operations and I/O, the sizes (mmap's length is what 'PGA memory
operation' reports as p1). Where eBPF cannot load, :func:`figures_from_samples` gives the same rows
from /proc samples: counts of samples, time estimated as samples x period, no percentiles. Every
row says its ``source`` (``"ebpf"`` or ``"proc"``).

Percentiles come from log2 buckets (bucket ``i`` holds durations in ``[2**i, 2**(i+1))`` ns),
interpolated linearly inside the bucket: within a factor of two of the truth, never more.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tdescope.app.events import WaitFigure, WaitFigures, WaitSample, WaitSpan, WaitSpans
from tdescope.app.slots import SLOTS
from tdescope.app.waits.os_sampler import classify
from tdescope.app.waits.syscalls import syscall_name

__all__ = ["FiguresSince", "LAT_BUCKETS", "NR_BLOCKED", "NR_CPU_QUEUE", "SIZE_LOG2", "SizedKey", "Span", "SyscallAgg", "WaitTotals",
           "avg_us", "bytes_p50", "bytes_top", "figures", "figures_from_samples", "format_sizes", "merge",
           "percentile_ns", "record", "spans_event"]

#: Latency buckets per histogram (``waits.bpf.c``'s LAT_BUCKETS).
LAT_BUCKETS = 40
#: A key's size with this bit set holds ``floor(log2(bytes)) + 1``, not the bytes (a new size met a full map).
SIZE_LOG2 = 1 << 63
#: Pseudo syscall numbers of off-CPU time: runnable but waiting for a CPU, and blocked.
NR_CPU_QUEUE = 1000
NR_BLOCKED = 1001
#: ``key.flags`` of read/write/readv/writev: what the fd is (waits.bpf.c's FD_*).
_FD_KINDS = {0: "file", 1: "socket", 2: "pipe"}
_BY_FD = frozenset("read write readv writev".split())
#: Classes whose sizes are shown.
SIZED_CLASSES = ("Memory operation", "File I/O", "Network")


@dataclass(frozen=True, **SLOTS)
class SizedKey:
    """What the kernel aggregates by: the syscall, its ``MAP_*``/``MADV_*`` flags, its size."""

    nr: int
    flags: int
    size: int

    @property
    def bytes(self) -> int:
        """The size in bytes (a log2 bucket's low edge when the map was full)."""
        if self.size & SIZE_LOG2:
            bucket = self.size & ~SIZE_LOG2
            return 1 << (bucket - 1) if bucket else 0
        return self.size


@dataclass(frozen=True, **SLOTS)
class Span:
    """One sampled call (or off-CPU interval) of thread ``tid``: wall-clock ``start`` and ``duration_s``."""

    start: float
    duration_s: float
    tid: int
    key: SizedKey


@dataclass(frozen=True, **SLOTS)
class SyscallAgg:
    """Calls of one :class:`SizedKey`: count, total and longest ns, log2 latency buckets."""

    count: int
    total_ns: int
    max_ns: int
    lat: tuple[int, ...]

    def minus(self, older: SyscallAgg | None) -> SyscallAgg:
        """What happened since ``older`` (the same key read earlier)."""
        if older is None:
            return self
        return SyscallAgg(self.count - older.count, self.total_ns - older.total_ns, self.max_ns,
                          tuple(a - b for a, b in zip(self.lat, older.lat)))


@dataclass(frozen=True, **SLOTS)
class WaitTotals:
    """One read of the tracer's maps: cumulative since it attached.

    Attributes
    ----------
    aggs : mapping of SizedKey to SyscallAgg
    calls : int
        Syscall exits timed.
    no_room : int
        Calls not aggregated because the histogram map was full (the goal: 0).
    unmatched : int
        Exits whose entry was not seen (calls already in flight at attach time).
    ts : float
        When it was read (epoch seconds).
    """

    aggs: Mapping[SizedKey, SyscallAgg]
    calls: int = 0
    no_room: int = 0
    unmatched: int = 0
    ts: float = 0.0

    def minus(self, older: WaitTotals) -> WaitTotals:
        """The calls between ``older`` and this read (one second's worth, read each second)."""
        aggs = {k: v.minus(older.aggs.get(k)) for k, v in self.aggs.items()}
        return WaitTotals({k: v for k, v in aggs.items() if v.count}, self.calls - older.calls,
                          self.no_room - older.no_room, self.unmatched - older.unmatched, self.ts)


def avg_us(figure: WaitFigure) -> float:
    """Average time per call (per sample for ``proc``)."""
    return figure.total_us / figure.count if figure.count else 0.0


def bytes_p50(figure: WaitFigure) -> int | None:
    """The median call's size (None where sizes do not apply)."""
    if not figure.sizes:
        return None
    half, seen = (sum(k for _, k in figure.sizes) + 1) // 2, 0
    for size, k in sorted(figure.sizes):
        seen += k
        if seen >= half:
            return size
    return None


def bytes_top(figure: WaitFigure, n: int = 3) -> list[tuple[int, int]]:
    """The ``n`` most common sizes, ``(bytes, calls)``, most common first."""
    return sorted(figure.sizes, key=lambda kv: (-kv[1], kv[0]))[:n]


def record(figure: WaitFigure) -> dict:
    """The ``--json`` record of one row."""
    out = {"source": figure.source, "class": figure.wait_class, "syscall": figure.syscall, "count": figure.count,
           "total_us": round(figure.total_us, 1), "avg_us": round(avg_us(figure), 2),
           "p50_us": None if figure.p50_us is None else round(figure.p50_us, 2),
           "p99_us": None if figure.p99_us is None else round(figure.p99_us, 2)}
    if figure.sizes:
        out["bytes_p50"] = bytes_p50(figure)
        out["bytes_top"] = [[size, calls] for size, calls in bytes_top(figure, 5)]
    if figure.flags:
        out["flags"] = {f"{k:#x}": v for k, v in sorted(figure.flags)}
    return out


def percentile_ns(lat: Iterable[int], q: float) -> float:
    """The ``q`` quantile (0..1) of a log2 latency histogram, interpolated inside its bucket."""
    lat = list(lat)
    total = sum(lat)
    if total <= 0:
        return 0.0
    rank = q * total
    seen = 0
    for i, k in enumerate(lat):
        if k and seen + k >= rank:
            low = float(1 << i) if i else 0.0
            return low + (float(1 << i) if i else 1.0) * max(0.0, rank - seen) / k
        seen += k
    return float(1 << (len(lat) - 1))


def _name_class(nr: int, flags: int) -> tuple[str, str]:
    if nr == NR_CPU_QUEUE:
        return "CPU queue", "runnable"
    if nr == NR_BLOCKED:
        return "Off CPU", "blocked"
    name = syscall_name(nr)
    if name in _BY_FD:  # the kernel said what the fd is, as the /proc sampler reads it from /proc/PID/fd
        return classify("S", name, fd_kind=_FD_KINDS.get(flags))
    return classify("S", name)[0], name


def figures(totals: WaitTotals) -> list[WaitFigure]:
    """The exact table of ``totals``: one row per (class, syscall), longest total first."""
    rows: dict[tuple[str, str], list] = {}
    for key, agg in totals.aggs.items():
        if agg.count <= 0:
            continue
        cls, name = _name_class(key.nr, key.flags)
        row = rows.setdefault((cls, name), [0, 0, 0, [0] * LAT_BUCKETS, Counter(), Counter()])
        row[0] += agg.count
        row[1] += agg.total_ns
        row[2] = max(row[2], agg.max_ns)
        for i, k in enumerate(agg.lat):
            row[3][i] += k
        if cls in SIZED_CLASSES and key.size:
            row[4][key.bytes] += agg.count
        if key.flags and name not in _BY_FD and not name.endswith(")"):
            row[5][key.flags] += agg.count
    out = [_figure("ebpf", cls, name, count, total / 1e3, mx / 1e3, lat, sizes, flags)
           for (cls, name), (count, total, mx, lat, sizes, flags) in rows.items()]
    out.sort(key=lambda f: (-f.total_us, f.wait_class, f.syscall))
    return out


def _figure(source: str, cls: str, name: str, count: int, total_us: float, max_us: float, lat, sizes: Counter,
            flags: Counter) -> WaitFigure:
    return WaitFigure(source, cls, name, count, total_us, percentile_ns(lat, 0.5) / 1e3,
                      percentile_ns(lat, 0.99) / 1e3, max_us, tuple(lat), tuple(sorted(sizes.items())),
                      tuple(sorted(flags.items())))


def merge(batches: Iterable[WaitFigures]) -> list[WaitFigure]:
    """The rows of several :class:`WaitFigures` (a run, a selected range) added up per (class, syscall)."""
    rows: dict[tuple[str, str], list] = {}
    for batch in batches:
        for f in batch.figures:
            row = rows.setdefault((f.wait_class, f.syscall), [0, 0.0, 0.0, [0] * LAT_BUCKETS, Counter(), Counter()])
            row[0] += f.count
            row[1] += f.total_us
            row[2] = max(row[2], f.max_us or 0.0)
            for i, k in enumerate(f.lat[:LAT_BUCKETS]):
                row[3][i] += k
            row[4].update(dict(f.sizes))
            row[5].update(dict(f.flags))
    out = [_figure("ebpf", cls, name, *vals) for (cls, name), vals in rows.items()]
    out.sort(key=lambda f: (-f.total_us, f.wait_class, f.syscall))
    return out


def figures_from_samples(samples: Iterable[WaitSample], hz: float) -> list[WaitFigure]:
    """The same table from /proc samples (the fallback): counts are samples, time is samples / ``hz``."""
    counts = Counter((s.wait_class, s.event) for s in samples if s.source == "os")
    out = [WaitFigure("proc", cls, event, k, k / hz * 1e6) for (cls, event), k in counts.items()]
    out.sort(key=lambda f: (-f.total_us, f.wait_class, f.syscall))
    return out


def format_sizes(figure: WaitFigure, n: int = 2) -> str:
    """The most common sizes written out: ``131072 B × 1,204, 4096 B × 17``."""
    return ", ".join(f"{size} B × {calls:,}" for size, calls in bytes_top(figure, n))


def spans_event(pid: int, spans: Iterable[Span], ts: float) -> WaitSpans:
    """The tracer's sampled spans as the event the timeline draws (class and syscall named as in the table)."""
    out = []
    for sp in spans:
        cls, name = _name_class(sp.key.nr, sp.key.flags)
        out.append(WaitSpan(sp.start, sp.duration_s, sp.tid, cls, name, sp.key.bytes))
    return WaitSpans(ts, pid, tuple(out))


class FiguresSince:
    """The tracer's cumulative :class:`WaitTotals` in, one :class:`WaitFigures` event per interval out (what
    changed since the last totals) to ``sink``: the workbench's own tracer and the agent's on a host alike."""

    def __init__(self, pid: int, sink) -> None:
        self.pid = pid
        self._sink = sink
        self._last: WaitTotals | None = None

    def __call__(self, totals: WaitTotals) -> None:
        last, self._last = self._last, totals
        since = totals if last is None else totals.minus(last)
        interval = totals.ts - last.ts if last is not None else 1.0
        self._sink(WaitFigures(totals.ts, self.pid, round(interval, 3), tuple(figures(since)), since.no_room))
