"""libbpf through ctypes, loaded once for every BPF program tdescope runs (capture, wait tracer).

Only the calls the programs need, from Debian's ``libbpf1`` (``libbpf.so.1``, 1.1 or
later): no bcc, no LLVM and no kernel headers at run time. libbpf has one message
callback per process, so it is set here, once: its messages (the verifier's log among
them) are collected, not printed, and a failure is told in one line.
``TDESCOPE_LIBBPF`` names another libbpf to load (a newer build, or a path).
"""

from __future__ import annotations

import ctypes
import errno
import os
import threading

from tdescope.app.errors import UserError
from tdescope.app.system.runtime_tools import LIBBPF

__all__ = ["SAMPLE_CALLBACK", "BpfLink", "bpf_error", "clear_messages", "libbpf", "libbpf_messages",
           "possible_cpus", "refusal_hint"]

_LIB: ctypes.CDLL | None = None
_LOCK = threading.Lock()
_MESSAGES: list[str] = []
_PRINT = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
#: ``ring_buffer__new``'s per-record callback: ``(ctx, data, size) -> int``.
SAMPLE_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t)
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
            raise UserError(LIBBPF.missing()) from None
        p, c_int, c_char_p, u32 = ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32
        for name, res, args in (
            ("bpf_object__open_file", p, [c_char_p, p]),
            ("bpf_object__load", c_int, [p]),
            ("bpf_object__close", None, [p]),
            ("bpf_object__find_map_by_name", p, [p, c_char_p]),
            ("bpf_object__find_program_by_name", p, [p, c_char_p]),
            ("bpf_map__set_max_entries", c_int, [p, u32]),
            ("bpf_map__set_initial_value", c_int, [p, p, ctypes.c_size_t]),
            ("bpf_map__fd", c_int, [p]),
            ("bpf_map__value_size", u32, [p]),
            ("bpf_map_update_elem", c_int, [c_int, p, p, ctypes.c_uint64]),
            ("bpf_map_lookup_elem", c_int, [c_int, p, p]),
            ("bpf_map_get_next_key", c_int, [c_int, p, p]),
            ("bpf_program__attach", p, [p]),
            ("bpf_program__attach_uprobe", p, [p, ctypes.c_bool, c_int, c_char_p, ctypes.c_size_t]),
            ("bpf_link__destroy", c_int, [p]),
            ("libbpf_num_possible_cpus", c_int, []),
            ("ring_buffer__new", p, [c_int, SAMPLE_CALLBACK, p, p]),
            ("ring_buffer__consume", c_int, [p]),
            ("ring_buffer__free", None, [p]),
            ("libbpf_set_print", p, [_PRINT]),
        ):
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        lib.libbpf_set_print(_print_callback)
        _LIB = lib
        return lib


def libbpf_messages(last: int = 5) -> list[str]:
    """libbpf's last messages (most recent last)."""
    return [m for m in _MESSAGES[-last:] if m]


def clear_messages() -> None:
    """Forget libbpf's earlier messages (before a load, so a refusal's hint is its own)."""
    _MESSAGES.clear()


def refusal_hint() -> str:
    """The verifier's line that says why the last load was refused, or ``""``."""
    return next((m for m in reversed(_MESSAGES) if "verifier" in m or "invalid" in m), "")


def possible_cpus() -> int:
    """CPUs a per-CPU map holds a value for."""
    n = libbpf().libbpf_num_possible_cpus()
    if n <= 0:
        raise UserError(f"eBPF: cannot count the possible CPUs: {os.strerror(-n)}")
    return n


def bpf_error(what: str, err: int) -> UserError:
    """One line for a failed libbpf call: ``what`` and the errno's reason (with the rights eBPF needs)."""
    reason = os.strerror(err) if err else "unknown error"
    if err in (errno.EPERM, errno.EACCES):
        reason += " (eBPF needs root, or CAP_BPF and CAP_PERFMON)"
    return UserError(f"eBPF: {what}: {reason}")


class BpfLink:
    """One attached program; :meth:`destroy` takes it out (the kernel does too if we die)."""

    def __init__(self, ptr: int) -> None:
        self._ptr: int | None = ptr

    def destroy(self) -> None:
        if self._ptr:
            libbpf().bpf_link__destroy(self._ptr)
            self._ptr = None
