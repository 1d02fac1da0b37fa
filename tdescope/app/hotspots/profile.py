"""Live hotspots: where the target's CPU goes, and how much of it is crypto.

The pieces, from raw to ranked:

* :func:`parse_perf_script` turns ``perf script`` text into :class:`Sample` s
  (pure, in :mod:`tdescope.app.hotspots.perf_script`);
* :func:`fold` folds them into stacks, the payload of a ``HotspotWindow``;
* :class:`Profile` counts self and total samples per symbol across windows
  (merge, time-range filter, ``top(n)``);
* :func:`crypto_pct` says how much of it is encryption, by the one rule
  :func:`tdescope.app.hotspots.crypto.is_crypto`;
* :func:`diff_profiles` ranks what grew between an encrypted and a plain run;
* :class:`HotspotSampler` and :func:`check_perf` run real perf
  (in :mod:`tdescope.app.hotspots.perf_record`).
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from tdescope.app.hotspots.perf_record import HotspotSampler, check_perf, perf_event
from tdescope.app.hotspots.perf_script import (
    Frame,
    Sample,
    fold,
    frame_label,
    parse_perf_script,
)
from tdescope.app.events import HotspotWindow
from tdescope.app.hotspots.crypto import is_crypto

__all__ = [
    "Frame",
    "Sample",
    "parse_perf_script",
    "fold",
    "SymbolStat",
    "Profile",
    "crypto_pct",
    "DiffRow",
    "diff_profiles",
    "HotspotSampler",
    "check_perf",
    "perf_event",
]


@dataclass(frozen=True, slots=True)
class SymbolStat:
    """One row of a hotspot table.

    ``self`` counts samples where the function was the leaf (the CPU was in
    it); ``total`` counts samples where it was anywhere on the stack.
    Percentages are of all samples of the profile.
    """

    symbol: str
    dso: str
    self_samples: int
    total_samples: int
    self_pct: float
    total_pct: float


@functools.lru_cache(maxsize=1 << 16)
def _frames(stack: str) -> tuple[str, frozenset[str]]:
    """A folded stack's leaf and its functions, each once (a recursive one counts once per sample in its total).
    Cached: a target's stacks repeat from window to window, and a replay's seek counts an hour of them."""
    names = stack.split(";")
    return names[-1], frozenset(names)


@dataclass(frozen=True)
class Profile:
    """Self and total sample counts per symbol.

    Build one with :meth:`from_stacks`, :meth:`from_samples` or
    :meth:`from_windows`; combine with :meth:`merge`. Immutable, so a view can
    keep one while the sampler builds the next.
    """

    samples: int = 0
    self_counts: dict[str, int] = field(default_factory=dict)
    total_counts: dict[str, int] = field(default_factory=dict)
    dsos: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_stacks(cls, stacks: dict[str, int], dsos: dict[str, str] | None = None) -> Profile:
        """Count a folded-stack mapping (outermost first, ``;``-joined)."""
        self_c: dict[str, int] = {}
        total_c: dict[str, int] = {}
        n = 0
        for stack, count in stacks.items():
            leaf, names = _frames(stack)
            n += count
            self_c[leaf] = self_c.get(leaf, 0) + count
            for name in names:
                total_c[name] = total_c.get(name, 0) + count
        return cls(n, self_c, total_c, dict(dsos or {}))

    @classmethod
    def from_samples(
        cls, samples: Iterable[Sample], start: float | None = None, end: float | None = None
    ) -> Profile:
        """Count parsed samples, those with ``start <= ts <= end`` when given.

        Sample times are perf's clock (seconds since boot), not epoch seconds.
        """
        samples = [
            s for s in samples
            if (start is None or s.ts >= start) and (end is None or s.ts <= end)
        ]
        return cls.from_stacks(fold(samples), _dsos_of(samples))

    @classmethod
    def from_windows(
        cls,
        windows: Iterable[HotspotWindow],
        start: float | None = None,
        end: float | None = None,
    ) -> Profile:
        """Merge the windows that overlap ``[start, end]`` (epoch seconds).

        A window is the time resolution: one that only partly overlaps the
        range is counted whole.
        """
        out = cls()
        for w in windows:
            if start is not None and w.ts < start:
                continue
            if end is not None and w.start > end:
                continue
            out = out.merge(cls.from_stacks(w.stacks, w.dsos))
        return out

    def merge(self, other: Profile) -> Profile:
        """A new profile holding the counts of both."""
        self_c = Counter(self.self_counts)
        self_c.update(other.self_counts)
        total_c = Counter(self.total_counts)
        total_c.update(other.total_counts)
        dsos = {**other.dsos, **self.dsos}
        return Profile(self.samples + other.samples, dict(self_c), dict(total_c), dsos)

    def stat(self, symbol: str) -> SymbolStat:
        """The row of one symbol (zeros when it was never sampled)."""
        s = self.self_counts.get(symbol, 0)
        t = self.total_counts.get(symbol, 0)
        n = self.samples or 1
        return SymbolStat(symbol, self.dsos.get(symbol, ""), s, t, 100.0 * s / n, 100.0 * t / n)

    def top(self, n: int = 20, by: str = "self") -> list[SymbolStat]:
        """The ``n`` hottest symbols by ``"self"`` or ``"total"`` samples.

        Ties are broken by the other count, then by name, so the order is stable.
        """
        if by not in ("self", "total"):
            raise ValueError("by must be 'self' or 'total'")
        names = set(self.total_counts) | set(self.self_counts)
        rows = [self.stat(name) for name in names]
        if by == "self":
            rows.sort(key=lambda r: (-r.self_samples, -r.total_samples, r.symbol))
        else:
            rows.sort(key=lambda r: (-r.total_samples, -r.self_samples, r.symbol))
        return rows[:n]


def _dsos_of(samples: Iterable[Sample]) -> dict[str, str]:
    out: dict[str, str] = {}
    for s in samples:
        for f in s.frames:
            out.setdefault(frame_label(f), f.dso)
    return out


def crypto_pct(profile: Profile) -> float:
    """Time in crypto: self samples in crypto functions over all samples, in %."""
    if not profile.samples:
        return 0.0
    n = sum(c for name, c in profile.self_counts.items() if is_crypto(name))
    return 100.0 * n / profile.samples


@dataclass(frozen=True, slots=True)
class DiffRow:
    """How one function differs between an encrypted and a plain run.

    Attributes
    ----------
    symbol, dso : str
    enc_samples, plain_samples : int
        Self samples in each run.
    enc_pct, plain_pct : float
        Self samples as % of each run's samples.
    delta_pct : float
        ``enc_pct - plain_pct``: how much bigger a share of the CPU it takes.
    added_pct : float
        ``(enc_samples - plain_samples) / plain total * 100``: CPU time the
        function added, as % of the whole plain run. At equal sampling
        frequency samples are CPU time, so this says "encryption added X% of
        the plain run's CPU here" even when the encrypted run is longer.
    """

    symbol: str
    dso: str
    enc_samples: int
    plain_samples: int
    enc_pct: float
    plain_pct: float
    delta_pct: float
    added_pct: float
    crypto: bool


def diff_profiles(encrypted: Profile, plain: Profile, by: str = "delta_pct") -> list[DiffRow]:
    """Rank functions by how much they grew from ``plain`` to ``encrypted``.

    Parameters
    ----------
    encrypted, plain : Profile
        Profiles of the same workload, taken at the same sampling frequency.
    by : {"delta_pct", "added_pct"}
        Sort key, descending.
    """
    if by not in ("delta_pct", "added_pct"):
        raise ValueError("by must be 'delta_pct' or 'added_pct'")
    ne, np_ = encrypted.samples or 1, plain.samples or 1
    rows = []
    for name in set(encrypted.self_counts) | set(plain.self_counts):
        e = encrypted.self_counts.get(name, 0)
        p = plain.self_counts.get(name, 0)
        ep, pp = 100.0 * e / ne, 100.0 * p / np_
        dso = encrypted.dsos.get(name) or plain.dsos.get(name, "")
        rows.append(DiffRow(name, dso, e, p, ep, pp, ep - pp, 100.0 * (e - p) / np_, is_crypto(name)))
    rows.sort(key=lambda r: (-getattr(r, by), r.symbol))
    return rows
