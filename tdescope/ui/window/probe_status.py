"""The probe's state in the status bar: ARMED · backend / PAUSED / not armed, and what it cost the target."""

from __future__ import annotations

from PySide6.QtWidgets import QLabel, QStatusBar

from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, WindowState
from tdescope.app.probe.selection import ProbeOptions, choose_backend
from tdescope.app.probe.window import CaptureLimits

__all__ = ["ProbeStatus", "probe_backend_for"]


def probe_backend_for(choice: str, recipe, show) -> object | None:
    """The backend the workload dock's choice gives for ``recipe``; ``show(line)`` tells the user when
    auto fell back to gdb, or why the choice cannot run (then None: nothing is started)."""
    try:
        backend, note = choose_backend(ProbeOptions(choice), recipe)
    except UserError as exc:
        show(str(exc))
        return None
    if note:
        show(note)
    return backend


class ProbeStatus:
    """Two permanent labels of ``bar``: the stopped-time line, then the armed badge."""

    def __init__(self, bar: QStatusBar) -> None:
        self.armed_label = QLabel("")
        self.stopped_label = QLabel("")
        # a long line is cut, never widens the window past its screen (the whole line is its tooltip)
        self.stopped_label.setMinimumWidth(1)
        self.recorded = False  # a replay: states are what was recorded; nothing is in any process now
        bar.addPermanentWidget(self.stopped_label)
        bar.addPermanentWidget(self.armed_label)
        self.set_armed(False)

    def show_state(self, ev: CaptureWindowState, limits: CaptureLimits | None) -> None:
        """Show what the capture window reports; ``limits`` of the running experiment, if any."""
        self.set_armed(ev.state is WindowState.ARMED, ev.message, paused=ev.state is WindowState.PAUSED, backend=ev.backend)
        budget = f" (budget {limits.stops.max_busy_fraction:.0%} of wall time)" if limits else ""
        self.stopped_label.setStyleSheet("")
        if ev.backend == "ebpf":
            # nothing stops: a rate, the ring's losses, and what the probes added to the target's calls
            live = "armed" if ev.state is WindowState.ARMED else f"probe window closed ({ev.message})"
            shown = f" ({ev.captures - ev.unsent} shown)" if ev.unsent else ""
            self.stopped_label.setText(f"{live}: {ev.captures} pages{shown} of {ev.hits} hits, lost {ev.lost}, "
                                       f"probes added {ev.stopped_s * 1000:.1f} ms")
            self.stopped_label.setToolTip("A storm is kept as a sample: the probe copies every page, the window "
                                          "keeps a few hundred a second (so does record) and counts the rest" if ev.unsent else "")
            if ev.lost:
                self.stopped_label.setStyleSheet("color: #c0392b; font-weight: bold;")
        elif ev.state is WindowState.ARMED:
            # live while armed: the window sends its stopped time every half second
            kept = f" ({ev.captures - ev.unsent} kept)" if ev.unsent else ""
            self.stopped_label.setText(
                f"armed: {ev.captures} pages{kept}, target stopped {ev.stopped_s * 1000:.1f} ms{budget}"
            )
        elif ev.state is WindowState.PAUSED:
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

    def set_armed(self, armed: bool, message: str = "", paused: bool = False, backend: str = "") -> None:
        """The badge: PAUSED (orange), ARMED · backend (red) or not armed (gray); in a replay,
        REPLAY with what was recorded (blue-gray): nothing is armed anywhere."""
        if self.recorded:
            name = {"ebpf": "eBPF", "gdb": "gdb"}.get(backend, backend)
            was = "was paused" if paused else (f"was armed · {name}" if armed else "not armed then")
            self.armed_label.setText(f"  REPLAY · {was}  ")
            self.armed_label.setToolTip("A recorded session: no probe is in any process. The badge says what "
                                        "the probe was doing at this point of the recording.")
            self.armed_label.setStyleSheet("background: #5d6d7e; color: white; border-radius: 3px;")
            return
        if paused:
            self.armed_label.setText("  PAUSED  ")
            self.armed_label.setToolTip(f"The probe spent its stop budget and is out of the target: {message}")
            self.armed_label.setStyleSheet("background: #e67e22; color: white; font-weight: bold; border-radius: 3px;")
        elif armed:
            name = {"ebpf": "eBPF", "gdb": "gdb"}.get(backend, backend)
            self.armed_label.setText(f"  ARMED · {name}  " if name else "  ARMED  ")
            self.armed_label.setToolTip(f"eBPF uprobes sit in the target (it never stops): {message}"
                                        if backend == "ebpf" else f"Breakpoints sit in the target: {message}")
            self.armed_label.setStyleSheet("background: #c0392b; color: white; font-weight: bold; border-radius: 3px;")
        else:
            self.armed_label.setText("  not armed  ")
            self.armed_label.setToolTip("No breakpoint in the target")
            self.armed_label.setStyleSheet("color: gray;")
