"""Which probe backend a capture uses: ``auto``, ``ebpf`` or ``gdb``, and why.

``auto`` takes eBPF where it can load here (root or CAP_BPF + CAP_PERFMON,
kernel 5.8 or later for the ring buffer, libbpf, the built program, and the
kernel's verifier accepting it) and the recipe reads only registers, stack
slots and constants; otherwise gdb, with one line saying why.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

from tdescope.app.errors import UserError
from tdescope.app.probe.backend import ProbeBackend
from tdescope.app.probe.gdb_backend import GdbBackend

__all__ = ["BACKENDS", "EbpfStatus", "ProbeOptions", "check_ebpf", "choose_backend", "ebpf_status"]

#: What ``--backend`` accepts.
BACKENDS = ("auto", "ebpf", "gdb")
#: The ring buffer (BPF_MAP_TYPE_RINGBUF) came with Linux 5.8.
MIN_KERNEL = (5, 8)
_CAP_PERFMON, _CAP_BPF, _CAP_SYS_ADMIN = 38, 39, 21


@dataclass(frozen=True, slots=True)
class ProbeOptions:
    """How the user wants probes placed.

    Attributes
    ----------
    backend : str
        ``auto``, ``ebpf`` or ``gdb``.
    sample_every : int
        eBPF: copy one matching call in N.
    max_mb_per_s : float
        eBPF: cap on the bytes copied per second (0: none).
    ring_mb : float or None
        eBPF: ring buffer size; None sizes it from the expected rate (:meth:`ring_size_mb`).
    """

    backend: str = "auto"
    sample_every: int = 1
    max_mb_per_s: float = 0.0
    ring_mb: float | None = None

    def __post_init__(self) -> None:
        if self.backend not in BACKENDS:
            raise UserError(f"backend must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        if not 1 <= self.sample_every <= 1_000_000:
            raise UserError(f"sampling must be 1 in 1 to 1 in 1000000, not 1 in {self.sample_every}")
        if not 0 <= self.max_mb_per_s <= 100_000:
            raise UserError(f"byte-rate cap must be between 0 and 100000 MB/s, not {self.max_mb_per_s}")
        if self.ring_mb is not None and not 1 <= self.ring_mb <= 1024:
            raise UserError(f"ring size must be between 1 and 1024 MB, not {self.ring_mb}")

    def ring_size_mb(self) -> float:
        """The ring: as asked, else half a second of the byte-rate cap (4 MB at least), else 64 MB,
        which holds ~0.2 s of a 40k pages/s target's 4 KiB page pairs while the reader is held up."""
        if self.ring_mb is not None:
            return self.ring_mb
        if self.max_mb_per_s:
            return min(256.0, max(4.0, self.max_mb_per_s / 2))
        return 64.0


@dataclass(frozen=True, slots=True)
class EbpfStatus:
    """Whether eBPF capture works here. ``reason``: one line when it does not."""

    ok: bool
    reason: str
    kernel: str
    permitted: bool
    libbpf: bool
    built: bool


def _kernel_version(release: str) -> tuple[int, int]:
    try:
        major, minor = release.split(".")[:2]
        return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)
    except ValueError:
        return (0, 0)


def _permitted() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        with open("/proc/self/status") as fh:
            caps = next(int(line.split()[1], 16) for line in fh if line.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return False
    has = lambda bit: bool(caps >> bit & 1)  # noqa: E731
    return has(_CAP_SYS_ADMIN) or (has(_CAP_BPF) and has(_CAP_PERFMON))


@functools.lru_cache(maxsize=1)
def ebpf_status() -> EbpfStatus:
    """Check eBPF capture once per process: kernel, permission, libbpf, the program, a real load."""
    return check_ebpf(os.uname().release)


def check_ebpf(release: str) -> EbpfStatus:
    """:func:`ebpf_status` for a kernel ``release`` string (``uname -r``)."""
    from tdescope.app.probe.ebpf.program import PROGRAM, built, object_path
    from tdescope.app.system.bpf_object import BpfObject
    from tdescope.app.system.libbpf import libbpf

    permitted, have_lib, have_obj = _permitted(), True, built()
    reason = ""
    try:
        libbpf()
    except UserError as exc:
        have_lib, reason = False, str(exc)
    if _kernel_version(release) < MIN_KERNEL:
        reason = f"kernel {release} is older than 5.8 (no BPF ring buffer)"
    elif not permitted:
        reason = "eBPF needs root, or CAP_BPF and CAP_PERFMON"
    elif not reason and not have_obj:
        reason = f"the capture program is not built ({object_path()} missing; run make setup)"
    if not reason:
        try:
            obj = BpfObject(object_path(), PROGRAM)
            try:
                obj.resize("events", 1 << 20)
                obj.load()
            finally:
                obj.close()
        except UserError as exc:
            reason = str(exc)
    return EbpfStatus(not reason, reason, release, permitted, have_lib, have_obj)


def choose_backend(options: ProbeOptions, recipe, watchdog_s: float = 0.25,
                   gdb_path: str | None = None) -> tuple[ProbeBackend, str | None]:
    """The backend for ``recipe`` under ``options``, and a line for the user when ``auto``
    fell back to gdb (None otherwise). ``ebpf`` that cannot run raises UserError."""
    from tdescope.app.probe.ebpf.program import unsupported

    if options.backend == "gdb":
        return GdbBackend(gdb_path, watchdog_s), None
    why = unsupported(recipe) if recipe is not None else None
    status = ebpf_status()
    if options.backend == "ebpf":
        if not status.ok:
            raise UserError(status.reason if status.reason.startswith("eBPF") else f"eBPF: {status.reason}")
        if why:
            raise UserError(f"eBPF: {why}")
    elif why or not status.ok:
        return GdbBackend(gdb_path, watchdog_s), f"probing with gdb: {why or status.reason}"
    from tdescope.app.probe.ebpf.backend import EbpfBackend

    return EbpfBackend(options.ring_size_mb(), options.sample_every, options.max_mb_per_s * 1e6), None
