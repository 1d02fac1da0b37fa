"""The perf pipeline's metronome: a tiny process perf record also watches, that maps code every tick.

``perf script`` sorts samples across threads by time: it prints a batch once perf record has written
the *next* one, and perf record writes a batch only when it has something new. A target that goes
idle leaves its last batch unprinted until it runs again (a 0.1 s burst every 3 s came out 3 s late,
in the next burst's window). This process is in perf record's ``-p`` list and maps an executable page
every tick: each one is a ``PERF_RECORD_MMAP2`` in the stream, so there is always a next batch and
the last one is printed within about two ticks. It costs a wake-up per tick and no samples (it never
runs long enough to be sampled; :class:`~tdescope.app.hotspots.perf_stream.PerfPipeline` drops any
that it gets anyway).

Run as ``python -m tdescope.app.hotspots.perf_tick SECONDS``; it says ``ready`` on stdout once it
can map, and ends at EOF on its stdin (the workbench closed it, ended, or was killed).
"""

from __future__ import annotations

import mmap
import os
import select
import signal
import sys

__all__ = ["tick"]


def tick(period_s: float, stdin: int = 0) -> None:
    """Map and unmap one executable page of the interpreter every ``period_s`` until EOF on ``stdin``."""
    fd = os.open(sys.executable, os.O_RDONLY)
    os.write(1, b"ready\n")
    try:
        while True:
            ready, _, _ = select.select([stdin], [], [], period_s)
            if ready and not os.read(stdin, 4096):
                return
            mmap.mmap(fd, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_EXEC).close()
    finally:
        os.close(fd)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl+C is for the workbench, which ends us by EOF
    tick(float(sys.argv[1]))
