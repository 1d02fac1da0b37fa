"""``@dataclass(**SLOTS)``: slotted dataclasses where Python has them (3.10 and newer), plain ones on 3.9.

The agent carries app/ modules to a database host whose own ``python3`` may be 3.9 (issue 28), which
has no ``dataclass(slots=True)``; the workbench keeps its smaller, faster slotted events.
"""

import sys

__all__ = ["SLOTS"]

#: Keyword arguments for :func:`dataclasses.dataclass`: ``{"slots": True}`` from Python 3.10 on.
SLOTS = {"slots": True} if sys.version_info >= (3, 10) else {}
