"""``@dataclass(**SLOTS)``, ``@dataclass(**SLOTS_KW_ONLY)``: slotted (and keyword-only) dataclasses where
Python has them (3.10 and newer), plain ones on 3.9.

The agent carries app/ modules to a database host whose own ``python3`` may be 3.9 (issue 28), which
has no ``dataclass(slots=True)`` nor ``kw_only``; the workbench keeps its smaller, faster slotted events,
and a dataclass that grows optional fields is built by name (issue #25, item 2): the workbench and the
tests run 3.10+, where a positional call is a TypeError, so no positional call survives to reach a 3.9 host.
"""

import sys

__all__ = ["SLOTS", "SLOTS_KW_ONLY"]

_NEW = sys.version_info >= (3, 10)
#: Keyword arguments for :func:`dataclasses.dataclass`: ``{"slots": True}`` from Python 3.10 on.
SLOTS = {"slots": True} if _NEW else {}
#: The same, and every field the class declares keyword-only (its base's fields, ``Event.ts``, stay positional).
SLOTS_KW_ONLY = {"slots": True, "kw_only": True} if _NEW else {}
