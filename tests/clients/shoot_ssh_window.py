"""Screenshot the real window connected ``--ssh`` to the test sshd's ``ops`` account, capturing a SQLCipher app.

``python shoot_ssh_window.py OUT.png`` as root (the sshd fixture creates accounts), DISPLAY set to an Xvfb of
the size wanted: starts tests/ssh_fixture.py's sshd and a sqlcipher3 app (tests/clients/sqlcipher_app.py),
opens the window as ``tdescope gui --ssh ops --ssh-config CONFIG --pid PID`` does, presses Watch, waits for
captures and a perf window from the host, shows the first capture and the Engine dock (the host's
facts) and grabs the screen. Everything it
started is stopped on the way out. Used to take ``docs/screenshots/gui-ssh-*.png``.
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the fixtures

from PySide6.QtCore import QTimer  # noqa: E402

from conftest import AppProcess  # noqa: E402
from clients.shoot_window import fresh_window  # noqa: E402
from ssh_fixture import start_sshd  # noqa: E402
from tdescope.app.events import HotspotWindow  # noqa: E402
from tdescope.ui.window.remote_host import host_params  # noqa: E402


def main() -> int:
    out = Path(sys.argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    server = start_sshd()
    target = AppProcess(Path(tempfile.mkdtemp()) / "app.db", 10**9)
    try:
        target.go()
        app, win = fresh_window("sqlcipher")
        hot: list = []
        win.live.subscribe(lambda ev: hot.append(1) if isinstance(ev, HotspotWindow) and ev.stacks else None)
        win.connect_engine(host_params("ops", ("-F", str(server.config)), target.pid))
        steps = [
            (lambda: win.session is not None and win.workload_dock.watch_button.isEnabled(),
             lambda: (win.workload_dock.max_captures.setValue(2000), win.workload_dock.watch_button.click())),
            (lambda: win.captures_dock.model.rowCount() >= 40 and len(hot) >= 3,
             lambda: (win.captures_dock.view.selectRow(0), win.engine_dock.raise_(), win.move(0, 0))),
            (lambda: win.capture_presenter.settled, lambda: None),
            (lambda: True, lambda: app.primaryScreen().grabWindow(0).save(str(out))),
        ]

        def step() -> None:
            if steps and steps[0][0]():
                steps.pop(0)[1]()
            if not steps:
                win.close()
                app.quit()

        timer = QTimer()
        timer.timeout.connect(step)
        timer.start(500)
        QTimer.singleShot(180000, app.quit)  # never hang
        app.exec()
        return 0 if not steps else 1
    finally:
        target.kill()
        server.stop()


if __name__ == "__main__":
    sys.exit(main())
