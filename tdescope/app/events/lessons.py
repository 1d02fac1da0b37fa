"""A lesson's result card."""

from __future__ import annotations

from dataclasses import dataclass, field

from tdescope.app.events.base import Event, Word
from tdescope.app.slots import SLOTS

__all__ = ["LessonCard", "LessonVerdict"]


class LessonVerdict(Word):
    """What a lesson's card says of ours beside the published figure (the badge's words). Its own name:
    :class:`~tdescope.app.ab.result_table.Verdict` is what one ratio's interval says."""

    SAME = "same direction"
    DIFFERENT = "different"
    INCONCLUSIVE = "inconclusive"  #: ours within noise
    NO_COMPARISON = "no comparison"
    CANNOT_RUN = "cannot run"  #: the lesson needs what this engine or machine lacks
    CANCELLED = "cancelled"
    FAILED = "failed"


@dataclass(frozen=True, **SLOTS)
class LessonCard(Event):
    """A lesson's result card: the published figure beside ours, and the verdict.

    Attributes
    ----------
    lesson, title, engine : str
        Lesson id and title, and the engine it ran on.
    question, source : str
        What the lesson asks, and where the published figure comes from (seed file, section).
    published : tuple of str
        The published figures, one line each.
    ours : tuple of str
        Our figures, one line each, in the published ones' shape.
    verdict : LessonVerdict
        ``same direction``, ``different``, ``inconclusive`` (ours within noise), ``no comparison``,
        ``cannot run``, ``cancelled`` or ``failed`` (a card read back from a file gets the member too).
    verdict_text : str
        The verdict with its numbers.
    evidence : tuple of str
        What backs ours: captures, hotspots, waits, counts, one line each.
    figures : dict
        Our figures as numbers, by name (``ratio_median``, ``first_scan_decrypts``...).
    note : str
        What this engine's run stands in for, when it is not the published experiment.
    params : dict
        The workload parameters it ran with.
    """

    lesson: str
    title: str
    engine: str
    question: str
    source: str
    published: tuple[str, ...]
    ours: tuple[str, ...]
    verdict: LessonVerdict
    verdict_text: str
    evidence: tuple[str, ...] = ()
    figures: dict = field(default_factory=dict)
    note: str = ""
    params: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "verdict", LessonVerdict(self.verdict))  # a file's word -> the member

    def text(self) -> str:
        """The card as plain text (the CLI's output, a note's body)."""
        lines = [f"Lesson: {self.title} ({self.lesson}) on {self.engine}", f"Question: {self.question}",
                 f"Source: {self.source}", "Published:"]
        lines += [f"  {p}" for p in self.published]
        lines.append("Ours:")
        lines += [f"  {o}" for o in self.ours] or ["  (nothing measured)"]
        lines.append(f"Verdict: {self.verdict}: {self.verdict_text}")
        if self.evidence:
            lines.append("Evidence:")
            lines += [f"  {e}" for e in self.evidence]
        if self.note:
            lines.append(f"Note: {self.note}")
        return "\n".join(lines)
