"""The probe's state in the status bar: ARMED / PAUSED / not armed, and how long the target was stopped."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QStatusBar

from tdescope.app.events import CaptureWindowState
from tdescope.app.probe.window import CaptureLimits

__all__ = ["ProbeStatus"]


class ProbeStatus:
    """Two permanent labels of ``bar``: the stopped-time line, then the armed badge."""

    def __init__(self, bar: QStatusBar) -> None:
        self.armed_label = QLabel("")
        self.stopped_label = QLabel("")
        bar.addPermanentWidget(self.stopped_label)
        bar.addPermanentWidget(self.armed_label)
        self.set_armed(False)

    def show_state(self, ev: CaptureWindowState, limits: CaptureLimits | None) -> None:
        """Show what the capture window reports; ``limits`` of the running experiment, if any."""
        self.set_armed(ev.state == "armed", ev.message, paused=ev.state == "paused")
        budget = f" (budget {limits.max_busy_fraction:.0%} of wall time)" if limits else ""
        if ev.state == "armed":
            # live while armed: the window sends its stopped time every half second
            self.stopped_label.setText(
                f"armed: {ev.captures} pages, target stopped {ev.stopped_s * 1000:.1f} ms{budget}"
            )
        elif ev.state == "paused":
            rearm = ev.message.rsplit(", ", 1)[-1]
            self.stopped_label.setText(
                f"stop budget spent: {ev.captures} pages, target stopped {ev.stopped_s * 1000:.1f} ms{budget}; "
                f"{rearm}"
            )
        else:
            self.stopped_label.setText(
                f"probe window closed ({ev.message}): {ev.captures} pages, "
                f"target stopped {ev.stopped_s * 1000:.1f} ms in total"
            )

    def set_armed(self, armed: bool, message: str = "", paused: bool = False) -> None:
        """The badge: PAUSED (orange), ARMED (red) or not armed (gray)."""
        if paused:
            self.armed_label.setText("  PAUSED  ")
            self.armed_label.setToolTip(f"The probe spent its stop budget and is out of the target: {message}")
            self.armed_label.setStyleSheet("background: #e67e22; color: white; font-weight: bold; border-radius: 3px;")
        elif armed:
            self.armed_label.setText("  ARMED  ")
            self.armed_label.setToolTip(f"Breakpoints sit in the target: {message}")
            self.armed_label.setStyleSheet("background: #c0392b; color: white; font-weight: bold; border-radius: 3px;")
        else:
            self.armed_label.setText("  not armed  ")
            self.armed_label.setToolTip("No breakpoint in the target")
            self.armed_label.setStyleSheet("color: gray;")
