"""Medians and 95 % intervals of encrypted/plain ratios over interleaved rounds.

The interval is a bootstrap percentile interval of the median of the per-round
ratios (10 000 resamples, fixed seed, so one set of rounds always gives the
same interval). Ratios are paired: each round's encrypted time is divided by
the same round's plain time, so a machine that slows down for a round slows
both sides and cancels out. With 5 rounds the interval is close to
[min, max] of the ratios (the order-statistic interval, ~94 % coverage); more
rounds tighten it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

import numpy as np

__all__ = ["INTERVAL_METHOD", "median_interval", "spread"]

#: How the interval is computed, as said in results and reports.
INTERVAL_METHOD = "bootstrap 95 % interval of the median (10 000 resamples)"

_RESAMPLES = 10_000
_SEED = 20261125


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float, float]:
    """``(median, low, high)`` of ``values``: the median and its bootstrap percentile interval.

    Parameters
    ----------
    values : sequence of float
        One figure per round (NaN and infinities are dropped).
    level : float
        Coverage of the interval.

    Returns
    -------
    tuple of float
        All three NaN when no finite value is left; low == high == median for one value.
    """
    data = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if data.size == 0:
        return math.nan, math.nan, math.nan
    median = float(statistics.median(data.tolist()))
    if data.size == 1:
        return median, median, median
    rng = np.random.default_rng(_SEED)
    picks = rng.integers(0, data.size, size=(_RESAMPLES, data.size))
    medians = np.median(data[picks], axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(medians, [tail, 1.0 - tail], method="inverted_cdf")
    return median, float(min(low, median)), float(max(high, median))


def spread(median: float, low: float, high: float) -> float:
    """Half the interval's width as a fraction of the median (0.12 means ±12 %); NaN when unknown."""
    if not (math.isfinite(median) and math.isfinite(low) and math.isfinite(high)) or median == 0:
        return math.nan
    return (high - low) / 2.0 / abs(median)
