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

__all__ = ["ItemPool", "SideLabels", "text_width"]

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


class SideLabels(ItemPool):
    """The workload sides' names, one label per span, set again only when their span is new or moved: an
    hour's replay has hundreds, and ``setText``/``setPos`` re-lay a label out each time."""

    def __init__(self, plot: pg.PlotWidget) -> None:
        super().__init__(plot, lambda: pg.TextItem(anchor=(0, 0.5), color=(30, 30, 30)))
        self._keys: list[tuple[str, float]] = []  # (side, x) each label shows, in the pool's order

    def place(self, sides_at: list[tuple[str, float]], y: float) -> None:
        """One label per ``(side, x)``, at height ``y``; the labels past them hidden."""
        self.release(keep=len(sides_at))
        while len(self) < len(sides_at):
            self.take()
        keys = self._keys
        del keys[len(sides_at):]
        for i, (label, key) in enumerate(zip(self.used, sides_at)):
            if i < len(keys) and keys[i] == key:
                continue
            label.setText(key[0])
            label.setPos(key[1], y)
            if i < len(keys):
                keys[i] = key
            else:
                keys.append(key)


class WaitSpanBars:
    """The sampled exact waits on the timeline: a bar each, as long as the wait, one
    :class:`~pyqtgraph.BarGraphItem` per wait class (Idle left out).

    One item with a brush per bar drew each of an eBPF storm's tens of thousands of bars from Python on
    every repaint; an item of one brush is drawn by Qt in one call. New spans are appended to their
    class's columns; nothing already placed is computed again.

    Parameters
    ----------
    plot : pyqtgraph.PlotWidget
        Where the bars go.
    y, height : float
        Where, on the vertical axis, and how tall.
    brush : callable
        A wait class's brush.
    """

    def __init__(self, plot: pg.PlotWidget, y: float, height: float, brush: Callable[[str], object]) -> None:
        self._plot, self._y, self._height, self._brush = plot, y, height, brush
        #: The bars of each wait class drawn so far.
        self.items: dict[str, pg.BarGraphItem] = {}
        self._columns: dict[str, tuple[list[float], list[float]]] = {}
        self._placed = 0

    def update(self, spans: list, t0: float) -> None:
        """Draw the spans of ``spans`` (append-only :class:`~tdescope.app.events.WaitSpan`) not drawn yet."""
        if len(spans) < self._placed:  # the run was cleared under the timeline
            self.clear()
        changed = set()
        for s in spans[self._placed:]:
            if s.wait_class == "Idle":
                continue
            x0, width = self._columns.setdefault(s.wait_class, ([], []))
            x0.append(s.start - t0)
            width.append(max(s.duration_s, 1e-4))
            changed.add(s.wait_class)
        self._placed = len(spans)
        for cls in changed:
            item = self.items.get(cls)
            if item is None:
                item = self.items[cls] = pg.BarGraphItem(x0=[], width=[], y0=self._y, height=self._height,
                                                         brush=self._brush(cls), pen=None)
                self._plot.addItem(item)
            x0, width = self._columns[cls]
            item.setOpts(x0=x0, width=width)

    def clear(self) -> None:
        """Forget every bar (the run was cleared); the items stay, empty."""
        for item in self.items.values():
            item.setOpts(x0=[], width=[])
        self._columns.clear()
        self._placed = 0
