"""Where every probe hit of an eBPF window went: the counts that add up.

Each call the entry probe sees ends in exactly one place::

    hits = captured + thinned + not kept + lost + sampled out + rate capped + over the count + other calls

- **captured**: handed to the window's consumer as a page pair.
- **thinned**: paired, but over the window's keep rate (:mod:`~tdescope.app.probe.keep_rate`: the
  GUI and ``record`` keep a few hundred a second); counted, never built.
- **not kept**: reached the workbench (the ring), but the window did not hand it over: it came
  after the window's deadline or count, or was still unread, or still inside the call, when the
  window closed. Counted, never copied out of the ring.
- **lost**: the ring had no room for it (either side), or the probe could not read its arguments.
- **sampled out**: skipped by 1-in-N sampling (``--sample``); **rate capped**: skipped by the
  byte-rate cap (``--max-mb-per-s``); **over the count**: after the window's count was reached.
  None of these is copied.
- **other calls**: the recipe's condition did not hold (an encrypt call on a decrypt probe).

A recipe whose calls are chunks of messages (pgcrypto) counts calls here; the captured ones were joined
into :attr:`Tally.messages` captures, and the chunks of a message the window did not keep are not kept.

The probe (``capture.bpf.c``) counts its side per CPU; the window counts captured and not kept.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from tdescope.app.probe.stats import EbpfStats, WindowCounts

__all__ = ["Tally", "tally_of"]

#: (field, words) in the order the line says them.
_TERMS = (("captured", "captured"), ("thinned", "thinned"), ("not_kept", "not kept"), ("lost", "lost"),
          ("sampled_out", "sampled out"), ("rate_capped", "rate capped"), ("over_limit", "over the count"),
          ("other_calls", "other calls"))


@dataclass(frozen=True, slots=True)
class Tally:
    """One window's hits and where each went (see the module's docstring)."""

    hits: int
    captured: int
    thinned: int
    not_kept: int
    lost: int
    sampled_out: int
    rate_capped: int
    over_limit: int
    other_calls: int
    messages: int = 0

    @property
    def accounted(self) -> int:
        """The sum of the terms: equal to :attr:`hits` when every hit was counted once."""
        return sum(getattr(self, name) for name, _ in _TERMS)

    @property
    def adds_up(self) -> bool:
        return self.accounted == self.hits

    def line(self) -> str:
        """``120030 hits = 100000 captured + 20030 not kept + ...`` (zero terms left out)."""
        terms = [f"{getattr(self, name)} {words}" for name, words in _TERMS
                 if getattr(self, name) or name == "captured"]
        text = f"{self.hits} hits = " + " + ".join(terms)
        if self.messages:
            text += f" (the captured calls joined into {self.messages} messages)"
        return text if self.adds_up else f"{text} (off by {self.hits - self.accounted})"

    def to_json(self) -> dict:
        return {**asdict(self), "adds_up": self.adds_up}


def tally_of(counts: WindowCounts | None) -> Tally | None:
    """The tally of a window's counts (the probe's and the window's); None without the probe's."""
    if counts is None:
        return None
    probe = counts.probe
    ebpf = probe if isinstance(probe, EbpfStats) else EbpfStats()  # gdb counts hits only: the rest are 0
    return Tally(
        hits=probe.hits, captured=counts.captured, thinned=counts.thinned,
        not_kept=counts.not_kept - ebpf.lost_return,  # their pages are in not_kept once: lost
        lost=probe.lost + ebpf.lost_return, sampled_out=ebpf.sampled_out, rate_capped=ebpf.rate_capped,
        over_limit=ebpf.over_limit, other_calls=ebpf.skipped, messages=counts.messages,
    )
