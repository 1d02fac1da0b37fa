"""Where a probe finds a value when it fires: a small closed sum type (issue #25, item 2).

An :data:`ArgRef` is either a :class:`Constant` or a :class:`Read` of something the
call has::

    ArgRef = Read | Constant
    Read(source, deref=None, offset=0)      source = Register | StackSlot | DebugArg

So a constant never carries a register, a stack slot or a dereference, and a read
always names exactly one place. Both backends and the agent's wire take recipes in
the flat JSON form :func:`ref_fields` writes (the one gdb's helper reads);
:func:`ref_of` reads it back and refuses any combination the types cannot hold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

from tdescope.app.slots import SLOTS

__all__ = ["ArgRef", "Constant", "DebugArg", "Deref", "Read", "Register", "StackSlot", "ref_fields", "ref_of"]

#: The widths a struct field may have: what both backends read (little-endian, unsigned).
FIELD_WIDTHS = (2, 4, 8)


@dataclass(frozen=True, **SLOTS)
class Register:
    """An x86-64 register, read at the function's first instruction (where it holds the ABI argument)."""

    name: str

    def describe(self) -> str:
        return f"${self.name}"


@dataclass(frozen=True, **SLOTS)
class StackSlot:
    """The 8 bytes at ``rsp + offset`` at the first instruction: arguments past the sixth start at ``rsp+8``."""

    offset: int

    def describe(self) -> str:
        return f"[$rsp+{self.offset}]"


@dataclass(frozen=True, **SLOTS)
class DebugArg:
    """A DWARF argument name, read through the frame's debug info; ``register`` is read instead when the
    frame does not know the name (a binary without debug info, and eBPF, which reads no DWARF)."""

    name: str
    register: str | None = None

    def describe(self) -> str:
        return self.name if self.register is None else f"{self.name} / ${self.register}"


@dataclass(frozen=True, **SLOTS)
class Deref:
    """What was read is a pointer to a struct: the value is the ``width`` bytes at that pointer plus
    ``field`` (e.g. ``HeapTupleData.t_len``: ``Deref(0, width=4)``). ``block_id`` reads PostgreSQL's
    ``BlockIdData`` there (two 16-bit halves, high first)."""

    field: int
    width: int = 8
    block_id: bool = False

    def __post_init__(self) -> None:
        if self.width not in FIELD_WIDTHS:
            raise ValueError(f"a struct field is 2, 4 or 8 bytes wide, not {self.width}")
        if self.block_id and self.width != 4:
            raise ValueError("a BlockIdData is 4 bytes wide")

    def wrap(self, text: str) -> str:
        return f"{'blockid' if self.block_id else f'u{self.width * 8}'}[{text}+{self.field}]"


@dataclass(frozen=True, **SLOTS)
class Read:
    """A value the call has: read at ``source``, dereferenced by ``deref`` if given, plus ``offset`` (added
    last: a base adjustment, e.g. -26 when the call gets a pointer 26 bytes into the page, MariaDB's
    ``encryption_scheme_decrypt``)."""

    source: Register | StackSlot | DebugArg
    deref: Deref | None = None
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.source, (Register, StackSlot, DebugArg)):
            raise TypeError(f"a read's source is a register, a stack slot or a debug-info argument, not {self.source!r}")
        if self.deref is not None and not isinstance(self.deref, Deref):
            raise TypeError(f"a read's dereference is a Deref, not {self.deref!r}")

    @property
    def at_entry(self) -> bool:
        """True when no debug info is needed: a register or the stack, read at the first instruction."""
        return not isinstance(self.source, DebugArg)

    @property
    def location(self) -> Register | StackSlot | None:
        """Where the value is without debug info (a debug-info argument's register, if it has one)."""
        if isinstance(self.source, DebugArg):
            return None if self.source.register is None else Register(self.source.register)
        return self.source

    def describe(self) -> str:
        """Human text: ``in``, ``$rsi``, ``[$rsp+8]``, ``$rdi-26``, ``u32[$rdi+8]``, ``in / $rdx``."""
        source = self.source
        parts = [source.name, f"${source.register}"] if isinstance(source, DebugArg) and source.register else [source.describe()]
        adjust = f"{self.offset:+d}" if self.offset else ""
        if self.deref is not None:
            parts = [self.deref.wrap(p) for p in parts]
        return " / ".join(p + adjust for p in parts)


@dataclass(frozen=True, **SLOTS)
class Constant:
    """A fixed value instead of a read (e.g. a page size)."""

    value: int

    def describe(self) -> str:
        return str(self.value)


#: Where a value lives when the probe fires.
ArgRef = Union[Read, Constant]

_FLAT_KEYS = ("name", "register", "constant", "stack", "offset", "field", "width", "block_id")


def ref_fields(ref: ArgRef) -> dict:
    """The flat JSON form (``name``, ``register``, ``constant``, ``stack``, ``offset``; ``field``, ``width``,
    ``block_id`` only with a dereference): what gdb's helper reads and the agent's wire carries."""
    if isinstance(ref, Constant):
        return {"name": None, "register": None, "constant": int(ref.value), "stack": None, "offset": 0}
    source = ref.source
    out = {"name": source.name if isinstance(source, DebugArg) else None,
           "register": source.name if isinstance(source, Register) else (
               source.register if isinstance(source, DebugArg) else None),
           "constant": None, "stack": source.offset if isinstance(source, StackSlot) else None,
           "offset": int(ref.offset)}
    if ref.deref is not None:
        out.update(field=ref.deref.field, width=ref.deref.width, block_id=ref.deref.block_id)
    return out


def ref_of(fields: dict) -> ArgRef:
    """The :data:`ArgRef` of a flat JSON form; ValueError for an unknown key or a combination that names
    no place or more than one (a constant with a register, a register and a stack slot)."""
    unknown = set(fields) - set(_FLAT_KEYS)
    if unknown:
        raise ValueError(f"unknown field(s) {', '.join(sorted(unknown))}")
    name, register, constant, stack = (fields.get(k) for k in ("name", "register", "constant", "stack"))
    offset, field = int(fields.get("offset") or 0), fields.get("field")
    if field is None and (fields.get("block_id") or fields.get("width") not in (None, 8)):
        raise ValueError("a width or block_id without a struct field")
    if constant is not None:
        if name is not None or register is not None or stack is not None or offset or field is not None:
            raise ValueError("a constant with a place to read or an adjustment")
        return Constant(int(constant))
    if name is not None:
        if stack is not None:
            raise ValueError("a debug-info argument falls back to a register only")
        source = DebugArg(str(name), None if register is None else str(register))
    elif (register is None) == (stack is None):
        raise ValueError("a read names one register or one stack slot")
    else:
        source = Register(str(register)) if register is not None else StackSlot(int(stack))
    deref = None if field is None else Deref(int(field), int(fields.get("width") or 8), bool(fields.get("block_id")))
    return Read(source, deref, offset)
