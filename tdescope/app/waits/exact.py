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
from dataclasses import dataclass, field

from tdescope.app.events import WaitSample
from tdescope.app.waits.os_sampler import classify
from tdescope.app.waits.syscalls import syscall_name

__all__ = ["LAT_BUCKETS", "NR_BLOCKED", "NR_CPU_QUEUE", "SIZE_LOG2", "SizedKey", "SyscallAgg", "WaitFigure",
           "WaitTotals", "figures", "figures_from_samples", "format_sizes"]

#: Latency buckets per histogram (``waits.bpf.c``'s LAT_BUCKETS).
LAT_BUCKETS = 40
#: A key's size with this bit set holds ``floor(log2(bytes)) + 1``, not the bytes (network calls).
SIZE_LOG2 = 1 << 63
#: Pseudo syscall numbers of off-CPU time: runnable but waiting for a CPU, and blocked.
NR_CPU_QUEUE = 1000
NR_BLOCKED = 1001
#: Classes whose sizes are shown.
SIZED_CLASSES = ("Memory operation", "File I/O", "Network")


@dataclass(frozen=True, slots=True)
class SizedKey:
    """What the kernel aggregates by: the syscall, its ``MAP_*``/``MADV_*`` flags, its size."""

    nr: int
    flags: int
    size: int

    @property
    def bytes(self) -> int:
        """The size in bytes (a log2 bucket's low edge for the network)."""
        if self.size & SIZE_LOG2:
            bucket = self.size & ~SIZE_LOG2
            return 1 << (bucket - 1) if bucket else 0
        return self.size


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
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


@dataclass(frozen=True, slots=True)
class WaitFigure:
    """One (class, syscall) row of the exact waits table; ``source`` is ``"ebpf"`` or ``"proc"``.

    Times are microseconds. ``p50_us``/``p99_us`` are None for ``proc`` (samples have no durations),
    ``total_us`` there is samples x sampling period. ``sizes`` counts calls per size in bytes (memory
    operations and I/O only); ``flags`` counts calls per ``MAP_*``/``MADV_*`` value.
    """

    source: str
    wait_class: str
    syscall: str
    count: int
    total_us: float
    p50_us: float | None = None
    p99_us: float | None = None
    max_us: float | None = None
    lat: tuple[int, ...] = ()
    sizes: dict[int, int] = field(default_factory=dict)
    flags: dict[int, int] = field(default_factory=dict)

    @property
    def avg_us(self) -> float:
        return self.total_us / self.count if self.count else 0.0

    @property
    def bytes_p50(self) -> int | None:
        """The median call's size (None where sizes do not apply)."""
        if not self.sizes:
            return None
        half, seen = (sum(self.sizes.values()) + 1) // 2, 0
        for size in sorted(self.sizes):
            seen += self.sizes[size]
            if seen >= half:
                return size
        return None

    def bytes_top(self, n: int = 3) -> list[tuple[int, int]]:
        """The ``n`` most common sizes, ``(bytes, calls)``, most common first."""
        return sorted(self.sizes.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def record(self) -> dict:
        """The ``--json`` record."""
        out = {"source": self.source, "class": self.wait_class, "syscall": self.syscall, "count": self.count,
               "total_us": round(self.total_us, 1), "avg_us": round(self.avg_us, 2),
               "p50_us": None if self.p50_us is None else round(self.p50_us, 2),
               "p99_us": None if self.p99_us is None else round(self.p99_us, 2)}
        if self.sizes:
            out["bytes_p50"] = self.bytes_p50
            out["bytes_top"] = [[size, calls] for size, calls in self.bytes_top(5)]
        if self.flags:
            out["flags"] = {f"{k:#x}": v for k, v in sorted(self.flags.items())}
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


def _name_class(nr: int) -> tuple[str, str]:
    if nr == NR_CPU_QUEUE:
        return "CPU queue", "runnable, waiting for a CPU"
    if nr == NR_BLOCKED:
        return "Off CPU", "blocked (any cause)"
    name = syscall_name(nr)
    return classify("S", name)[0], name


def figures(totals: WaitTotals) -> list[WaitFigure]:
    """The exact table of ``totals``: one row per (class, syscall), longest total first."""
    rows: dict[tuple[str, str], list] = {}
    for key, agg in totals.aggs.items():
        if agg.count <= 0:
            continue
        cls, name = _name_class(key.nr)
        row = rows.setdefault((cls, name), [0, 0, 0, [0] * LAT_BUCKETS, Counter(), Counter()])
        row[0] += agg.count
        row[1] += agg.total_ns
        row[2] = max(row[2], agg.max_ns)
        for i, k in enumerate(agg.lat):
            row[3][i] += k
        if cls in SIZED_CLASSES and (key.size or cls == "Memory operation"):
            row[4][key.bytes] += agg.count
        if key.flags:
            row[5][key.flags] += agg.count
    out = [WaitFigure("ebpf", cls, name, count, total / 1e3, percentile_ns(lat, 0.5) / 1e3,
                      percentile_ns(lat, 0.99) / 1e3, mx / 1e3, tuple(lat), dict(sizes), dict(flags))
           for (cls, name), (count, total, mx, lat, sizes, flags) in rows.items()]
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
    return ", ".join(f"{size} B × {calls:,}" for size, calls in figure.bytes_top(n))
