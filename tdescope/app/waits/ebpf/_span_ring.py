"""The wait tracer's span ring, read with libbpf's own consumer.

Its BPF object is :class:`tdescope.app.system.bpf_object.BpfObject`, shared with the capture program.
"""

from __future__ import annotations

import ctypes

from tdescope.app.system.libbpf import SAMPLE_CALLBACK, bpf_error, libbpf

__all__ = ["RingReader"]


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
