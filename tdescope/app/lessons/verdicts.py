"""The verdicts of a lesson's card: how our figures compare with the published ones."""

from __future__ import annotations

__all__ = ["DIFFERENT", "INCONCLUSIVE", "NO_COMPARISON", "SAME"]

SAME, DIFFERENT, INCONCLUSIVE, NO_COMPARISON = "same direction", "different", "inconclusive", "no comparison"
