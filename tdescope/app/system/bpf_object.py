"""A BPF object file through libbpf: open, size or set its constants, load, attach, read and write maps.

The capture program (uprobes, :mod:`tdescope.app.probe.ebpf`) and the wait tracer (raw tracepoints,
:mod:`tdescope.app.waits.ebpf`) each load one; libbpf itself (the library, its messages, errors, links)
is :mod:`tdescope.app.system.libbpf`.
"""

from __future__ import annotations

import ctypes
import os

from tdescope.app.errors import UserError
from tdescope.app.system.libbpf import BpfLink, bpf_error, clear_messages, libbpf, refusal_hint

__all__ = ["BpfObject"]


class BpfObject:
    """A BPF object file: opened, sized, loaded, its maps and programs by name.

    Parameters
    ----------
    path : str
        The compiled ``.bpf.o``.
    what : str
        What the program is, for messages (``"the capture program"``, ``"the wait tracer"``).
    """

    def __init__(self, path: str, what: str) -> None:
        lib = libbpf()
        self.what = what
        if not os.path.exists(path):
            raise UserError(f"eBPF: {what} is not built ({path} missing; run make setup)")
        ctypes.set_errno(0)
        self._ptr: int | None = lib.bpf_object__open_file(path.encode(), None)
        if not self._ptr:
            raise bpf_error(f"cannot open {os.path.basename(path)}", ctypes.get_errno())
        self.loaded = False
        self._keep: list = []  # initial values libbpf points at until load

    # -- before load ----------------------------------------------------------------------------
    def _map(self, name: str) -> int:
        ptr = libbpf().bpf_object__find_map_by_name(self._ptr, name.encode())
        if not ptr:
            raise UserError(f"eBPF: {self.what} has no map {name!r}")
        return ptr

    def has_map(self, name: str) -> bool:
        return bool(libbpf().bpf_object__find_map_by_name(self._ptr, name.encode()))

    def resize(self, map_name: str, entries: int) -> None:
        """Set a map's size before :meth:`load` (a ring buffer's size in bytes: a power of two pages)."""
        rc = libbpf().bpf_map__set_max_entries(self._map(map_name), entries)
        if rc:
            raise bpf_error(f"cannot size map {map_name}", -rc)

    def value_size(self, map_name: str) -> int:
        return int(libbpf().bpf_map__value_size(self._map(map_name)))

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
            raise bpf_error(f"the kernel refused {self.what}" + (f" ({hint})" if hint else ""), -rc)
        self.loaded = True

    # -- programs -------------------------------------------------------------------------------
    def _program(self, program: str) -> int:
        prog = libbpf().bpf_object__find_program_by_name(self._ptr, program.encode())
        if not prog:
            raise UserError(f"eBPF: {self.what} has no program {program!r}")
        return prog

    def attach(self, program: str) -> BpfLink:
        """Attach ``program`` where its section says (a raw tracepoint)."""
        prog = self._program(program)
        ctypes.set_errno(0)
        link = libbpf().bpf_program__attach(prog)
        if not link:
            raise bpf_error(f"cannot attach {program}", ctypes.get_errno())
        return BpfLink(link)

    def attach_uprobe(self, program: str, retprobe: bool, pid: int, path: str, offset: int) -> BpfLink:
        """Attach ``program`` at file ``offset`` of ``path``, firing only in process ``pid``."""
        prog = self._program(program)
        ctypes.set_errno(0)
        link = libbpf().bpf_program__attach_uprobe(prog, retprobe, int(pid), path.encode(), int(offset))
        if not link:
            kind = "return probe" if retprobe else "probe"
            raise bpf_error(f"cannot attach the {kind} at {os.path.basename(path)}+{offset:#x} in pid {pid}",
                            ctypes.get_errno())
        return BpfLink(link)

    # -- maps -----------------------------------------------------------------------------------
    def map_fd(self, name: str) -> int:
        return int(libbpf().bpf_map__fd(self._map(name)))

    def update(self, name: str, key: ctypes.Structure | ctypes._SimpleCData, value) -> None:
        """Write one element of a map."""
        rc = libbpf().bpf_map_update_elem(self.map_fd(name), ctypes.byref(key), ctypes.byref(value), 0)
        if rc:
            raise bpf_error(f"cannot write map {name}", ctypes.get_errno() or -rc)

    def lookup_percpu_u64s(self, name: str, count: int) -> list[int]:
        """Elements 0..count-1 of a per-CPU array map of u64, each summed over the CPUs."""
        lib, fd = libbpf(), self.map_fd(name)
        cpus = max(1, lib.libbpf_num_possible_cpus())
        key, values, out = ctypes.c_uint32(), (ctypes.c_uint64 * cpus)(), []
        for i in range(count):
            key.value = i
            ctypes.memset(values, 0, ctypes.sizeof(values))
            lib.bpf_map_lookup_elem(fd, ctypes.byref(key), values)
            out.append(sum(values))
        return out

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
