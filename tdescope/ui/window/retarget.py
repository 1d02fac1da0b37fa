"""Choosing another probe target (a backend, a server process) in the window.

Listing the targets and choosing one are database calls: both run on the task runner.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtWidgets import QMainWindow, QMessageBox, QWidget

from tdescope.app.engines.api import EngineSession
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.events import Marker
from tdescope.ui.gui_thread.tasks import TaskRunner, describe

__all__ = ["follow_target", "pick_target"]


def follow_target(window, session: EngineSession, allow_critical: bool) -> None:
    """The window probes ``session``'s new target: say it, mark it in the recording, and let the samplers
    and the Engine dock's "probe target" row follow it."""
    pid, window.allow_critical = session.server_pid(), allow_critical
    window.statusBar().showMessage(f"Probe target is now pid {pid}", 5000)
    window.live.publish(Marker(time.time(), f"probe target: pid {pid}", "target", {"pid": pid}))
    window.observation.observe(session)  # hotspots, OS and engine waits follow the new process
    window.tasks.run(lambda _state: session.inventory(), name="inventory",
                     on_done=lambda inv: window.engine_dock.show_inventory(window.label, inv, pid))


def pick_target(parent: QWidget, session: EngineSession | None, tasks: TaskRunner,
                done: Callable[[EngineSession, bool], None]) -> None:
    """List ``session``'s targets, let the user choose one, switch to it; ``done(session, allow_critical)``
    follows on the GUI thread once the session probes the new target."""
    if not has_ability(session, Ability.CHOOSE_TARGET):
        return

    def show(message: str) -> None:
        if isinstance(parent, QMainWindow):
            parent.statusBar().showMessage(message, 10000)

    def choose(choices) -> None:
        from tdescope.ui.dialogs.target import TargetDialog

        dialog = TargetDialog(choices, session.server_pid(), parent)
        if not dialog.exec() or dialog.chosen() is None:
            return
        pid, allow_critical = dialog.chosen(), dialog.allow_critical.isChecked()
        tasks.run(lambda _state: session.choose_target(pid, allow_critical), name="choose-target",
                  on_done=lambda _none: done(session, allow_critical),
                  on_exception=lambda exc: QMessageBox.warning(parent, "tdescope — probe target", describe(exc)))

    tasks.run(lambda _state: session.targets(), name="targets", on_done=choose,
              on_exception=lambda exc: show(describe(exc)))
