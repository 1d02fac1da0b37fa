"""Drive the real window on an X server: run the lab's workload with capture, then screenshot it normal and
in presentation mode (F5), and write the geometry seen at each step to a JSON file.

``python shoot_window.py OUT_DIR SUFFIX [ROUNDS]`` (DISPLAY set, an Xvfb of the size wanted): writes
``OUT_DIR/main-SUFFIX.png``, ``OUT_DIR/present-SUFFIX.png`` (F5, the pages view),
``OUT_DIR/present-results-SUFFIX.png`` (F6, the results view) and ``OUT_DIR/geometry-SUFFIX.json``.
``ROUNDS`` timed A/B rounds (default 0: one run). Used by the Xvfb test and to retake ``docs/screenshots/``.
"""

import json
import sys
from pathlib import Path

from PySide6.QtCore import QRect, QTimer
from PySide6.QtWidgets import QApplication, QDockWidget

from tdescope.app.engines import ConnectParams, discover_engines
from tdescope.ui.window.main_window import MainWindow


def _rect(r: QRect) -> list[int]:
    return [r.x(), r.y(), r.width(), r.height()]


def fresh_window(engine: str) -> tuple[QApplication, MainWindow]:
    """The application and a shown window on ``engine`` with the default layout for this screen (a saved one
    would make every picture depend on the last run)."""
    app = QApplication(sys.argv[:1])
    app.setApplicationName("tdescope-shoot")
    win = MainWindow(discover_engines()[0][engine])
    win.settings.remove("layout")
    win._default_layout()
    win.show()
    return app, win


def main() -> int:
    out, suffix = Path(sys.argv[1]), sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    out.mkdir(parents=True, exist_ok=True)
    app, win = fresh_window("sqlcipher")
    win.connect_engine(ConnectParams(lab=True))
    seen: dict = {}
    steps = []

    def grab(name: str) -> None:
        app.primaryScreen().grabWindow(0).save(str(out / f"{name}-{suffix}.png"))

    def state(tag: str) -> None:
        hexv = win.page_view.after_view
        seen[tag] = {
            "frame": _rect(win.frameGeometry()), "geometry": _rect(win.geometry()),
            "screen": _rect(win.screen().geometry()),
            "docks": {d.objectName(): _rect(d.geometry()) for d in win.findChildren(QDockWidget) if d.isVisible()},
            "hex_px": hexv.fontInfo().pixelSize(), "hex_font_px": hexv.font().pixelSize(),
            "statusbar": _rect(win.statusBar().geometry()),
            "ascii_whole": [v.ascii_rect(15).right() <= v.viewport().width() and v.content_width() <= v.width() + 1
                            for v in (win.page_view.before_view, win.page_view.after_view)],
        }

    def step() -> None:
        if not steps:
            return
        cond, action = steps[0]
        if cond():
            steps.pop(0)
            action()
        if not steps:
            (out / f"geometry-{suffix}.json").write_text(json.dumps(seen, indent=1))
            win.close()
            app.quit()

    def run() -> None:
        win.workload_dock.rounds.setValue(rounds)
        win.workload_dock.run_button.click()

    def select() -> None:
        win.captures_dock.view.selectRow(0)

    waited = {"n": 0}

    def settle(n: int = 8):
        def cond() -> bool:
            waited["n"] += 1
            if waited["n"] >= n:
                waited["n"] = 0
                return True
            return False
        return cond

    steps[:] = [
        (lambda: win.session is not None and win.workload_dock.run_button.isEnabled(), run),
        (lambda: win.experiment is not None and win.experiment.done.is_set()
         and win.captures_dock.model.rowCount() > 0 and win.workload_dock.run_button.isEnabled(), select),
        (lambda: win.capture_presenter.settled and settle()(), lambda: (state("normal"), grab("main"),
                                                                        win.presentation.enter())),
        (settle(), lambda: (state("present"), grab("present"), win.presentation.next_view())),
        (settle(), lambda: (grab("present-results"), win.presentation.leave())),
        (settle(), lambda: state("after")),
    ]
    timer = QTimer()
    timer.timeout.connect(step)
    timer.start(250)
    return app.exec()


if __name__ == "__main__":
    sys.exit(main())
