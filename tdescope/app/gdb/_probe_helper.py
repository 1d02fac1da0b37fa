"""Runs INSIDE gdb (gdb's own Python, stdlib only): the capture side of a probe.

Loaded with ``source``; the workbench then calls ``_tdescope_probe.arm(SPEC)``
with the path of a JSON probe spec. Each hit of the probe breakpoint copies the
"before" buffer in ``Breakpoint.stop()`` and plants a finish breakpoint that
copies the "after" buffer at return. Both return False, so the target never
waits for the workbench: a stop lasts only as long as the copy.

The stop budget is a duty cycle: every stop is charged to a leaky bucket that
drains at ``duty`` (stopped seconds per wall second, default 1 %) and holds at
most ``burst_s``. When a hit overflows it, the probe pauses: its breakpoint is
disabled (gdb takes the ``int3`` out of the target's code) and the workbench
calls ``resume()`` once the bucket has drained. So however busy the target is,
it spends at most ``burst_s + duty * t`` of any stretch ``t`` stopped, and for
most of an over-busy window no breakpoint sits in its code at all. This bucket
sees gdb's side only; the workbench keeps a second one on what the target's
threads felt (/proc) and pauses the probe from outside with ``pause(resume_in)``.

Bytes travel out of band: frames appended to a spool file that the workbench
tails (MI carries only control). The frame format, its kinds and the notices
are defined once, in ``app/probe/frames.py``, which this file loads by path
(gdb's Python cannot import the workbench's package). ``arm`` and ``disarm``
answer with a notice frame (``armed``, ``disarmed``) that the workbench waits
for; nothing is printed for it to read back.

It is long because it is the one file gdb sources (the allowlist lets no other through, and the agent's
zipapp carries its own copy): the probe, its budget, and putting back a probe the kernel took out
(:func:`reinsert`) all run in gdb's Python, which cannot import the workbench's package.
"""

import importlib.util
import json
import os
import sys
import time

import gdb  # noqa: F401 - provided by gdb


def _load_frames():
    """``app/probe/frames.py``, next to this file's package, as a module of gdb's Python."""
    name = "_tdescope_frames"
    if name not in sys.modules:
        path = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "probe", "frames.py")
        spec = importlib.util.spec_from_file_location(name, os.path.normpath(path))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_frames = _load_frames()
FrameKind, Notice, pack, pack_notice = _frames.FrameKind, _frames.Notice, _frames.pack, _frames.pack_notice
BEFORE, AFTER = FrameKind.BEFORE, FrameKind.AFTER


class _State:
    spec = None
    spool = None
    seq = 0
    done = 0
    started = 0.0
    busy = 0.0
    closed = False
    hooked = False
    breakpoints = []
    rate_start = 0.0  # start of the current one-second bucket of the hit-rate cap
    rate_hits = 0
    hits = 0  # every hit of the probe breakpoint, captured or not
    reinserted = 0  # times the probe's int3 was written again after the kernel took it out
    debt = 0.0  # the duty-cycle bucket: stopped seconds not yet paid back by running time
    debt_at = 0.0
    paused = False
    return_sites = set()  # return addresses that carry (or carried) an after-breakpoint
    busy_said = 0.0  # when the running total of stopped time was last written to the spool


def _write(kind, seq, pgno, context, data, busy_us):
    if _State.spool is None:
        return
    _State.spool.write(pack(kind, seq, pgno, context, data, busy_us))


def _notice(notice, **fields):
    if _State.spool is None:
        return
    _State.spool.write(pack_notice(notice, **fields))


def _value(frame, ref):
    """Read an ArgRef in its flat form (``app/engines/argref.py``'s ``ref_fields``: ``name``, ``register``,
    ``constant``, ``stack``, ``offset``, and ``field``, ``width``, ``block_id`` with a dereference)."""
    if ref is None:
        return None
    value, offset = _read(frame, ref), int(ref.get("offset") or 0)
    if ref.get("field") is not None:  # a pointer to a struct: read one of its fields
        width = int(ref.get("width") or 8)
        raw = bytes(gdb.selected_inferior().read_memory(value + int(ref["field"]), width))
        value = int.from_bytes(raw, "little")
        if ref.get("block_id"):
            value = ((value & 0xFFFF) << 16) | (value >> 16)
    return (value + offset) & 0xFFFFFFFFFFFFFFFF if offset else value


def _read(frame, ref):
    if ref.get("constant") is not None:
        return int(ref["constant"])
    if ref.get("name"):
        try:
            return int(frame.read_var(ref["name"]))
        except (ValueError, gdb.error):
            if not ref.get("register"):
                raise
    if ref.get("stack") is not None:
        # at the first instruction the caller's stack arguments start at rsp+8
        rsp = int(frame.read_register("rsp"))
        raw = bytes(gdb.selected_inferior().read_memory(rsp + int(ref["stack"]), 8))
        return int.from_bytes(raw, "little")
    return int(frame.read_register(ref["register"])) & 0xFFFFFFFFFFFFFFFF


def _int32(value):
    """A C int/enum/uint32 argument: the ABI leaves a register's upper 32 bits undefined."""
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value >= 1 << 31 else value


def _limits_reached():
    spec = _State.spec
    if _State.seq >= spec["max_captures"]:
        return "max captures"
    if time.monotonic() - _State.started > spec["max_seconds"]:
        return "max seconds"
    if _State.rate_hits > spec.get("max_hits_per_s", 1 << 62):
        return "hit rate"
    return None


def _charge(seconds):
    """Charge ``seconds`` of target stop to the total and to the duty-cycle bucket."""
    now = time.monotonic()
    spec = _State.spec
    _State.debt = max(0.0, _State.debt - (now - _State.debt_at) * spec["duty"]) + seconds
    _State.debt_at = now
    _State.busy += seconds
    if now - _State.busy_said >= 0.25:
        # every hit is charged, captured or not (a decrypt probe also stops on encrypt calls):
        # the workbench shows this total, not just the captured pages' share
        _State.busy_said = now
        _notice(Notice.BUSY, busy_s=_State.busy, hits=_State.hits)


def _maybe_pause():
    """Pause the probe when the bucket overflows: its breakpoints leave the target's code. A budget of
    100 % never pauses (the per-stop charge is an estimate: it can exceed the time between hits)."""
    spec = _State.spec
    if _State.paused or _State.closed or spec["duty"] >= 1.0 or _State.debt <= spec["burst_s"]:
        return
    _State.paused = True
    gdb.post_event(_disable_probes)  # breakpoints may not change inside stop()
    _notice(Notice.PAUSED, resume_in=_State.debt / spec["duty"], busy_s=_State.busy)


def _disable_probes():
    for bp in _State.breakpoints:
        if bp.is_valid() and _State.paused:
            bp.enabled = False


def _count_hit():
    """Count one probe hit in the current one-second bucket (the hit-rate cap)."""
    now = time.monotonic()
    if now - _State.rate_start >= 1.0:
        _State.rate_start = now
        _State.rate_hits = 0
    _State.rate_hits += 1


class _AfterBreakpoint(gdb.FinishBreakpoint):
    """Copies the output buffer when the probed call returns."""

    def __init__(self, frame, seq, pgno, context, address, length):
        super().__init__(frame, internal=True)
        self.silent = True
        self.args = (seq, pgno, context, address, length)

    def stop(self):
        t0 = time.perf_counter()
        seq, pgno, context, address, length = self.args
        try:
            data = bytes(gdb.selected_inferior().read_memory(address, length))
        except Exception as exc:  # noqa: BLE001 - an exception here would stop the target
            data = b""
            _notice(Notice.READ_FAILED, seq=seq, side="after", message=str(exc))
        busy = time.perf_counter() - t0 + _State.spec["stop_overhead_s"]
        _charge(busy)
        _write(AFTER, seq, pgno, context, data, busy * 1e6)
        _State.done += 1
        _maybe_pause()
        return False

    def out_of_scope(self):
        seq, pgno, context, _, _ = self.args
        _write(AFTER, seq, pgno, context, b"", 0.0)


class _ReturnBreakpoint(gdb.Breakpoint):
    """Copies the output buffer at the return address read from [rsp] at entry.

    Used when the probe sits at a function's first instruction: no unwinding and
    no debug info needed (a FinishBreakpoint needs gdb to unwind the frame).
    The thread and the stack pointer tell this call's return from another's.
    """

    def __init__(self, ret_address, thread, rsp_after, seq, pgno, context, address, length):
        super().__init__("*%#x" % ret_address, internal=True)
        self.silent = True
        self.key = (thread, rsp_after)
        self.args = (seq, pgno, context, address, length)
        self.fired = False

    def stop(self):
        if self.fired:
            return False
        try:
            here = (gdb.selected_thread().num, int(gdb.selected_frame().read_register("rsp")))
        except Exception:  # noqa: BLE001 - an exception here would stop the target
            return False
        if here != self.key:
            return False  # another call (thread or recursion) returning through the same address
        self.fired = True
        _AfterBreakpoint.stop(self)
        gdb.post_event(self._retire)  # breakpoints may not be deleted inside stop()
        return False

    def _retire(self):
        if self.is_valid():
            self.delete()


class _ProbeBreakpoint(gdb.Breakpoint):
    """Copies the input buffer at entry of the probed function."""

    def stop(self):
        t0 = time.perf_counter()
        spec = _State.spec
        # every hit stops the target, captured or not: charge it to the stop budget
        _State.hits += 1
        _charge(spec["stop_overhead_s"])
        _count_hit()
        if _State.paused:
            return False  # a hit before gdb took the breakpoint out
        if _State.closed or _limits_reached():
            if not _State.closed:
                _State.closed = True
                _notice(Notice.WINDOW_CLOSED, reason=_limits_reached())
            return False
        try:
            frame = gdb.selected_frame()
            cond = spec.get("condition")
            if cond is not None and _int32(_value(frame, cond[0])) != cond[1]:
                return False
            # a length is a C (unsigned) int or a small size_t: the register's upper half may be garbage
            length = min(_value(frame, spec["length"]) & 0xFFFFFFFF, spec["max_length"])
            address = _value(frame, spec["before"])
            pgno = _int32(_value(frame, spec["pgno"])) if spec.get("pgno") else -1
            context = _value(frame, spec["context"]) if spec.get("context") else -1
            context = context - (1 << 64) if context >= 1 << 63 else context  # the frame's field is signed
            data = bytes(gdb.selected_inferior().read_memory(address, length))
            _State.seq += 1
            seq = _State.seq
            if spec.get("after"):
                out = _value(frame, spec["after"])
                if spec.get("at_entry"):
                    rsp = int(frame.read_register("rsp"))
                    ret = int.from_bytes(bytes(gdb.selected_inferior().read_memory(rsp, 8)), "little")
                    if ret not in _State.return_sites:
                        _State.return_sites.add(ret)  # the workbench tells the guard
                        _notice(Notice.RETURN_SITE, address=ret)
                    _ReturnBreakpoint(ret, gdb.selected_thread().num, rsp + 8, seq,
                                      pgno if pgno is not None else -1, context, out, length)
                else:
                    _AfterBreakpoint(frame, seq, pgno if pgno is not None else -1, context, out, length)
        except Exception as exc:  # noqa: BLE001 - an exception here would stop the target
            _notice(Notice.PROBE_ERROR, message=str(exc))
            return False
        busy = time.perf_counter() - t0 + spec["stop_overhead_s"]  # the step over the breakpoint
        _charge(busy)
        _write(BEFORE, seq, pgno, context, data, busy * 1e6)
        _maybe_pause()
        return False


def arm(spec_path):
    """Arm the probe described by the JSON file at ``spec_path``; answers with an ``armed`` notice."""
    with open(spec_path) as fh:
        spec = json.load(fh)
    # A signal to the target (a server's SIGTERM at shutdown, PostgreSQL's SIGUSR1 and
    # SIGURG) must reach it at once: gdb's defaults would hold it stopped on SIGUSR1 or
    # SIGTERM until the watchdog cut in. "all" leaves SIGINT and SIGTRAP, which gdb uses.
    gdb.execute("handle all nostop noprint pass", to_string=True)
    _State.spec = spec
    _State.spool = open(spec["spool"], "ab", buffering=0)
    _State.seq = _State.done = _State.hits = _State.reinserted = 0
    _State.busy = 0.0
    _State.rate_start, _State.rate_hits = time.monotonic(), 0
    _State.closed = False
    _State.started = _State.debt_at = time.monotonic()
    _State.debt, _State.paused, _State.return_sites, _State.busy_said = 0.0, False, set(), 0.0
    errors = []
    if spec.get("address"):
        # resolved by the workbench from the ELF files before attaching (app/system/elf.py)
        bp = _ProbeBreakpoint("*%#x" % spec["address"], internal=False)
        _State.breakpoints.append(bp)
        _notice(Notice.ARMED, armed=spec["symbols"][0], pending=False, locations=[hex(spec["address"])])
        return
    for symbol in spec["symbols"]:
        location = ("*" + symbol) if spec.get("at_entry") else symbol
        try:
            bp = _ProbeBreakpoint(location, internal=False)
        except gdb.error as exc:
            errors.append(str(exc))
            continue
        if bp.pending:
            if spec.get("allow_pending"):
                _State.breakpoints.append(bp)
                _notice(Notice.ARMED, armed=symbol, pending=True, locations=[])
                return
            bp.delete()
            errors.append("symbol %s not found" % symbol)
            continue
        _State.breakpoints.append(bp)
        locs = [hex(loc.address) for loc in getattr(bp, "locations", []) if loc.address]
        _notice(Notice.ARMED, armed=symbol, pending=False, locations=locs)
        return
    if spec.get("allow_pending") and spec.get("at_entry"):
        # gdb refuses to leave "*symbol" pending, and the library may not be loaded yet
        # (pgcrypto.so loads on a backend's first pgcrypto call): arm when an objfile
        # that defines the symbol appears.
        if not _State.hooked:
            gdb.events.new_objfile.connect(_arm_on_load)
            _State.hooked = True
        _notice(Notice.ARMED, armed=spec["symbols"][0], pending=True, locations=[])
        return
    _notice(Notice.ARMED, armed=None, errors=errors)


def _arm_on_load(event):
    """new_objfile handler: place the exact-entry breakpoint once its library is mapped."""
    spec = _State.spec
    if spec is None or _State.closed or _State.breakpoints:
        return
    for symbol in spec["symbols"]:
        try:
            bp = _ProbeBreakpoint("*" + symbol, internal=False)
        except gdb.error:
            continue  # not in this objfile
        _State.breakpoints.append(bp)
        _notice(Notice.ARMED_ON_LOAD, symbol=symbol, objfile=event.new_objfile.filename)
        return


def pause(resume_in):
    """Pause the probe from outside: the workbench's stop budget, charged with the stops /proc shows
    (every thread of the target stops at each hit), ran out; it may resume in ``resume_in`` seconds."""
    if _State.paused or _State.closed:
        return
    _State.paused = True
    _disable_probes()
    _notice(Notice.PAUSED, resume_in=float(resume_in), busy_s=_State.busy, by="proc")


def resume():
    """Re-enable a paused probe (the workbench calls this once the bucket has drained)."""
    if _State.paused and not _State.closed:
        _State.paused = False
        _State.debt, _State.debt_at = 0.0, time.monotonic()
        for bp in _State.breakpoints:
            if bp.is_valid():
                bp.enabled = True
        _notice(Notice.RESUMED)


def _taken_out():
    """True when a probe location of an enabled breakpoint holds no ``int3`` in the target's memory (read
    from /proc: gdb's own reads show the original bytes under its breakpoints). Called while the target
    runs, when gdb has its breakpoints in."""
    try:
        with open("/proc/%d/mem" % gdb.selected_inferior().pid, "rb", buffering=0) as mem:
            for bp in _State.breakpoints:
                if not (bp.is_valid() and bp.enabled):
                    continue
                for loc in bp.locations:
                    mem.seek(loc.address)
                    if mem.read(1) != b"\xcc":
                        return True
    except (OSError, AttributeError):
        return True  # cannot tell: writing the probe again is harmless
    return False


def reinsert():
    """Put the probe's ``int3`` back: the kernel took it out of the target's code. Ending a uprobe on the
    same file and offset in any other process (another tdescope's eBPF window, bpftrace, ``perf probe``)
    makes the kernel write the original byte back wherever an ``int3`` sits at that offset in a process
    none of its uprobes wants: gdb's included. Disabled and enabled, the breakpoint is written again."""
    if _State.paused or _State.closed or not _taken_out():
        return
    for bp in _State.breakpoints:
        if bp.is_valid() and bp.enabled:
            bp.enabled = False
            bp.enabled = True
    _State.reinserted += 1
    _notice(Notice.REINSERTED, reinserted=_State.reinserted)


def disarm():
    """Delete every probe breakpoint; answers with a ``disarmed`` notice (counts and stopped time)."""
    _State.closed = True
    if _State.hooked:
        gdb.events.new_objfile.disconnect(_arm_on_load)
        _State.hooked = False
    for bp in _State.breakpoints:
        if bp.is_valid():
            bp.delete()
    _State.breakpoints = []
    for bp in gdb.breakpoints():
        if bp.is_valid():
            bp.delete()
    _notice(Notice.DISARMED, captures=_State.seq, completed=_State.done, busy_s=_State.busy, hits=_State.hits)
    if _State.spool is not None:
        _State.spool.close()
        _State.spool = None


# ``source`` runs this file in gdb's __main__; the workbench calls through this name.
_tdescope_probe = type("_TdescopeProbe", (), {"arm": staticmethod(arm), "pause": staticmethod(pause),
                                              "resume": staticmethod(resume), "reinsert": staticmethod(reinsert),
                                              "disarm": staticmethod(disarm)})
