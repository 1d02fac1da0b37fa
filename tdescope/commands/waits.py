"""``tdescope waits``: what a process waits on (syscalls, memory operations, CPU), headless."""

from __future__ import annotations

import json
import sys

from tdescope.app.errors import NothingObserved, UserError
from tdescope.commands._args import add_engine_wait_argument
from tdescope.commands._observe import add_target_arguments, interrupted_line, observe
from tdescope.commands._stdout import emit

HELP = ("what a process waits on: OS wait classes from /proc, every syscall timed and sized with eBPF, "
        "and the engine's own waits")

#: The sampled table's header, in the layout of its rows.
HEADER = f"{'share':>7} {'samples':>7}  {'class':17} event  (source)"
#: The exact table's header (eBPF: every call; /proc: samples), in the layout of its rows.
EXACT_HEADER = (f"{'class':17} {'syscall':14} {'count':>9} {'total ms':>10} {'avg µs':>9} {'p50 µs':>9} "
                f"{'p99 µs':>9}  sizes (most common)")


def add_arguments(parser) -> None:
    add_target_arguments(parser)
    parser.add_argument("--engine", default=None, help="engine for --dsn (default postgres)")
    parser.add_argument("--idle", action="store_true", help="keep the Idle class in the ranking")
    parser.add_argument("--os-waits", choices=("auto", "ebpf", "proc"), default="auto",
                        help="exact OS waits: auto traces every syscall with eBPF where it loads (root or "
                             "CAP_BPF+CAP_PERFMON), else /proc samples; ebpf insists; proc never traces")
    add_engine_wait_argument(parser)


def run(args) -> int:
    from tdescope.app.events import WaitSample
    from tdescope.app.waits.counter import WaitCounter

    seen = observe(args, hotspots=False, waits=True, exact_waits=args.os_waits)
    waits = WaitCounter()
    waits.add(e for e in seen.events if isinstance(e, WaitSample))
    if waits.samples == 0:
        if seen.interrupted:
            raise interrupted_line(seen, "")
        raise UserError(seen.problems[0] if seen.problems else f"no wait samples in {seen.seconds:g} s")
    rows = waits.top(args.limit, exclude=() if args.idle else ("Idle",))
    exact, what = _exact_rows(args, seen)
    busy = [r for r in exact if r.wait_class not in ("Idle", "Off CPU", "CPU queue")]
    if not rows and not busy and not seen.interrupted:
        raise NothingObserved(f"no samples but Idle in {seen.seconds:g} s: pid {seen.pid} was idle "
                              "(--idle lists them)")
    if not args.json and rows:
        emit(HEADER)
    for r in rows:
        record = {"class": r.wait_class, "event": r.event, "samples": r.samples, "pct": round(r.pct, 2),
                  "source": r.source}
        if args.json:
            emit(json.dumps(record))
        else:
            emit(f"{r.pct:6.1f}% {r.samples:7d}  {r.wait_class:17s} {r.event}  ({r.source})")
    _exact_table(args, exact, what)
    if not args.json and seen.os_source == "ebpf":
        _lineup_table(waits.top(args.limit, exclude=() if args.idle else ("Idle",)), exact)
    if seen.interrupted:
        raise interrupted_line(seen, f"{waits.samples} samples" if rows else "")
    for p in seen.problems:
        print(f"tdescope: note: {p}", file=sys.stderr)
    if not args.json:
        shown = "" if args.idle else " (Idle left out; --idle keeps it)"
        print(f"{waits.samples} samples{shown}", file=sys.stderr)
    return 0


def _exact_rows(args, seen) -> tuple[list, str]:
    """Per (class, syscall) figures from eBPF, else from /proc samples, and what they are."""
    from tdescope.app.events import WaitFigures, WaitSample
    from tdescope.app.observe.sampling import OS_WAIT_HZ
    from tdescope.app.waits.exact import figures_from_samples, merge

    if seen.os_source == "ebpf":
        rows = merge(e for e in seen.events if isinstance(e, WaitFigures))
        what = "every call timed in the kernel (eBPF)"
    else:
        rows = figures_from_samples((e for e in seen.events if isinstance(e, WaitSample)), OS_WAIT_HZ)
        what = f"from /proc samples at {OS_WAIT_HZ:g} Hz: counts are samples, no durations"
    skip = () if args.idle else ("Idle",)
    return [r for r in rows if r.wait_class not in skip][:args.limit], what


def _exact_table(args, rows: list, what: str) -> None:
    """Count, total, average, p50, p99 and the most common sizes, per (class, syscall)."""
    from tdescope.app.waits.exact import avg_us, format_sizes, record

    if not args.json:
        emit("")
        emit(f"exact OS waits, {what}" + ("" if args.idle else " (Idle left out)"))
        emit(EXACT_HEADER)
    for r in rows:
        if args.json:
            emit(json.dumps(record(r)))
            continue
        pct = lambda v: "-" if v is None else f"{v:9.1f}"  # noqa: E731
        emit(f"{r.wait_class:17.17s} {r.syscall:14.14s} {r.count:9,d} {r.total_us / 1e3:10.2f} "
             f"{avg_us(r):9.1f} {pct(r.p50_us):>9} {pct(r.p99_us):>9}  {format_sizes(r)}")


def _lineup_table(rows: list, exact: list) -> None:
    """Each engine wait event beside the exact OS figures of the syscalls it is made of (text only)."""
    from tdescope.app.waits.lineup import line_up

    pairs = line_up(rows, exact)
    if not pairs:
        return
    emit("")
    emit("engine waits beside OS waits (same window; the syscalls each event is made of)")
    emit(f"{'engine event':32} {'share':>6}  {'OS syscalls':30} {'calls':>9} {'total ms':>10} {'bytes p50':>9}")
    for p in pairs:
        event = f"{p.wait_class}:{p.event}"
        names = ", ".join(p.syscalls) or "-"
        size = "-" if p.os_bytes_p50 is None else str(p.os_bytes_p50)
        emit(f"{event:32.32s} {p.pct:5.1f}%  {names:30.30s} {p.os_count:9,d} {p.os_total_us / 1e3:10.2f} {size:>9}")
