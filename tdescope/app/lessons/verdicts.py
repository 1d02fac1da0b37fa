"""The verdicts a lesson's analysis gives: how our figures compare with the published ones."""

from __future__ import annotations

from tdescope.app.events import LessonVerdict

__all__ = ["DIFFERENT", "INCONCLUSIVE", "NO_COMPARISON", "SAME"]

SAME, DIFFERENT, INCONCLUSIVE, NO_COMPARISON = (LessonVerdict.SAME, LessonVerdict.DIFFERENT, LessonVerdict.INCONCLUSIVE,
                                                LessonVerdict.NO_COMPARISON)
