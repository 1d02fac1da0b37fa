"""The remote host in the window: ``File → Connect to host…``, the host in the status bar, Reconnect.

When the window's session is a process on an ssh host
(:class:`~tdescope.app.remote.host_session.HostSession`), :class:`RemoteHost` says so in the title
and in a permanent status bar label (``db1 via ssh``). A lost connection turns that label red
("connection lost") and shows **Reconnect** there (also File → Reconnect to host): it connects to
the same host again and, when a capture was running, re-arms the same target with the same recipe.
Connecting runs on the task runner with a progress dialog whose Cancel drops the attempt (what it
opened is closed); each failure is one line. The recent hosts are kept in the settings.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable

from PySide6.QtCore import QObject, QSettings, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFormLayout,
    QLabel,
    QLineEdit,
    QMainWindow,
    QMenu,
    QProgressDialog,
    QPushButton,
)

from tdescope.app.engines.api import ConnectParams
from tdescope.app.errors import UserError
from tdescope.app.remote.host_session import HostSession, host_label, ssh_option_words

__all__ = ["HostDialog", "RecentHosts", "RemoteHost", "host_params"]


def host_params(dest: str, ssh_options: tuple[str, ...] = (), pid: int | None = None,
                prompt: bool = False, dsn: str = "", password=None) -> ConnectParams:
    """How the window connects to a process on ``dest`` (``connect_engine`` opens a HostSession from it);
    ``prompt``: ssh may ask for a password or passphrase on the terminal (``--ssh-prompt``). ``dsn``: the
    engine's server as the host sees it, reached through the ssh connection (``pid``: one of its backends);
    ``password`` asks for its password (the window's PasswordPrompt)."""
    return ConnectParams(dsn=dsn, prompt=password, pid=pid,
                         options={"ssh": dest, "ssh_options": tuple(ssh_options), "ssh_prompt": prompt})


class RecentHosts:
    """Hosts connected to lately, newest first, kept in the settings (with the ssh options typed)."""

    KEY = "hosts/recent"

    def __init__(self, settings: QSettings) -> None:
        self.settings = settings

    def entries(self) -> list[str]:
        """``dest [options]`` lines, newest first."""
        value = self.settings.value(self.KEY, [])
        return [value] if isinstance(value, str) else [str(v) for v in value or []]

    def add(self, dest: str, options: str = "") -> None:
        """Remember ``dest`` with its options as the newest."""
        entry = f"{dest} {options}".strip()
        self.settings.setValue(self.KEY, ([entry] + [e for e in self.entries() if e != entry])[:10])


class HostDialog(QDialog):
    """Where to connect: a destination (``[user@]host`` or an ssh config alias; the recent ones offered)
    and optional ssh options (``Port=2222 ProxyJump=bastion``)."""

    def __init__(self, recent: list[str], parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Connect to host")
        self.setMinimumWidth(520)
        self.dest = QComboBox(editable=True)
        self.options = QLineEdit()
        self.options.setPlaceholderText("optional: KEY=VALUE … (ssh -o), e.g. Port=2222 ProxyJump=bastion")
        for entry in recent:
            self.dest.addItem(entry.split()[0], entry)
        self.dest.currentIndexChanged.connect(self._recall)
        self.pid = QLineEdit()
        self.pid.setPlaceholderText("optional (default: the process running the probed code)")
        self.dsn = QLineEdit()
        self.dsn.setPlaceholderText("optional: the server as the host sees it, e.g. host=/var/run/postgresql "
                                    "dbname=app (no password: it is asked)")
        form = QFormLayout(self)
        about = QLabel("Your own OpenSSH connects (~/.ssh/config, keys and jump hosts work); the agent runs "
                       "with the host's python3 under sudo -n.")
        about.setWordWrap(True)  # never wider than a projector's screen
        form.addRow(about)
        form.addRow("&Destination", self.dest)
        form.addRow("ssh &options", self.options)
        form.addRow("&pid", self.pid)
        form.addRow("&DSN", self.dsn)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        form.addRow(buttons)
        self._recall(0)

    def _recall(self, index: int) -> None:
        entry = self.dest.itemData(index) if index >= 0 else None
        if entry:
            self.options.setText(" ".join(str(entry).split()[1:]))

    def chosen(self) -> tuple[str, tuple[str, ...], int | None]:
        """``(dest, ssh words, pid or None)``; UserError (one line) for what is not a host, option or pid."""
        dest = self.dest.currentText().strip()
        pid = self.pid.text().strip()
        if pid and not pid.isdigit():
            raise UserError(f"not a process id: {pid!r}")
        return dest, ssh_option_words(shlex.split(self.options.text())), int(pid) if pid else None


class RemoteHost(QObject):
    """The window's remote-host parts. ``reconnect(params=None)`` is the window's: it leaves the session for
    ``params`` (None: the same host and target again) and returns the connect task's TaskState.

    The window tells it each run it starts (:attr:`last_run`) and asks it, once connected, to
    :meth:`rearm` the run the lost connection broke off. A 1 s timer notices a connection that
    ended while nothing was captured."""

    def __init__(self, window: QMainWindow, settings: QSettings, reconnect: Callable[..., object]) -> None:
        super().__init__(window)
        self.window = window
        self.recent = RecentHosts(settings)
        self._connect = reconnect
        self.last_run: tuple | None = None  #: the last run's ``run_workload`` arguments
        self._rearm: tuple | None = None
        self.session: HostSession | None = None
        self.timer = QTimer(self)
        self.timer.setInterval(1000)
        self.timer.timeout.connect(self._check)
        self.label = QLabel("")
        self.label.setToolTip("The probe, the hotspots and the OS waits run on this host, through the agent")
        self.reconnect_button = QPushButton("Reconnect")
        self.reconnect_button.setToolTip("Connect to the same host again and re-arm the same target")
        self.reconnect_button.clicked.connect(lambda: reconnect())
        self.reconnect_button.hide()
        window.statusBar().addPermanentWidget(self.label)
        window.statusBar().addPermanentWidget(self.reconnect_button)
        self.connect_action = QAction("Connect to &host…", self, triggered=self.ask)
        self.reconnect_action = QAction("Re&connect to host", self, triggered=lambda: reconnect(), enabled=False)
        self.progress: QProgressDialog | None = None
        self.host = ""  #: ``db1 via ssh`` while the session is on a host, else ""
        self.lost = False

    def fill_menu(self, menu: QMenu) -> None:
        """Add Connect to host… and Reconnect to host to ``menu`` (the File menu)."""
        menu.addActions([self.connect_action, self.reconnect_action])

    def ask(self) -> None:
        """Show the dialog, then connect off the GUI thread (progress with Cancel)."""
        if self.window.replay.replaying:  # a replay shows a file: nothing there is live to move to a host
            self.window.statusBar().showMessage("This window replays a recording: connect to a host from a live "
                                                "window (tdescope gui --ssh HOST)", 10000)
            return
        dialog = HostDialog(self.recent.entries(), self.window)
        if not dialog.exec():
            return
        try:
            dest, words, pid = dialog.chosen()
        except UserError as exc:
            self.window.statusBar().showMessage(str(exc), 15000)
            return
        self.recent.add(dest, dialog.options.text().strip())
        self.connect_to(dest, words, pid, dialog.dsn.text().strip())

    def connect_to(self, dest: str, words: tuple[str, ...], pid: int | None = None, dsn: str = "") -> None:
        """Connect the window to ``pid`` (or the engine's process) on ``dest``, with a cancellable progress;
        with ``dsn``, to the engine's server there through the ssh connection (its password asked here)."""
        from tdescope.commands._dsn import refuse_password_in_dsn
        from tdescope.ui.docks.plugin_docks import PasswordPrompt

        try:
            refuse_password_in_dsn(dsn, self.window.engine.name)
        except UserError as exc:
            self.window.statusBar().showMessage(str(exc), 15000)
            return
        state = self._connect(host_params(dest, words, pid, dsn=dsn, password=PasswordPrompt(self.window) if dsn
                                          else None))
        self.progress = QProgressDialog(f"Connecting to {dest} over ssh…", "Cancel", 0, 0, self.window)
        self.progress.setWindowTitle("tdescope — connect to host")
        self.progress.setWindowModality(Qt.WindowModality.WindowModal)
        self.progress.setMinimumDuration(0)
        self.progress.canceled.connect(lambda: self._cancelled(state, dest))
        self.progress.show()

    def _cancelled(self, state, dest: str) -> None:
        state.cancel()  # its outcome is dropped; what it opened is closed by the task itself
        self._done()
        self.window.statusBar().showMessage(f"Not connecting to {dest}: cancelled", 8000)

    def _done(self) -> None:
        progress, self.progress = self.progress, None
        if progress is not None:
            progress.reset()
            progress.hide()

    def failed(self) -> None:
        """The attempt ended in an error (the window shows its one line)."""
        self._done()

    def show(self, session, engine_label: str) -> str:
        """The window's session is ``session`` now: title and status bar; returns the Engine dock's label."""
        self._done()
        self.host, self.lost = host_label(session), False
        self.session = session if self.host else None
        self.timer.start() if self.host else self.timer.stop()
        where = f" — {self.host}" if self.host else ""
        if self.host:  # "SQLCipher (embedded lab)": the engine's name only, the process is the host's
            engine_label = engine_label.split(" (")[0]
        self.window.setWindowTitle(f"tdescope — {engine_label}{where}")
        self.label.setText(f"  {self.host}  " if self.host else "")
        self.label.setStyleSheet("background: #1f618d; color: white; border-radius: 3px;" if self.host else "")
        self.reconnect_button.hide()
        self.reconnect_action.setEnabled(bool(self.host))
        return f"{engine_label} on {self.host}" if self.host else engine_label

    def _check(self) -> None:
        session = self.session
        if session is not None and not self.lost and session is self.window.session and not session.alive():
            self.connection_lost(session.agent.client.lost or f"connection to {session.dest} lost (ssh ended)")

    def rearm(self, run: Callable[..., None]) -> None:
        """Once reconnected: ``run(*last_run)`` when a capture was broken off by the lost connection."""
        again, self._rearm = self._rearm, None
        if again is not None:
            run(*again)

    def connection_lost(self, message: str) -> None:
        """The agent's connection ended: say so (status bar, Engine dock), offer Reconnect, and remember the
        capture it broke off (Reconnect re-arms it)."""
        if self.lost:
            return
        exp = self.window.experiment
        broke_off = exp is not None and exp.recipe is not None and (not exp.done.is_set() or bool(exp.error))
        self._rearm = self.last_run if broke_off else None
        self.window.engine_dock.show_error(message, lost=True)
        self.window.statusBar().showMessage(f"{self.host}: {message}", 15000)
        self.lost = True
        self.label.setText(f"  {self.host}: connection lost  ")
        self.label.setToolTip(message)
        self.label.setStyleSheet("background: #c0392b; color: white; font-weight: bold; border-radius: 3px;")
        self.reconnect_button.show()
