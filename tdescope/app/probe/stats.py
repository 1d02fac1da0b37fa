"""What a probe counted, one type per backend (issue #25, item 2).

gdb's probe helper runs in gdb's own process: its counts arrive as a ``busy`` notice frame in the spool,
read into :class:`GdbStats`. The eBPF program's counters are read in the window's own process from its
per-CPU map, as :class:`EbpfStats`, with no frame between. Both give the stopped time the stop budget
charges; a :class:`~tdescope.app.probe.window.CaptureSummary` reports the last ones in :class:`WindowCounts`,
with the window's own counts beside them.
"""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.slots import SLOTS, SLOTS_KW_ONLY

__all__ = ["EbpfStats", "GdbStats", "WindowCounts"]


@dataclass(frozen=True, **SLOTS)
class GdbStats:
    """gdb's helper's running totals: ``busy_s`` the target spent stopped, uncaptured hits included,
    ``hits`` of the breakpoint, and ``reinserted``: times its ``int3`` was written again after the kernel took
    it out (a uprobe on the same file and offset ended in another process; hits in between were missed)."""

    busy_s: float = 0.0
    hits: int = 0
    reinserted: int = 0
    lost = 0  #: gdb loses nothing: a hit it cannot copy stops the target until it has


@dataclass(frozen=True, **SLOTS)
class EbpfStats:
    """The capture program's counters (``enum stat`` of ``capture.bpf.c``, summed over CPUs), and the ring.

    ``busy_s`` is the time the probes added to the target's calls (the program's own run time plus a trap
    cost per hit and return); ``skipped``: calls the condition left out; ``lost``: records the ring had no
    room for; ``ring_used``/``ring_size``: its bytes now.
    """

    busy_s: float = 0.0
    hits: int = 0
    lost: int = 0
    skipped: int = 0
    sampled_out: int = 0
    rate_capped: int = 0
    over_limit: int = 0
    emitted: int = 0
    lost_return: int = 0
    read_errors: int = 0
    ring_used: int = 0
    ring_size: int = 0



@dataclass(frozen=True, **SLOTS_KW_ONLY)
class WindowCounts:
    """Where a window's probe hits went (:mod:`~tdescope.app.probe.tally` adds them up): the probe's last
    counters, and the window's own: pairs ``captured`` (handed over), ``thinned`` (over the keep rate),
    ``not_kept`` (reached the workbench, not handed over); ``messages``: the captures they were joined into
    when the recipe's calls are chunks of messages (0: not joined)."""

    probe: GdbStats | EbpfStats
    captured: int
    thinned: int
    not_kept: int
    messages: int = 0
