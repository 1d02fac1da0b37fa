"""The capture program's data: its object file, its config, its statistics and its records.

``capture.bpf.c`` is generic; a :class:`~tdescope.app.probe.spec.ProbeSpec`
becomes its ``struct config`` here (:func:`config_of`), and its ring records
become the same :class:`~tdescope.app.probe.frames.Frame` records the gdb
backend produces (:class:`FrameAssembler`). The ctypes structures below mirror
the C layout; :func:`check_layout` compares their sizes with the loaded
object's maps, so a change on one side only fails at load, in one line.
"""

from __future__ import annotations

import ctypes
import enum
import os
import struct
from importlib import resources

from tdescope.app.engines.api import ArgRef, Constant, Register
from tdescope.app.errors import UserError
from tdescope.app.probe.frames import Frame, FrameKind
from tdescope.app.probe.spec import ProbeSpec

__all__ = ["MAX_BUFFER", "PROGRAM", "REGISTERS", "Config", "FrameAssembler", "Stat", "config_of", "object_path",
           "unsupported"]

#: The largest buffer copied (the C program's MAX_BUFFER): one ring record per buffer.
MAX_BUFFER = 65536
#: What the program is called in messages.
PROGRAM = "the capture program"
#: Register names in the C program's ``enum reg`` order.
REGISTERS = ("rdi", "rsi", "rdx", "rcx", "r8", "r9", "rax", "rbx", "rbp", "rsp", "r10", "r11",
             "r12", "r13", "r14", "r15")

_ARG_NONE, _ARG_REG, _ARG_STACK, _ARG_CONST = 0, 1, 2, 3


class ArgLoc(ctypes.Structure):
    _fields_ = [("kind", ctypes.c_uint32), ("reg", ctypes.c_uint32), ("value", ctypes.c_int64),
                ("adjust", ctypes.c_int64), ("field", ctypes.c_int64), ("width", ctypes.c_uint32),
                ("block_id", ctypes.c_uint32)]


class Config(ctypes.Structure):
    """``struct config`` of ``capture.bpf.c``."""

    _fields_ = [("before", ArgLoc), ("after", ArgLoc), ("length", ArgLoc), ("pgno", ArgLoc), ("cond", ArgLoc),
                ("context", ArgLoc), ("cond_value", ctypes.c_int64), ("has_cond", ctypes.c_uint32), ("entry_only", ctypes.c_uint32),
                ("max_length", ctypes.c_uint32), ("sample_every", ctypes.c_uint32),
                ("max_captures", ctypes.c_uint64), ("max_bytes_per_s", ctypes.c_uint64)]


class Stat(enum.IntEnum):
    """``enum stat`` of ``capture.bpf.c``: the program's per-CPU counters.

    Every entry hit ends in exactly one of CONDITION, SAMPLED_OUT, RATE_CAPPED, OVER_LIMIT, LOST
    and EMITTED, so HITS is their sum."""

    HITS = 0
    CONDITION = 1
    SAMPLED_OUT = 2
    RATE_CAPPED = 3
    OVER_LIMIT = 4
    LOST = 5
    READ_ERRORS = 6
    EMITTED = 7
    LOST_RETURN = 8
    PROG_NS = 9
    RETURNS = 10


#: Number of counters in the ``stats`` map (S_NSTATS).
N_STATS = 11
#: The outcomes of an entry hit: one each, so they add up to HITS.
OUTCOMES = (Stat.CONDITION, Stat.SAMPLED_OUT, Stat.RATE_CAPPED, Stat.OVER_LIMIT, Stat.LOST, Stat.EMITTED)
#: ``struct record``'s header: kind, flags, seq, ts_ns, pgno, context, cost_ns, tid, len; the buffer follows.
RECORD = struct.Struct("<IIQQqqQII")
_KINDS = (FrameKind.BEFORE, FrameKind.AFTER)
#: What one uprobe trap costs the target on top of the program's own time, measured on these
#: machines (../shared/research/ebpf-capture.md: "the two traps ~2 us").
TRAP_COST_US = 1.0
_READ_ERROR = 1


#: Where the agent put the object it carries (a zipapp's data is no file libbpf can open); None: package data.
OBJECT_OVERRIDE: str | None = None


def object_path() -> str:
    """Where the compiled program lives (built by ``make setup``, shipped as package data)."""
    if OBJECT_OVERRIDE is not None:
        return OBJECT_OVERRIDE
    return str(resources.files("tdescope.app.probe.ebpf") / "capture.bpf.o")


def unsupported(spec: ProbeSpec) -> str | None:
    """Why ``spec`` cannot run on eBPF (None: it can): a DWARF argument name, an unknown register."""
    for label, ref in (("input buffer", spec.before), ("output buffer", spec.after), ("length", spec.length),
                       ("page number", spec.pgno), ("context", spec.context), ("condition", spec.condition[0] if spec.condition else None)):
        if ref is None or isinstance(ref, Constant):
            continue
        where = ref.location
        if where is None:
            return (f"the recipe's {label} is a debug-info argument ({ref.source.name}): "
                    "eBPF reads registers and stack only")
        if isinstance(where, Register) and where.name not in REGISTERS:
            return f"the recipe's {label} is in register {where.name}, which the eBPF probe does not read"
    if spec.max_length > MAX_BUFFER:
        return f"the recipe copies up to {spec.max_length} bytes; the eBPF probe copies at most {MAX_BUFFER}"
    return None


def _loc(ref: ArgRef | None) -> ArgLoc:
    if ref is None:
        return ArgLoc(_ARG_NONE, 0, 0, 0)
    if isinstance(ref, Constant):
        return ArgLoc(_ARG_CONST, 0, int(ref.value), 0)
    d = ref.deref
    deref = (0, 0, 0) if d is None else (int(d.field), int(d.width), 1 if d.block_id else 0)
    where = ref.location  # unsupported() has refused a read without one
    if isinstance(where, Register):
        return ArgLoc(_ARG_REG, REGISTERS.index(where.name), 0, int(ref.offset), *deref)
    return ArgLoc(_ARG_STACK, 0, int(where.offset), int(ref.offset), *deref)


def config_of(spec: ProbeSpec, sample_every: int = 1, max_bytes_per_s: float = 0.0) -> Config:
    """The program's config for ``spec``. Raises UserError when :func:`unsupported` says why not."""
    why = unsupported(spec)
    if why:
        raise UserError(f"eBPF: {why}")
    cond = spec.condition
    return Config(
        before=_loc(spec.before), after=_loc(spec.after), length=_loc(spec.length), pgno=_loc(spec.pgno),
        context=_loc(spec.context), cond=_loc(cond[0] if cond else None), cond_value=int(cond[1]) if cond else 0, has_cond=1 if cond else 0,
        entry_only=1 if spec.after is None else 0, max_length=min(int(spec.max_length), MAX_BUFFER),
        sample_every=max(1, int(sample_every)), max_captures=int(spec.max_captures),
        max_bytes_per_s=int(max_bytes_per_s),
    )


class FrameAssembler:
    """Turns ring records (one per buffer) into frames: the buffer is copied once, out of the ring.

    Parameters
    ----------
    clock_offset : float
        Wall-clock seconds minus monotonic seconds, to stamp frames like the gdb backend.
    """

    def __init__(self, clock_offset: float) -> None:
        self._offset = clock_offset
        self.frames: list[Frame] = []
        #: Buffers the kernel could not read (shown as empty, counted).
        self.read_errors = 0

    def add(self, rec: memoryview) -> None:
        """One ring record (the bytes after the ring's own header)."""
        kind, flags, seq, ts_ns, pgno, context, cost_ns, _tid, length = _unpack_record(rec)
        if flags & _READ_ERROR:
            self.read_errors += 1
        self.frames.append(Frame(_KINDS[kind], seq, pgno, context, ts_ns / 1e9 + self._offset,
                                 cost_ns / 1e3 + TRAP_COST_US, rec[_BODY:_BODY + length].tobytes()))

    def take(self) -> list[Frame]:
        """The frames completed since the last call."""
        out, self.frames = self.frames, []
        return out


_unpack_record = RECORD.unpack_from
_BODY = RECORD.size


def check_layout(config_value_size: int, per_cpu_stats: bool = True) -> None:
    """UserError when the object's config differs in size from :class:`Config`, or its counters are not
    this version's (per-CPU ``stats`` beside a ``shared`` map): a stale build."""
    if config_value_size != ctypes.sizeof(Config):
        raise UserError(f"eBPF: the capture program's config is {config_value_size} bytes, tdescope expects "
                        f"{ctypes.sizeof(Config)}: rebuild it (make setup)")
    if not per_cpu_stats:
        raise UserError("eBPF: the capture program is an older build (its counters differ): rebuild it (make setup)")


def built() -> bool:
    """True when the compiled program is present."""
    return os.path.exists(object_path())
