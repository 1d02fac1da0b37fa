"""Reading a BPF ring buffer from user space, through its memory mapping.

The kernel maps a ring buffer map as one read-write page holding the consumer
position, then one read-only page holding the producer position followed by
the data area mapped twice (so a record that wraps reads as one slice). Each
record starts with an 8-byte header: its length, with a "busy" bit while the
producer still writes it and a "discard" bit for records given back.

Reading here is a loop over memory, no system call and no callback per record.
The consumer position is written with one aligned 8-byte store (a
``memoryview`` cast to ``Q``): a torn store makes the kernel see a full ring.

Each buffer is copied once, out of the ring into a ``bytes``. At tens of
thousands of 16 KiB pages a second, glibc's habit of handing freed heap back to
the kernel (and taking page faults to get it again) cost 3-4x the copy itself:
a reader keeps freed memory for reuse instead (:func:`keep_freed_memory`).
"""

from __future__ import annotations

import ctypes
import mmap
from collections.abc import Callable

__all__ = ["RingReader", "keep_freed_memory"]

_BUSY = 1 << 31
_DISCARD = 1 << 30
_HEADER = 8


#: glibc's mallopt parameters: trim threshold and top pad.
_M_TRIM_THRESHOLD, _M_TOP_PAD = -1, -2
_KEPT = 256 << 20


def keep_freed_memory() -> None:
    """Let glibc keep up to 256 MiB of freed heap for reuse (process-wide; no-op without glibc)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    mallopt(_M_TRIM_THRESHOLD, _KEPT)
    mallopt(_M_TOP_PAD, 64 << 20)


class RingReader:
    """The consumer end of a ring buffer map.

    Parameters
    ----------
    fd : int
        The ring buffer map's file descriptor.
    size : int
        Its data size in bytes (the map's ``max_entries``).
    """

    def __init__(self, fd: int, size: int) -> None:
        page = mmap.PAGESIZE
        keep_freed_memory()
        self.size = size
        self._mask = size - 1
        self._cons_map = mmap.mmap(fd, page, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=0)
        # populated at once: otherwise the first pass over the ring takes a page fault every 4 KiB
        populate = getattr(mmap, "MAP_POPULATE", 0)
        self._data_map = mmap.mmap(fd, page + 2 * size, mmap.MAP_SHARED | populate, mmap.PROT_READ, offset=page)
        self._cons = memoryview(self._cons_map).cast("Q")
        self._whole = memoryview(self._data_map)
        self._prod = self._whole[:8].cast("Q")
        self._data = self._whole[page:]
        self._lens = self._data.cast("I")  # record headers are 8-byte aligned

    def pending(self) -> int:
        """Bytes written and not yet consumed."""
        return self._prod[0] - self._cons[0]

    def drain(self, handle: Callable[[memoryview], None], max_bytes: int | None = None) -> int:
        """Hand each complete record's bytes to ``handle`` (a view valid during the call only);
        returns how many. Stops at a record still being written, or after ``max_bytes``."""
        cons = self._cons[0]
        prod = self._prod[0]
        end = prod if max_bytes is None else min(prod, cons + max_bytes)
        lens, data, mask = self._lens, self._data, self._mask
        count = 0
        while cons < end:
            at = cons & mask
            length = lens[at >> 2]
            if length & _BUSY:
                break
            size = length & ~(_BUSY | _DISCARD)
            if not length & _DISCARD:
                handle(data[at + _HEADER:at + _HEADER + size])
                count += 1
            cons += (size + _HEADER + 7) & ~7
            self._cons[0] = cons  # release each record at once: the producer may reuse it
        return count

    def discard(self, kind: int) -> int:
        """Release every complete record without reading its body; returns how many began with the
        32-bit ``kind`` (the records nobody will keep are counted, never copied)."""
        cons = self._cons[0]
        end = self._prod[0]
        lens, mask = self._lens, self._mask
        count = 0
        while cons < end:
            at = cons & mask
            length = lens[at >> 2]
            if length & _BUSY:
                break
            size = length & ~(_BUSY | _DISCARD)
            if not length & _DISCARD and size >= 4 and lens[(at + _HEADER) >> 2] == kind:
                count += 1
            cons += (size + _HEADER + 7) & ~7
        self._cons[0] = cons
        return count

    def close(self) -> None:
        for view in (self._cons, self._prod, self._lens, self._data, self._whole):
            view.release()
        self._cons_map.close()
        self._data_map.close()
