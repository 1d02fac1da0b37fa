"""The wait tracer's BPF object (set the target, load, attach by section, iterate maps) and a ring reader.

libbpf itself (the loaded library, its messages, errors, links) is :mod:`tdescope.app.system.libbpf`,
shared with the capture program.
"""

from __future__ import annotations

import ctypes
import os

from tdescope.app.errors import UserError
from tdescope.app.system.libbpf import (SAMPLE_CALLBACK, BpfLink, bpf_error, clear_messages, libbpf, possible_cpus,
                                        refusal_hint)

__all__ = ["BpfLink", "BpfObject", "RingReader", "libbpf", "possible_cpus"]


class RingReader:
    """A BPF ring buffer read with libbpf's consumer, without waiting: :meth:`consume` takes what is there.

    For a small, bounded flow (the timeline's sample: a few hundred records a second); a ctypes call per
    record is fine there, not for a storm.
    """

    def __init__(self, fd: int, on_record) -> None:
        self._on_record = on_record
        self._callback = SAMPLE_CALLBACK(self._sample)  # kept alive while libbpf may call it
        ctypes.set_errno(0)
        self._ptr: int | None = libbpf().ring_buffer__new(fd, self._callback, None, None)
        if not self._ptr:
            raise bpf_error("cannot read the span ring", ctypes.get_errno())

    def _sample(self, _ctx, data, size) -> int:
        self._on_record(ctypes.string_at(data, size))
        return 0

    def consume(self) -> int:
        """Hand every waiting record to ``on_record``; how many there were."""
        return int(libbpf().ring_buffer__consume(self._ptr)) if self._ptr else 0

    def close(self) -> None:
        if self._ptr:
            libbpf().ring_buffer__free(self._ptr)
            self._ptr = None


class BpfObject:
    """The wait tracer's object file: opened, given its read-only constants, loaded; maps by name.

    Parameters
    ----------
    path : str
        The compiled ``waits.bpf.o``.
    """

    def __init__(self, path: str) -> None:
        lib = libbpf()
        if not os.path.exists(path):
            raise UserError(f"eBPF: the wait tracer is not built ({path} missing; run make setup)")
        ctypes.set_errno(0)
        self._ptr: int | None = lib.bpf_object__open_file(path.encode(), None)
        if not self._ptr:
            raise bpf_error(f"cannot open {os.path.basename(path)}", ctypes.get_errno())
        self._keep: list = []  # initial values libbpf points at until load

    def _map(self, name: str) -> int:
        ptr = libbpf().bpf_object__find_map_by_name(self._ptr, name.encode())
        if not ptr:
            raise UserError(f"eBPF: the wait tracer has no map {name!r}")
        return ptr

    def set_initial(self, map_name: str, value: bytes) -> None:
        """Set a global section's bytes (``.rodata``: the constants) before :meth:`load`."""
        buf = ctypes.create_string_buffer(value, len(value))
        self._keep.append(buf)
        rc = libbpf().bpf_map__set_initial_value(self._map(map_name), buf, len(value))
        if rc:
            raise bpf_error(f"cannot set {map_name}", -rc)

    def load(self) -> None:
        """Load into the kernel (the verifier runs here)."""
        clear_messages()
        rc = libbpf().bpf_object__load(self._ptr)
        if rc:
            hint = refusal_hint()
            raise bpf_error("the kernel refused the wait tracer" + (f" ({hint})" if hint else ""), -rc)

    def attach(self, program: str) -> BpfLink:
        """Attach ``program`` where its section says (a raw tracepoint)."""
        lib = libbpf()
        prog = lib.bpf_object__find_program_by_name(self._ptr, program.encode())
        if not prog:
            raise UserError(f"eBPF: the wait tracer has no program {program!r}")
        ctypes.set_errno(0)
        link = lib.bpf_program__attach(prog)
        if not link:
            raise bpf_error(f"cannot attach {program}", ctypes.get_errno())
        return BpfLink(link)

    def map_fd(self, name: str) -> int:
        return int(libbpf().bpf_map__fd(self._map(name)))

    def items(self, fd: int, key_type, value_size: int) -> list[tuple[bytes, bytes]]:
        """Every (key, value) of the map ``fd``, as raw bytes (a per-CPU value: all CPUs' slots)."""
        lib = libbpf()
        key, nxt = key_type(), key_type()
        value = ctypes.create_string_buffer(value_size)
        out = []
        prev = None
        while lib.bpf_map_get_next_key(fd, prev, ctypes.byref(nxt)) == 0:
            if lib.bpf_map_lookup_elem(fd, ctypes.byref(nxt), value) == 0:
                out.append((bytes(nxt), value.raw))
            ctypes.memmove(ctypes.byref(key), ctypes.byref(nxt), ctypes.sizeof(key_type))
            prev = ctypes.byref(key)
        return out

    def close(self) -> None:
        """Unload: maps and programs leave the kernel once no link holds them."""
        if self._ptr:
            libbpf().bpf_object__close(self._ptr)
            self._ptr = None
