"""Start the GUI: the QApplication and the main window on an engine lab."""

from __future__ import annotations

import gc
import os
import signal
import sys

from tdescope.app.engines import ConnectParams, discover_engines
from tdescope.app.errors import UserError
from tdescope.app.system.runtime_tools import XVFB
from tdescope.ui.gui_thread.gc_policy import collect_on_gui_thread

__all__ = ["run_gui"]


def _require_display() -> None:
    """One clear line instead of Qt's abort when there is no screen (a database server)."""
    if os.environ.get("QT_QPA_PLATFORM") or os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return
    xvfb = "`xvfb-run`" + ("" if XVFB.present() else f" ({XVFB.how()})")
    raise UserError(f"no display (DISPLAY is not set): run it under {xvfb}, over `ssh -X`, or use the "
                    "headless commands: tdescope capture | top | waits | record | report")


def _run_replay(path: str) -> int:
    """Open the workbench on a recorded session: no database, no process."""
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from tdescope.app.session.file import is_encrypted
    from tdescope.app.session.reader import SessionReader
    from tdescope.ui.dialogs.passphrase import ask_passphrase
    from tdescope.ui.window.main_window import open_replay_window

    if not is_encrypted(path):
        SessionReader(path, writable=False).close()  # a bad file fails here, as one line, before any window
    sys.setswitchinterval(0.001)  # the replay's feeder thread shares the GIL: keep the event loop's waits short
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("tdescope")
    app.setDesktopFileName("org.tdescope.tdescope")  # the menu entry's icon and name (tdescope desktop-install)
    app.setOrganizationName("tdescope")
    collector = collect_on_gui_thread()  # noqa: F841 - lives as long as the loop
    passphrase = ask_passphrase(None, path)  # the dialog needs the QApplication
    window = open_replay_window(path, passphrase=passphrase)
    window.show()
    signal.signal(signal.SIGINT, lambda *_: window.close())
    heartbeat = QTimer()
    heartbeat.start(200)
    heartbeat.timeout.connect(lambda: None)
    return app.exec()


def run_gui(lab: str = "sqlcipher", session_file: str | None = None, engine: str | None = None,
            dsn: str = "", encrypt: bool = False, backend: str = "auto",
            host: tuple[str, tuple[str, ...], int | None, bool] | None = None) -> int:
    """Open the workbench on the ``lab`` engine, or on ``engine`` at ``dsn``; returns the exit status.

    ``encrypt`` asks a passphrase before anything is recorded, so no plain autosave is ever written.
    ``backend`` is the Workload dock's first probe backend choice (``auto``, ``ebpf``, ``gdb``).
    ``host``: ``(dest, ssh words, pid, prompts allowed)``: watch a process on that ssh host through the agent
    (``--ssh``; ``--ssh-prompt`` lets ssh ask on the terminal the window was started from); with ``dsn``, the
    ``engine``'s server there, connected through the ssh connection (its password asked in the window).
    """
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from tdescope.ui.window.main_window import MainWindow

    _require_display()
    if session_file is not None:
        return _run_replay(session_file)
    engines, errors = discover_engines()
    if engine is not None:
        lab = engine
    if lab not in engines:
        why = next((e.message for e in errors if e.name == lab), f"no engine called {lab!r}")
        raise UserError(why)
    if host is not None and dsn:
        from tdescope.app.remote.host_engine import refuse_not_through

        refuse_not_through(engines[lab])  # before a window opens
    # Worker threads (capture windows, samplers) share the GIL with the GUI thread:
    # a shorter switch interval keeps the event loop's waits short under a storm.
    sys.setswitchinterval(0.001)
    app = QApplication.instance() or QApplication(sys.argv[:1])
    app.setApplicationName("tdescope")
    app.setDesktopFileName("org.tdescope.tdescope")  # the menu entry's icon and name (tdescope desktop-install)
    app.setOrganizationName("tdescope")
    collector = collect_on_gui_thread()  # noqa: F841 - lives as long as the loop
    window = MainWindow(engines[lab])
    window.workload_dock.backend.setCurrentIndex(max(0, window.workload_dock.backend.findData(backend)))
    window.show()
    if encrypt and not window.recording.encrypt_recording():
        window.shutdown()
        raise UserError("no passphrase given: not starting (--encrypt records nothing in the clear)")
    # The modules and widgets built so far live as long as the window: freezing them
    # keeps the cyclic GC's full passes (tens of ms, on whichever thread allocates,
    # holding the GIL) from walking them again and again during a capture storm.
    gc.freeze()
    from tdescope.ui.docks.plugin_docks import PasswordPrompt

    if host is not None:
        from tdescope.ui.window.remote_host import host_params

        window.connect_engine(host_params(*host, dsn=dsn, password=PasswordPrompt(window) if dsn else None))
    elif engine is None:
        window.connect_engine(ConnectParams(lab=True))
    else:
        window.connect_engine(ConnectParams(dsn=dsn, prompt=PasswordPrompt(window)))
    # Ctrl+C in the terminal closes the window cleanly (disarm, detach) instead of killing us.
    signal.signal(signal.SIGINT, lambda *_: window.close())
    heartbeat = QTimer()
    heartbeat.start(200)  # lets Python see the signal while Qt's loop runs
    heartbeat.timeout.connect(lambda: None)
    for err in errors:
        window.statusBar().showMessage(f"plugin {err.name} not loaded: {err.message}", 15000)
    return app.exec()
