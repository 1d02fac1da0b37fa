"""libbpf through ctypes: open, size, load and attach the capture program; read its maps.

Only the dozen calls the capture probe needs, from Debian's ``libbpf1``
(``libbpf.so.1``, 1.1 or later): no bcc, no LLVM and no kernel headers at run
time. libbpf's own messages (the verifier's log among them) are collected, not
printed, so a failure can be told in one line. ``TDESCOPE_LIBBPF`` names another
libbpf to load (a newer build, or a path).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading

from tdescope.app.errors import UserError

__all__ = ["BpfLink", "BpfObject", "libbpf", "libbpf_messages"]

_LIB: ctypes.CDLL | None = None
_LOCK = threading.Lock()
_MESSAGES: list[str] = []
_PRINT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


def _on_print(level: int, fmt: bytes, args: int) -> int:
    buf = ctypes.create_string_buffer(2048)
    _libc.vsnprintf(buf, len(buf), fmt, ctypes.c_void_p(args))
    _MESSAGES.append(buf.value.decode(errors="replace").rstrip())
    del _MESSAGES[:-200]
    return 0


_print_callback = _PRINT(_on_print)  # kept alive for as long as libbpf may call it
_libc = ctypes.CDLL(None, use_errno=True)
_libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]


def libbpf() -> ctypes.CDLL:
    """The loaded ``libbpf.so.1``; UserError with the package to install when it is missing."""
    global _LIB
    with _LOCK:
        if _LIB is not None:
            return _LIB
        try:
            lib = ctypes.CDLL(os.environ.get("TDESCOPE_LIBBPF") or "libbpf.so.1", use_errno=True)
        except OSError:
            raise UserError("libbpf is not installed (Debian: apt-get install libbpf1)") from None
        p, c_int, c_char_p, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32
        for name, res, args in (
            ("bpf_object__open_file", p, [c_char_p, p]),
            ("bpf_object__load", c_int, [p]),
            ("bpf_object__close", None, [p]),
            ("bpf_object__find_map_by_name", p, [p, c_char_p]),
            ("bpf_object__find_program_by_name", p, [p, c_char_p]),
            ("bpf_map__set_max_entries", c_int, [p, u32]),
            ("bpf_map__fd", c_int, [p]),
            ("bpf_map__value_size", u32, [p]),
            ("bpf_map_update_elem", c_int, [c_int, p, p, ctypes.c_uint64]),
            ("bpf_map_lookup_elem", c_int, [c_int, p, p]),
            ("bpf_program__attach_uprobe", p, [p, ctypes.c_bool, c_int, c_char_p, ctypes.c_size_t]),
            ("bpf_link__destroy", c_int, [p]),
            ("libbpf_set_print", p, [_PRINT]),
            ("libbpf_num_possible_cpus", c_int, []),
        ):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        lib.libbpf_set_print(_print_callback)
        _LIB = lib
        return lib


def libbpf_messages(last: int = 5) -> list[str]:
    """libbpf's last messages (most recent last)."""
    return [m for m in _MESSAGES[-last:] if m]


def _fail(what: str, err: int) -> UserError:
    reason = os.strerror(err) if err else "unknown error"
    if err in (errno.EPERM, errno.EACCES):
        reason += " (eBPF needs root, or CAP_BPF and CAP_PERFMON)"
    return UserError(f"eBPF: {what}: {reason}")


class BpfLink:
    """One attached probe; :meth:`destroy` takes it out of the target (the kernel does too if we die)."""

    def __init__(self, ptr: int) -> None:
        self._ptr: int | None = ptr

    def destroy(self) -> None:
        if self._ptr:
            libbpf().bpf_link__destroy(self._ptr)
            self._ptr = None


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
            raise _fail(f"cannot open {os.path.basename(path)}", ctypes.get_errno())
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
            raise _fail(f"cannot size map {map_name}", -rc)

    def value_size(self, map_name: str) -> int:
        return int(libbpf().bpf_map__value_size(self._map(map_name)))

    def load(self) -> None:
        """Load into the kernel (the verifier runs here)."""
        _MESSAGES.clear()
        rc = libbpf().bpf_object__load(self._ptr)
        if rc:
            err = -rc
            hint = next((m for m in reversed(_MESSAGES) if "verifier" in m or "invalid" in m), "")
            raise _fail("the kernel refused the capture program" + (f" ({hint})" if hint else ""), err)
        self.loaded = True

    def map_fd(self, name: str) -> int:
        return int(libbpf().bpf_map__fd(self._map(name)))

    def update(self, name: str, key: ctypes.Structure | ctypes._SimpleCData, value) -> None:
        """Write one element of a map."""
        rc = libbpf().bpf_map_update_elem(self.map_fd(name), ctypes.byref(key), ctypes.byref(value), 0)
        if rc:
            raise _fail(f"cannot write map {name}", ctypes.get_errno() or -rc)

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
            raise _fail(f"cannot attach the {kind} at {os.path.basename(path)}+{offset:#x} in pid {pid}",
                        ctypes.get_errno())
        return BpfLink(link)

    def close(self) -> None:
        """Unload: maps and programs leave the kernel once no link holds them."""
        if self._ptr:
            libbpf().bpf_object__close(self._ptr)
            self._ptr = None
