"""The base of every event, and of every word an event stores."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from tdescope.app.slots import SLOTS

__all__ = ["Event", "Word"]


@dataclass(frozen=True, **SLOTS)
class Event:
    """Base of every event: when it happened (epoch seconds)."""

    ts: float


class Word(str, Enum):
    """A closed set of words an event or a recipe stores (a ``str``-valued Enum).

    A member is its word wherever a ``str`` was: in JSON (session files, frames, ``--json``), in
    comparisons (``Direction.READ == "read"``), and in text and f-strings (``__str__``/``__format__``,
    which an Enum would otherwise spell ``Direction.READ``), so files written before the words were
    typed read the same, and new ones are written byte for byte as before.
    """

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
