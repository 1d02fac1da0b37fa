"""Run ``tdescope gui`` and write what its window shows to a JSON file every 200 ms (for the Xvfb test).

``python gui_state.py STATE.json``: the state is the window title, whether the engine is connected and
Run enabled, the visible docks' titles, the visible labels' plain text, and the captures table's row
count, read from the widgets themselves. The file is replaced atomically, so a reader never sees half.
"""

import json
import os
import re
import sys

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication, QDockWidget, QLabel

from tdescope.ui.app import run_gui


def _state() -> dict:
    windows = [w for w in QApplication.topLevelWidgets() if hasattr(w, "captures_dock") and w.isVisible()]
    if not windows:
        return {"window": False}
    w = windows[0]
    labels = [re.sub(r"<[^>]+>", "", lab.text()).strip() for lab in w.findChildren(QLabel) if lab.isVisible()]
    return {
        "window": True,
        "title": w.windowTitle(),
        "connected": w.session is not None,
        "run_enabled": w.workload_dock.run_button.isEnabled(),
        "docks": sorted(d.windowTitle() for d in w.findChildren(QDockWidget) if d.isVisible()),
        "labels": [t for t in labels if t],
        "captures": w.captures_dock.model.rowCount(),
        "captures_table_visible": w.captures_dock.view.isVisible(),
    }


def main() -> int:
    path = sys.argv[1]
    app = QApplication.instance() or QApplication(sys.argv[:1])

    def write() -> None:
        with open(path + ".tmp", "w") as fh:
            json.dump(_state(), fh)
        os.replace(path + ".tmp", path)

    timer = QTimer()
    timer.timeout.connect(write)
    timer.start(200)
    app.setProperty("gui_state_timer", timer)  # kept alive by the application
    return run_gui()


if __name__ == "__main__":
    sys.exit(main())
