"""The capture program's BPF object: open, size, load and attach it; read and write its maps.

libbpf itself (the loaded library, its messages, errors, links) is :mod:`tdescope.app.system.libbpf`,
shared with the wait tracer.
"""

from __future__ import annotations

import ctypes
import os

from tdescope.app.errors import UserError
from tdescope.app.system.libbpf import BpfLink, bpf_error, clear_messages, libbpf, libbpf_messages, refusal_hint

__all__ = ["BpfLink", "BpfObject", "libbpf", "libbpf_messages"]


class BpfObject:
    """A BPF object file: opened, sized, loaded, its maps and programs by name.

    Parameters
    ----------
    path : str
        The compiled ``.bpf.o``.
    """

    def __init__(self, path: str) -> None:
        lib = libbpf()
        if not os.path.exists(path):
            raise UserError(f"eBPF: the capture program is not built ({path} missing; run make setup)")
        ctypes.set_errno(0)
        self._ptr: int | None = lib.bpf_object__open_file(path.encode(), None)
        if not self._ptr:
            raise bpf_error(f"cannot open {os.path.basename(path)}", ctypes.get_errno())
        self.loaded = False

    def _map(self, name: str) -> int:
        ptr = libbpf().bpf_object__find_map_by_name(self._ptr, name.encode())
        if not ptr:
            raise UserError(f"eBPF: the capture program has no map {name!r}")
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

    def load(self) -> None:
        """Load into the kernel (the verifier runs here)."""
        clear_messages()
        rc = libbpf().bpf_object__load(self._ptr)
        if rc:
            err = -rc
            hint = refusal_hint()
            raise bpf_error("the kernel refused the capture program" + (f" ({hint})" if hint else ""), err)
        self.loaded = True

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

    def attach_uprobe(self, program: str, retprobe: bool, pid: int, path: str, offset: int) -> BpfLink:
        """Attach ``program`` at file ``offset`` of ``path``, firing only in process ``pid``."""
        lib = libbpf()
        prog = lib.bpf_object__find_program_by_name(self._ptr, program.encode())
        if not prog:
            raise UserError(f"eBPF: the capture program has no program {program!r}")
        ctypes.set_errno(0)
        link = lib.bpf_program__attach_uprobe(prog, retprobe, int(pid), path.encode(), int(offset))
        if not link:
            kind = "return probe" if retprobe else "probe"
            raise bpf_error(f"cannot attach the {kind} at {os.path.basename(path)}+{offset:#x} in pid {pid}",
                        ctypes.get_errno())
        return BpfLink(link)

    def close(self) -> None:
        """Unload: maps and programs leave the kernel once no link holds them."""
        if self._ptr:
            libbpf().bpf_object__close(self._ptr)
            self._ptr = None
