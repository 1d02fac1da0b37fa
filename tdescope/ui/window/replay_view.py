"""What the window shows in and out of replay: titles, the docks' texts, the gates, the play head.

:class:`ReplayView` connects to the window's :class:`~tdescope.ui.window.replay.ReplayController`
and keeps every state's text true: the REPLAY title and badge, the empty Captures dock and page
view (live with "Capture pages" ticked or not, or a replay), Run lesson only for a live, idle,
connected window, and the timeline's play head after the replayed events reached the views.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QObject

from tdescope.app.engines.api import Inventory
from tdescope.app.session.meta import SessionMeta
from tdescope.ui.window.recording import RecordingMode

__all__ = ["ReplayView"]


class ReplayView(QObject):
    """The window's side of replay. ``window`` is the :class:`~tdescope.ui.window.main_window.MainWindow`."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self._head: float | None = None  # the play head the timeline shows once the pump is idle
        self._head_waits = False  # a when_idle call for it is pending
        window.replay.entered.connect(self.entered)
        window.replay.headMoved.connect(self.head_moved)
        window.replay.left.connect(self.left)
        window.workload_dock.capture.toggled.connect(self.update_empty_texts)

    def entered(self, path: str, meta: SessionMeta) -> None:
        """A recorded session opened: nothing runs, nothing is armed, and the window says so."""
        win = self.window
        win.recording.mode = RecordingMode.IDLE  # a replay records nothing
        win.probe_status.recorded = True  # a replayed ARMED is history, not a probe in a process
        win.probe_status.set_armed(False)
        win.setWindowTitle(f"REPLAY — {Path(path).name} — tdescope")
        win.workload_dock.set_workloads([], [])
        win.workload_dock.run_button.setEnabled(False)
        win.workload_dock.status.setText("Replay of a recorded session: nothing runs, nothing is armed.")
        win.lessons.update_gate()
        self.update_empty_texts()
        win.engine_dock.show_inventory(f"{meta.engine_label or meta.engine} (recorded on {meta.host})",
                                       Inventory(meta.engine, meta.inventory), meta.params.get("target_pid"))

    def left(self) -> None:
        """Back to a live (or idle) window."""
        self.window.setWindowTitle(f"tdescope — {self.window.engine.label}")
        self.window.lessons.update_gate()
        self.update_empty_texts()

    def head_moved(self, ts: float | None) -> None:
        """The replay moved (play, slider, a note): the timeline's play head follows at once, and again once the
        events queued up to it reached the views (the timeline's origin may come with them). Draining the pump
        here instead made one of its ticks two."""
        self.window.observation.timeline_dock.show_play_head(ts)
        self._head = ts
        if not self._head_waits:
            self._head_waits = True
            self.window.pump.when_idle(self._head_after_events)

    def _head_after_events(self) -> None:
        self._head_waits = False
        self.window.observation.timeline_dock.show_play_head(self._head)

    def update_empty_texts(self) -> None:
        """What the empty Captures dock and page view say: true for a replay, and for the box's state."""
        win = self.window
        replay = win.replay.replaying
        win.captures_dock.set_empty_state(
            "replay" if replay else "live" if win.workload_dock.capture.isChecked() else "unticked")
        win.page_view.placeholder = "replay" if replay else "live"
        if not win.page_view.before_view.data():
            win.page_view.clear()
