"""``tdescope gui --ssh DEST --dsn DSN``: the window on a PostgreSQL that only the ssh connection reaches.

The database host is test_ssh_dsn's network namespace (PostgreSQL 15 on its own loopback, its own sshd,
alias ``dbhost``). The window's engine session connects through a forward in the ssh connection, the
probe target is a backend there (checked in the host's process table), the capture window, perf and
the OS waits run in the agent, the engine's waits come through the forwarded connection.
"""

from __future__ import annotations

import os
import signal

import pytest

from pgcluster import PASSWORD, PASSWORD_ROLE
from test_ssh_dsn import busy_backend, db_host  # noqa: F401 - the module's fixtures
from tdescope.app.events import PageCapture, WaitSample

pytestmark = pytest.mark.usefixtures("sshd")


def _window(qtbot, qsettings, sshd, dsn: str, pid: int | None = None, password=None):
    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow
    from tdescope.ui.window.remote_host import host_params

    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.show()
    win.connect_engine(host_params("dbhost", ("-F", str(sshd.config)), pid, dsn=dsn, password=password))
    return win


def test_gui_over_ssh_with_a_dsn_watches_a_backend_on_the_host(qtbot, qsettings, sshd, db_host, busy_backend):
    from tdescope.app.remote.host_engine import HostEngineSession

    _, cluster = db_host
    win = _window(qtbot, qsettings, sshd, cluster.tcp_dsn(), busy_backend)
    events: list = []
    win.live.subscribe(events.append)
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=90000)
        assert isinstance(win.session, HostEngineSession) and win.session.server_pid() == busy_backend
        assert win.windowTitle() == "tdescope — PostgreSQL — dbhost via ssh"
        assert win.engine_dock.title.text() == "<b>PostgreSQL on dbhost via ssh</b>"
        assert win.session.workloads()  # the engine's workloads, run through the forwarded connection
        assert any(t.pid == busy_backend for t in win.session.targets())  # pg_stat_activity's, not ps
        dock = win.workload_dock
        dock.recipe.setCurrentIndex(dock.recipe.findData("postgres.pgp-decrypt"))
        dock.max_captures.setValue(3)
        dock.watch_button.click()
        qtbot.waitUntil(lambda: win.experiment is not None and win.experiment.done.is_set(), timeout=90000)
        caps = [e for e in events if isinstance(e, PageCapture)]
        assert len(caps) == 3 and {c.symbol for c in caps} == {"pgp_cfb_decrypt"}, win.experiment.error
        # (qtbot.waitUntil, not wait_for: the samplers start from the GUI thread's event loop)
        qtbot.waitUntil(lambda: any(isinstance(e, WaitSample) and e.source == "postgres" and e.pid == busy_backend
                                    for e in events), timeout=60000)  # the engine's, through the forward
        qtbot.waitUntil(lambda: any(isinstance(e, WaitSample) and e.source == "os" for e in events),
                        timeout=60000)  # the OS's, from the agent
        assert "engine waits:" in win.observation.waits_dock.engine_poll.text()

        # the ssh client killed: "connection lost"; Reconnect opens both again (a new ssh connection and agent,
        # a new engine session through it) on the same target
        old, old_agent = win.session, win.session.agent.welcome["pid"]
        os.kill(old.agent.client.pid, signal.SIGKILL)
        qtbot.waitUntil(lambda: "connection lost" in win.remote.label.text(), timeout=30000)
        win.remote.reconnect_button.click()
        qtbot.waitUntil(lambda: win.session is not None and win.session is not old, timeout=90000)
        assert win.session.agent.welcome["pid"] != old_agent and not old.alive()
        assert win.session.server_pid() == busy_backend and win.session.db is not old.db
        assert old.db.conn.closed and win.windowTitle().endswith("dbhost via ssh")
    finally:
        win.shutdown()


def test_connect_to_host_with_a_dsn_asks_the_password_in_the_window(qtbot, qsettings, sshd, db_host, monkeypatch):
    """File → Connect to host… with a DSN: the window's password dialog asks (a wrong one is one line), a
    password written in the DSN is refused before anything connects."""
    from PySide6.QtWidgets import QInputDialog

    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow

    _, cluster = db_host
    dsn = cluster.tcp_dsn().replace(f"user={cluster.superuser}", f"user={PASSWORD_ROLE}")
    answers = ["not-it", PASSWORD]
    asked: list[str] = []

    def get_text(_parent, _title, message, *_args, **_kwargs):
        asked.append(message)
        return answers[len(asked) - 1], True

    monkeypatch.setattr(QInputDialog, "getText", staticmethod(get_text))
    win = MainWindow(discover_engines()[0]["postgres"], qsettings)
    qtbot.addWidget(win)
    win.show()
    config = ("-F", str(sshd.config))
    try:
        win.remote.connect_to("dbhost", config, None, dsn + " password=x")
        assert win.statusBar().currentMessage().startswith("put no password in --dsn") and not asked
        win.remote.connect_to("dbhost", config, None, dsn)
        qtbot.waitUntil(lambda: "password" in win.workload_dock.status.text(), timeout=90000)
        line = win.workload_dock.status.text()
        assert line.startswith(f"wrong password for {PASSWORD_ROLE}@") and "\n" not in line, line
        assert len(asked) == 1 and win.session is None and win.remote.progress is None
        win.remote.connect_to("dbhost", config, None, dsn)
        qtbot.waitUntil(lambda: win.session is not None, timeout=90000)  # the right one, through the forward
        assert len(asked) == 2 and win.windowTitle() == "tdescope — PostgreSQL — dbhost via ssh"
        assert win.session.db.own_pid == win.session.server_pid()
    finally:
        win.shutdown()


def test_gui_over_ssh_with_a_mariadb_dsn_runs_a_workload_through_the_forward(qtbot, qsettings, sshd):
    """MariaDB: the lab's server socket forwarded over ssh (as test_ssh_dsn's), its ``mariadbd`` found on the
    host; the window runs a workload through the forward and captures in the server there."""
    from tdescope.app.engines import discover_engines
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.remote.host_engine import HostEngineSession
    from tdescope.ui.window.main_window import MainWindow
    from tdescope.ui.window.remote_host import host_params

    engine = discover_engines()[0]["mariadb"]
    lab = engine.connect(ConnectParams(lab=True))
    win = MainWindow(engine, qsettings)
    qtbot.addWidget(win)
    win.show()
    try:
        lab.lab.dir.chmod(0o711)  # the ssh account reaches the socket in it
        win.connect_engine(host_params("ops", ("-F", str(sshd.config)), dsn=f"socket={lab.lab.socket} user=root"))
        qtbot.waitUntil(lambda: win.session is not None, timeout=120000)
        assert isinstance(win.session, HostEngineSession) and win.session.server_pid() == lab.server_pid()
        assert win.windowTitle().startswith("tdescope — MariaDB") and win.windowTitle().endswith("ops via ssh")
        dock = win.workload_dock
        assert dock.combo.findData("io_path") >= 0  # the engine session's workloads
        dock.combo.setCurrentIndex(dock.combo.findData("io_path"))
        dock.max_captures.setValue(3)
        dock.run_button.click()
        qtbot.waitUntil(lambda: win.experiment is not None and win.experiment.done.is_set(), timeout=180000)
        assert win.captures_dock.model.rowCount() == 3, win.experiment.error
    finally:
        win.shutdown()
        lab.close()
