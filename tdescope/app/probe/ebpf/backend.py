"""The eBPF backend: a uprobe and a uretprobe, a ring buffer, and nothing that stops the target.

:class:`EbpfBackend` loads the generic capture program (``capture.bpf.c``),
writes the recipe into its config, and attaches it to the function's file
offset in the ELF file the target maps, for that process only (every thread
of it, threads created later included). Records come back through a ring
buffer read from its memory mapping; :class:`EbpfHandle` hands them over as
the same frames the gdb backend produces; the probe's cost and the ring's
losses are read from the program's map as :class:`~tdescope.app.probe.stats.EbpfStats`
(``read_stats``), in this process, with no frame between.

The target is never stopped: nothing to pause, no stop budget, no watchdog.
If the workbench dies, the kernel removes the probes when their file
descriptors close.
"""

from __future__ import annotations

import ctypes
import os
import select
import threading
import time

from tdescope.app.errors import UserError
from tdescope.app.probe.backend import Armed, Closed, Happened, TargetNews
from tdescope.app.probe.ebpf.program import (
    PROGRAM, N_STATS, TRAP_COST_US, FrameAssembler, Stat, check_layout, config_of, object_path,
)
from tdescope.app.probe.ebpf.ring import RingReader
from tdescope.app.system.bpf_object import BpfObject
from tdescope.app.system.libbpf import BpfLink
from tdescope.app.probe.frames import Frame, FrameKind, Notice, pack_notice, unpack
from tdescope.app.probe.spec import ProbeSpec
from tdescope.app.probe.stats import EbpfStats
from tdescope.app.system.elf import elf_index, resolve_in_process

__all__ = ["DEFAULT_RING_MB", "EbpfBackend", "EbpfHandle", "ring_bytes"]

#: Ring size when nothing better is known: 64 MiB holds ~0.2 s of a 40k pages/s target's pages.
DEFAULT_RING_MB = 64
#: Seconds between two reads of the program's counters (its per-CPU map).
STATS_S = 0.25
#: Ring bytes read per :meth:`EbpfHandle.frames` call: a window turn stays short whatever the backlog
#: (~125 16 KiB page pairs: a small heap to reuse), so it hears its deadline and its cancel in time.
SLICE_BYTES = 4 << 20


def ring_bytes(megabytes: float) -> int:
    """The ring size for ``megabytes``: a power of two, at least 1 MiB, at most 1 GiB."""
    want = max(1 << 20, min(int(megabytes * (1 << 20)), 1 << 30))
    return 1 << (want - 1).bit_length()


class EbpfBackend:
    """Probes through eBPF uprobes.

    Parameters
    ----------
    ring_mb : float
        Ring buffer size (rounded up to a power of two).
    sample_every : int
        Copy one matching call in N (1: every one).
    max_bytes_per_s : float
        Byte-rate cap on what the probe copies (0: none); calls over it are counted, not copied.
    """

    name = "ebpf"
    stops_target = False

    def __init__(self, ring_mb: float = DEFAULT_RING_MB, sample_every: int = 1, max_bytes_per_s: float = 0.0) -> None:
        self.ring_size = ring_bytes(ring_mb)
        self.sample_every = max(1, int(sample_every))
        self.max_bytes_per_s = max(0.0, float(max_bytes_per_s))

    def attach(self, pid: int, spec: ProbeSpec) -> "EbpfHandle":
        """Load the program and attach it to ``pid``; the target runs on untouched until then and after."""
        config = config_of(spec, self.sample_every, self.max_bytes_per_s)  # refuses what eBPF cannot read
        handle = EbpfHandle(pid, spec, self.ring_size)
        try:
            handle._load(config)
            handle._arm()
        except BaseException:
            handle.close()
            raise
        return handle


class EbpfHandle:
    """One loaded capture program attached to one process (see :class:`~tdescope.app.probe.backend.ProbeHandle`)."""

    def __init__(self, pid: int, spec: ProbeSpec, ring_size: int) -> None:
        self.pid = int(pid)
        self.spec = spec
        self.armed = Armed(None)
        #: eBPF never stops the target to attach.
        self.arming_stop_s = 0.0
        self._ring_size = ring_size
        self._obj: BpfObject | None = None
        self._ring: RingReader | None = None
        self._links: list[BpfLink] = []
        self._detaching = threading.Lock()
        self._assembler = FrameAssembler(time.time() - time.monotonic())
        self._notices: list[Frame] = []
        self._stats = [0] * N_STATS
        self._final: EbpfStats | None = None  # read at disarm, handed over by the next read_stats
        self._stats_at = 0.0
        self._pidfd = _open_pidfd(self.pid)
        self._closed: Closed | None = None

    # -- arming ----------------------------------------------------------------
    def _load(self, config) -> None:
        obj = self._obj = BpfObject(object_path(), PROGRAM)
        obj.resize("events", self._ring_size)
        obj.load()
        check_layout(obj.value_size("config"), obj.has_map("shared"))
        obj.update("config", ctypes.c_uint32(0), config)
        self._ring = RingReader(obj.map_fd("events"), self._ring_size)

    def _arm(self) -> None:
        """Attach where the function is mapped now; a library not loaded yet is armed when it appears."""
        found = self._locate()
        if found is None:
            if self.spec.allow_pending:
                self.armed = Armed(self.spec.symbols[0], (), pending=True)
                return
            self.armed = Armed(None, errors=(f"symbol {' or '.join(self.spec.symbols)} not found",))
            return
        self._attach(*found)

    def _locate(self) -> tuple[str, str, int, int] | None:
        """(symbol, file, file offset, runtime address) of the first of the spec's symbols the process maps."""
        resolved = resolve_in_process(self.pid, self.spec.symbols, None)
        if resolved is None:
            return None
        offset = elf_index(resolved.path).file_offset(resolved.file_value)
        if offset is None:
            raise UserError(f"eBPF: {resolved.name} in {resolved.path} is outside the file's loaded segments")
        return resolved.name, resolved.path, offset, resolved.address

    def _attach(self, symbol: str, path: str, offset: int, address: int) -> None:
        # through the target's root: the same file even when it runs in another mount namespace
        target_path = f"/proc/{self.pid}/root{path}"
        obj = self._obj
        if self.spec.after is not None:
            # the return probe first: every call the entry probe sees then has its return seen too
            self._links.append(obj.attach_uprobe("on_return", True, self.pid, target_path, offset))
        self._links.append(obj.attach_uprobe("on_entry", False, self.pid, target_path, offset))
        for pid in self.spec.followers:  # PostgreSQL 18's I/O workers: forks of one postmaster, the same file
            try:
                if self.spec.after is not None:
                    self._links.append(obj.attach_uprobe("on_return", True, pid, f"/proc/{pid}/root{path}", offset))
                self._links.append(obj.attach_uprobe("on_entry", False, pid, f"/proc/{pid}/root{path}", offset))
            except (OSError, UserError):
                continue  # gone since it was listed (a worker the postmaster stopped): the others stay probed
        self.armed = Armed(symbol, (hex(address),))

    # -- armed -----------------------------------------------------------------
    def start(self) -> None:
        """Nothing to do: the probe runs from the moment it is attached."""

    def frames(self) -> list[Frame]:
        """Frames read from the ring (at most :data:`SLICE_BYTES` of it), and notices (armed on load)."""
        if self._ring is not None:
            self._ring.drain(self._assembler.add, SLICE_BYTES)
        out = self._notices + self._assembler.take()
        self._notices = []
        return out

    def read_stats(self) -> EbpfStats | None:
        """The program's counters, read from its map every :data:`STATS_S` (and once after :meth:`disarm`);
        None in between."""
        if self._final is not None:
            final, self._final = self._final, None
            return final
        now = time.monotonic()
        if self._obj is None or now - self._stats_at < STATS_S:
            return None
        self._stats_at = now
        return self._read_stats()

    def _read_stats(self) -> EbpfStats:
        s = self._stats = self._obj.lookup_percpu_u64s("stats", N_STATS)
        busy = s[Stat.PROG_NS] / 1e9 + (s[Stat.HITS] + s[Stat.RETURNS]) * TRAP_COST_US / 1e6
        return EbpfStats(busy_s=busy, hits=s[Stat.HITS], lost=s[Stat.LOST], skipped=s[Stat.CONDITION],
                         sampled_out=s[Stat.SAMPLED_OUT], rate_capped=s[Stat.RATE_CAPPED],
                         over_limit=s[Stat.OVER_LIMIT], emitted=s[Stat.EMITTED], lost_return=s[Stat.LOST_RETURN],
                         read_errors=s[Stat.READ_ERRORS], ring_used=self._ring.pending() if self._ring else 0,
                         ring_size=self._ring_size)

    @property
    def counters(self) -> dict[str, int]:
        """The program's counters at the last read, by :class:`Stat` name (lower case)."""
        return {stat.name.lower(): self._stats[stat] for stat in Stat}

    def resume(self) -> None:
        """Nothing to do: an eBPF probe never pauses itself."""

    def poll(self, timeout: float) -> TargetNews | None:
        """Up to ``timeout`` s: the target's exit, or a pending library that has appeared (armed then).
        Does not wait while the ring holds more than a slice: the window comes back for it at once."""
        if self._ring is not None and self._ring.pending() > SLICE_BYTES // 4:
            timeout = 0.0
        if self.armed.pending:
            found = self._locate()
            if found is not None:
                self._attach(*found)
                self._notices.append(unpack(pack_notice(Notice.ARMED_ON_LOAD, symbol=found[0],
                                                        objfile=found[1]))[0][0])
        if _exited(self.pid, self._pidfd, timeout):
            return TargetNews(Happened.TARGET_EXITED)
        return None

    # -- the way out -----------------------------------------------------------
    def detach(self) -> None:
        """Take the probes out of the target; safe from any thread (a window's deadline timer), and
        twice. Each link waits for the kernel's grace period (~0.1 s here, side by side no faster)."""
        with self._detaching:
            links, self._links = self._links, []
            for link in links:
                _destroy(link)

    def disarm(self) -> None:
        """Take the probes out of the target, then read the final counters. Never raises.

        What the ring still holds stays for :meth:`frames` (and :meth:`discard`)."""
        self.detach()
        try:
            if self._obj is not None:
                self._final = self._read_stats()  # for the window's last read_stats, after close
        except Exception:  # noqa: BLE001
            pass

    def discard(self) -> int:
        """Drop what the ring still holds without reading it, and let the ring go; returns how many
        pages (entry records) that was. After :meth:`close`, the window's last read comes first."""
        if self._ring is None:
            return 0
        try:
            return self._ring.discard(int(FrameKind.BEFORE))
        finally:
            if self._closed is not None:
                self._ring.close()
                self._ring = None

    def close(self) -> Closed:
        """Detach everything and unload the program. The ring's mapping outlives the program: unread
        records stay for :meth:`frames` until :meth:`discard` lets them go."""
        if self._closed is not None:
            return self._closed
        self.disarm()
        if self._obj is not None:
            self._obj.close()
            self._obj = None
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        self._closed = Closed()
        return self._closed


def _destroy(link: BpfLink) -> None:
    try:
        link.destroy()
    except Exception:  # noqa: BLE001 - the kernel removes it with the object anyway
        pass


def _open_pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(pid: int, pidfd: int | None, timeout: float) -> bool:
    """Wait up to ``timeout`` s; True when the process has exited."""
    if pidfd is not None:
        ready, _, _ = select.select([pidfd], [], [], timeout)
        return bool(ready)
    time.sleep(timeout)
    return not os.path.exists(f"/proc/{pid}")
