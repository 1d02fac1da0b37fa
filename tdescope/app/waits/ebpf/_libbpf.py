"""libbpf through ctypes, for the wait tracer: open, set the target, load, attach, read maps.

The capture probe has its own binding (``app/probe/ebpf/libbpf.py``), but ``app/waits`` sits below
``app/probe`` in the layer contracts and may not import it; this one holds only the calls the tracer
needs (raw tracepoints attach by section name, maps are iterated and read per CPU). libbpf's messages
(the verifier's among them) are collected, not printed. ``TDESCOPE_LIBBPF`` names another libbpf.
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading

from tdescope.app.errors import UserError

__all__ = ["BpfLink", "BpfObject", "RingReader", "libbpf", "possible_cpus"]

_LIB: ctypes.CDLL | None = None
_LOCK = threading.Lock()
_MESSAGES: list[str] = []
_PRINT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
_SAMPLE = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
_libc = ctypes.CDLL(None, use_errno=True)
_libc.vsnprintf.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, ctypes.c_void_p]


def _on_print(level: int, fmt: bytes, args: int) -> int:
    buf = ctypes.create_string_buffer(2048)
    _libc.vsnprintf(buf, len(buf), fmt, ctypes.c_void_p(args))
    _MESSAGES.append(buf.value.decode(errors="replace").rstrip())
    del _MESSAGES[:-200]
    return 0


_print_callback = _PRINT(_on_print)  # kept alive for as long as libbpf may call it


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
        p, c_int, c_char_p = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p
        for name, res, args in (
            ("bpf_object__open_file", p, [c_char_p, p]),
            ("bpf_object__load", c_int, [p]),
            ("bpf_object__close", None, [p]),
            ("bpf_object__find_map_by_name", p, [p, c_char_p]),
            ("bpf_object__find_program_by_name", p, [p, c_char_p]),
            ("bpf_map__set_initial_value", c_int, [p, p, ctypes.c_size_t]),
            ("bpf_map__fd", c_int, [p]),
            ("bpf_map_get_next_key", c_int, [c_int, p, p]),
            ("bpf_map_lookup_elem", c_int, [c_int, p, p]),
            ("bpf_program__attach", p, [p]),
            ("bpf_link__destroy", c_int, [p]),
            ("libbpf_num_possible_cpus", c_int, []),
            ("ring_buffer__new", p, [c_int, _SAMPLE, p, p]),
            ("ring_buffer__consume", c_int, [p]),
            ("ring_buffer__free", None, [p]),
            ("libbpf_set_print", p, [_PRINT]),
        ):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        lib.libbpf_set_print(_print_callback)
        _LIB = lib
        return lib


def possible_cpus() -> int:
    """CPUs a per-CPU map holds a value for."""
    n = libbpf().libbpf_num_possible_cpus()
    if n <= 0:
        raise UserError(f"eBPF: cannot count the possible CPUs: {os.strerror(-n)}")
    return n


def _fail(what: str, err: int) -> UserError:
    reason = os.strerror(err) if err else "unknown error"
    if err in (errno.EPERM, errno.EACCES):
        reason += " (eBPF needs root, or CAP_BPF and CAP_PERFMON)"
    return UserError(f"eBPF: {what}: {reason}")


class BpfLink:
    """One attached program; :meth:`destroy` detaches it (the kernel does too if we die)."""

    def __init__(self, ptr: int) -> None:
        self._ptr: int | None = ptr

    def destroy(self) -> None:
        if self._ptr:
            libbpf().bpf_link__destroy(self._ptr)
            self._ptr = None


class RingReader:
    """A BPF ring buffer read with libbpf's consumer, without waiting: :meth:`consume` takes what is there.

    For a small, bounded flow (the timeline's sample: a few hundred records a second); a ctypes call per
    record is fine there, not for a storm.
    """

    def __init__(self, fd: int, on_record) -> None:
        self._on_record = on_record
        self._callback = _SAMPLE(self._sample)  # kept alive while libbpf may call it
        ctypes.set_errno(0)
        self._ptr: int | None = libbpf().ring_buffer__new(fd, self._callback, None, None)
        if not self._ptr:
            raise _fail("cannot read the span ring", ctypes.get_errno())

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
            raise _fail(f"cannot open {os.path.basename(path)}", ctypes.get_errno())
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
            raise _fail(f"cannot set {map_name}", -rc)

    def load(self) -> None:
        """Load into the kernel (the verifier runs here)."""
        _MESSAGES.clear()
        rc = libbpf().bpf_object__load(self._ptr)
        if rc:
            hint = next((m for m in reversed(_MESSAGES) if "verifier" in m or "invalid" in m), "")
            raise _fail("the kernel refused the wait tracer" + (f" ({hint})" if hint else ""), -rc)

    def attach(self, program: str) -> BpfLink:
        """Attach ``program`` where its section says (a raw tracepoint)."""
        lib = libbpf()
        prog = lib.bpf_object__find_program_by_name(self._ptr, program.encode())
        if not prog:
            raise UserError(f"eBPF: the wait tracer has no program {program!r}")
        ctypes.set_errno(0)
        link = lib.bpf_program__attach(prog)
        if not link:
            raise _fail(f"cannot attach {program}", ctypes.get_errno())
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
