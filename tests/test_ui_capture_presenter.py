"""A selected capture is decoded off the GUI thread, and the latest selection wins.

The decoder here is the real SQLite one behind a gate: it stands for MariaDB's, which may wait on
the session lock a running workload holds (the page view used to decode on the GUI thread).
"""

import threading

from PySide6.QtCore import QTimer

from tdescope.app.events import PageCapture
from tdescope.ui.views.pageview import PageView
from tdescope.ui.gui_thread.tasks import TaskRunner
from tdescope.ui.window.capture_presenter import CapturePresenter, prepare_capture


class GatedDecoder:
    """The real SQLite page decoder; decoding waits until :attr:`gate` is set."""

    def __init__(self):
        from tdescope.app.engines import discover_engines

        self.inner = discover_engines()[0]["sqlcipher"].page_decoder()
        self.gate = threading.Event()
        self.calls = 0

    def decode(self, data, pgno, context=None):
        self.calls += 1
        assert self.gate.wait(30)
        return self.inner.decode(data, pgno, context)


def _page(seq: int) -> PageCapture:
    after = bytearray(4096)
    after[0] = 0x0D  # a table leaf, no cells
    return PageCapture(ts=float(seq), seq=seq, symbol="sqlcipher_page_cipher", direction="decrypt", pgno=2,
                       before=bytes(range(256)) * 16, after=bytes(after))


def _presenter(qtbot):
    view, tasks, problems = PageView(), TaskRunner(), []
    qtbot.addWidget(view)
    decoder = GatedDecoder()
    return CapturePresenter(tasks, view, lambda: decoder, problems.append), view, decoder, problems


def test_the_event_loop_runs_while_a_capture_decodes_and_the_page_shows_when_ready(qtbot):
    presenter, view, decoder, _ = _presenter(qtbot)
    ticks = []
    timer = QTimer()
    timer.timeout.connect(lambda: ticks.append(1))
    timer.start(10)
    cap = _page(1)
    presenter.show(cap)  # returns at once, though the decoder is blocked
    qtbot.waitUntil(lambda: len(ticks) >= 5, timeout=3000)  # the GUI thread is free meanwhile
    assert presenter.shown is None and not presenter.settled and not view.after_view.data()
    decoder.gate.set()
    qtbot.waitUntil(lambda: presenter.shown is cap, timeout=5000)
    assert view.after_view.data() == cap.after and "capture #1" in view._header.text()
    timer.stop()


def test_the_latest_selection_wins_and_what_follows_it_lands_on_it(qtbot):
    presenter, view, decoder, _ = _presenter(qtbot)
    first, second = _page(1), _page(2)
    presenter.show(first)
    presenter.when_shown(lambda: view.after_view.set_selection(0, 4))  # meant for the first: dropped
    presenter.show(second)
    presenter.when_shown(lambda: view.after_view.set_selection(16, 32))
    decoder.gate.set()
    qtbot.waitUntil(lambda: presenter.shown is second, timeout=5000)
    qtbot.wait(50)  # the first one's result, if it came later, must not replace it
    assert presenter.shown is second and "capture #2" in view._header.text()
    assert view.after_view.selection() == (16, 32)


def test_a_decoder_that_fails_is_one_line_and_the_bytes_still_show(qtbot):
    presenter, view, decoder, problems = _presenter(qtbot)
    decoder.inner = None  # decode() now raises AttributeError after the gate
    decoder.gate.set()
    cap = _page(7)
    presenter.show(cap)
    qtbot.waitUntil(lambda: presenter.shown is cap, timeout=5000)
    assert problems == ["capture #7 not decoded: AttributeError: 'NoneType' object has no attribute 'decode'"]
    assert view.after_view.data() == cap.after


def test_prepare_capture_decodes_both_sides_and_names_the_page():
    decoder = GatedDecoder()
    decoder.gate.set()
    shown = prepare_capture(decoder, _page(3))
    assert shown.title.startswith("page 2 · decrypt · sqlcipher_page_cipher · capture #3")
    assert shown.decoded_after is not None and shown.diff is not None and len(shown.diff) == 4096
    assert decoder.calls == 2
    # the structure tree's rows are built here too (off the GUI thread), ready to attach
    assert shown.rows is not None and shown.rows.top and shown.rows.after_items
