"""Closing a window and reconnecting do not wait on the GUI thread for a run to disarm (issue #25, item 5).

The experiment here is a stand-in that takes its time to end, gated by the test: what is under test is
where the window waits for it (the lab session is the real one and is closed for real).
"""

import threading

from conftest import wait_for


class SlowToEnd:
    """A running experiment that ends when :attr:`gate` is set; notes the threads that waited for it."""

    def __init__(self):
        self.done, self.gate = threading.Event(), threading.Event()
        self.cancelled = False
        self.waited_on: list[threading.Thread] = []

    def cancel(self):
        self.cancelled = True

    def wait(self, timeout=None):
        self.waited_on.append(threading.current_thread())
        if self.gate.wait(timeout):
            self.done.set()
        return self.done.is_set()


def test_a_closing_window_goes_at_once_and_the_session_closes_once_the_run_has_disarmed(qtbot, lab_window):
    win, exp = lab_window, SlowToEnd()
    lab = win.session
    win.experiment = exp
    win.close()  # returns while the run is still disarming
    closing = next(t for t in threading.enumerate() if t.name == "close-down")
    assert exp.cancelled and not win.isVisible() and closing.is_alive() and not closing.daemon
    assert lab._proc.poll() is None  # the session is closed after the run ended, not before
    exp.gate.set()
    closing.join(30)
    assert exp.waited_on and threading.main_thread() not in exp.waited_on
    assert lab._proc.poll() is not None  # the lab is gone


def test_reconnect_waits_for_the_run_off_the_gui_thread_then_connects(qtbot, lab_window):
    win, exp = lab_window, SlowToEnd()
    old = win.session
    win.experiment = exp
    win.reconnect()
    assert win.session is None
    wait_for(lambda: exp.cancelled and exp.waited_on, what="the run cancelled and waited for, on a worker")
    assert threading.main_thread() not in exp.waited_on
    qtbot.wait(50)  # the event loop runs meanwhile; no new connection before the run ended
    assert win.session is None and old._proc.poll() is None
    exp.gate.set()
    win.experiment = None
    qtbot.waitUntil(lambda: win.session is not None, timeout=30000)
    assert win.session is not old
    wait_for(lambda: old._proc.poll() is not None, 30, what="the old lab closed")
