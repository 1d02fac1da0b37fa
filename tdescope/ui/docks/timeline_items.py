"""Items the Timeline dock places one per thing (labels, marker lines), made once and reused.

An hour's replay has hundreds of runs: a marker line at each start and end, the run's name, a label
per workload side. Adding an item to a pyqtgraph plot and removing it again each cost about a
millisecond of the GUI thread; a replay seeking back cleared the timeline and removed them all in
one go (half a second and more), then made them again. An :class:`ItemPool` hides its items on
:meth:`~ItemPool.release` and hands them out again, so a seek back costs a hide per item.
"""

from __future__ import annotations

from collections.abc import Callable

import pyqtgraph as pg

__all__ = ["ItemPool", "text_width"]

_WIDTHS: dict[str, float] = {}


def text_width(label: pg.TextItem) -> float:
    """``label``'s width in pixels (the item ignores zoom), measured once per text: the labels are
    fitted on each zoom and pan, and measuring each held the GUI thread."""
    text = label.toPlainText()
    width = _WIDTHS.get(text)
    if width is None:
        width = label.boundingRect().width()
        if width > 0:  # not measured before the item is laid out
            _WIDTHS[text] = width
    return width


class ItemPool:
    """Graphics items of one kind on ``plot``: :meth:`take` the next one (shown), :meth:`release` all.

    Parameters
    ----------
    plot : pyqtgraph.PlotWidget
        Where the items are added (once each).
    make : callable
        Makes a new item.
    """

    def __init__(self, plot: pg.PlotWidget, make: Callable[[], pg.GraphicsObject]) -> None:
        self._plot = plot
        self._make = make
        self._items: list[pg.GraphicsObject] = []
        self._used = 0

    def __len__(self) -> int:
        return self._used

    @property
    def used(self) -> list[pg.GraphicsObject]:
        """The items taken since the last release, in the order taken."""
        return self._items[:self._used]

    def take(self) -> pg.GraphicsObject:
        """The next item: a released one again, or a new one added to the plot; shown."""
        if self._used == len(self._items):
            item = self._make()
            self._plot.addItem(item)
            self._items.append(item)
        item = self._items[self._used]
        self._used += 1
        item.show()
        return item

    def release(self, keep: int = 0) -> None:
        """Hide every item past the first ``keep``; they are handed out again by :meth:`take`."""
        for item in self._items[keep:self._used]:
            item.hide()
        self._used = min(keep, self._used)
