"""Showing a capture in the page view without holding the GUI thread.

Decoding a page is the engine's work: MariaDB's decoder may run SQL (the table's columns) under
the session lock, which a workload holds while it runs, and every decoder walks the buffer in
Python. :class:`CapturePresenter` prepares what the page view draws (both sides decoded, entropy
per chunk, the diff, the title, the structure tree's rows) on a :class:`~tdescope.ui.gui_thread.tasks.TaskRunner`
thread and shows it
when it is ready. Clicks that come faster than decoding are not queued: the latest wins, and a
prepared capture that is no longer the one asked for is dropped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tdescope.app.engines.api import DecodedPage, PageDecoder
from tdescope.app.events import PageCapture
from tdescope.app.probe.capture_record import side_label
from tdescope.app.probe.entropy import chunk_entropy, diff_mask
from tdescope.ui.views.hex_paint import diff_color
from tdescope.ui.views.pageview import PageView
from tdescope.ui.views.structure_tree import StructureRows, structure_rows
from tdescope.ui.gui_thread.tasks import TaskRunner, describe

__all__ = ["CapturePresenter", "ShownCapture", "prepare_capture"]

#: Entropy is drawn per this many bytes.
CHUNK = 256


@dataclass(frozen=True, slots=True)
class ShownCapture:
    """Everything the page view draws for one capture, computed off the GUI thread."""

    capture: PageCapture
    decoded_after: DecodedPage | None
    decoded_before: DecodedPage | None
    title: str
    before_entropy: list[float]
    after_entropy: list[float]
    diff: np.ndarray | None
    roles: tuple[str, str]
    problem: str = ""
    """One line when the decoder failed (both sides are then shown undecoded)."""
    rows: StructureRows | None = None
    """The structure tree's rows, built with the decoding (attached to the page view's model once)."""


def capture_title(capture: PageCapture) -> str:
    """The page view's one-line summary: page (when there is one), direction, symbol, number, time."""
    page = f"page {capture.pgno} · " if capture.pgno >= 0 else ""
    clock = time.strftime("%H:%M:%S", time.localtime(capture.ts))
    return f"{page}{capture.direction} · {capture.symbol} · capture #{capture.seq} · {clock}"


def prepare_capture(decoder: PageDecoder, capture: PageCapture, problem_color=None) -> ShownCapture:
    """Decode both sides of ``capture``, compute its entropy and diff and build its structure rows (any
    thread; ``problem_color`` colours a page's problems). A decoder that raises leaves both sides
    undecoded and says why in :attr:`ShownCapture.problem`."""
    try:
        after = decoder.decode(capture.after, capture.pgno, capture.where) if capture.after else None
        before = decoder.decode(capture.before, capture.pgno, capture.where) if capture.before else None
        problem = ""
    except Exception as exc:  # noqa: BLE001 - a decoder's bug must not hide the bytes
        after = before = None
        problem = f"capture #{capture.seq} not decoded: {describe(exc)}"
    roles = (side_label(capture, "before"), side_label(capture, "after"))
    return ShownCapture(
        capture,
        after,
        before,
        capture_title(capture),
        chunk_entropy(capture.before, CHUNK),
        chunk_entropy(capture.after, CHUNK),
        np.array(diff_mask(capture.before, capture.after), dtype=bool),
        roles,
        problem,
        structure_rows(after, before, problem_color, roles),
    )


class CapturePresenter:
    """Shows captures in ``page_view``, prepared on ``tasks``; the latest request wins.

    Parameters
    ----------
    tasks : TaskRunner
        Where decoding runs.
    page_view : PageView
        What shows the result.
    decoder : callable
        Returns the window's current page decoder (it changes with the engine).
    problem : callable
        Shows one line when a decoder fails (the bytes are then shown undecoded).
    """

    def __init__(self, tasks: TaskRunner, page_view: PageView, decoder: Callable[[], PageDecoder],
                 problem: Callable[[str], None]) -> None:
        self._tasks = tasks
        self._view = page_view
        self._decoder = decoder
        self._problem = problem
        self._wanted: PageCapture | None = None
        self._then: list[Callable[[], None]] = []
        self.shown: PageCapture | None = None

    def show(self, capture: PageCapture) -> None:
        """Prepare ``capture`` on a worker thread, then show it unless another was asked for meanwhile."""
        if capture is not self._wanted:
            self._then.clear()  # what was to follow the previous capture
        self._wanted = capture
        decoder, color = self._decoder(), diff_color(self._view.palette())
        self._tasks.run(lambda _state: prepare_capture(decoder, capture, color), name="show-capture", on_done=self._ready,
                        on_exception=lambda exc: self._problem(f"capture #{capture.seq} not shown: {describe(exc)}"))

    @property
    def settled(self) -> bool:
        """True when the capture last asked for is in the view (or none was asked for)."""
        return self._wanted is None or self.shown is self._wanted

    def when_shown(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` (on the GUI thread) once the capture last asked for is in the view: at once if it is
        there already. A note's byte selection, for one, must land on the page it is about."""
        if self.settled:
            fn()
        else:
            self._then.append(fn)

    def forget(self) -> None:
        """The view was cleared: a capture still being prepared is not shown."""
        self._wanted = self.shown = None
        self._then.clear()

    def _ready(self, shown: ShownCapture) -> None:
        if shown.capture is not self._wanted:
            return  # a later click superseded it
        self.shown = shown.capture
        if shown.problem:
            self._problem(shown.problem)
        self._view.show_capture(shown.capture.before, shown.capture.after, shown.decoded_after,
                                shown.decoded_before, shown.title, shown.before_entropy, shown.after_entropy,
                                shown.diff, chunk=CHUNK, roles=shown.roles, rows=shown.rows)
        then, self._then = self._then, []
        for fn in then:
            fn()
