"""The File menu of a window: new, open (recent, drag and drop), save as, encrypt, export a report.

A live window opens a session file in a new replay window (made by the factory
it was given); a window that is not live replays it itself.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, QSettings, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QFileDialog, QMainWindow, QMenu, QMessageBox

from tdescope.app.engines.api import PageDecoder
from tdescope.app.errors import UserError
from tdescope.app.report.model import build_report
from tdescope.app.session.copy import copy_session
from tdescope.app.session.reader import SessionReader
from tdescope.app.system.private_files import shared_folder_note
from tdescope.ui.dialogs.passphrase import ask_passphrase
from tdescope.ui.export.dialog import ReportDialog, write_report
from tdescope.ui.gui_thread.tasks import TaskRunner, TaskState, describe
from tdescope.ui.window.recording import RecordingController, RecordingMode, autosave_dir
from tdescope.ui.window.replay import ReplayController

__all__ = ["FileActions", "RecentFiles"]

#: Opens ``path`` (with its passphrase) in a new replay window and returns that window.
ReplayWindowFactory = Callable[[str, "str | None"], QMainWindow]


class RecentFiles:
    """Recently opened or recorded session files, newest first, kept in the settings."""

    KEY = "sessions/recent"

    def __init__(self, settings: QSettings) -> None:
        self.settings = settings

    def paths(self) -> list[str]:
        """The remembered paths that still exist, newest first."""
        value = self.settings.value(self.KEY, [])
        paths = [value] if isinstance(value, str) else list(value or [])
        return [p for p in paths if os.path.exists(p)]

    def add(self, path: str | Path) -> None:
        """Remember ``path`` as the newest."""
        path = str(Path(path).resolve())
        paths = [path] + [p for p in self.paths() if p != path]
        self.settings.setValue(self.KEY, paths[:10])


class FileActions(QObject):
    """File > New, Open, Open Recent, Save As, Encrypt Recording, Export report; drops of .tds files.

    Parameters
    ----------
    recording, replay : RecordingController, ReplayController
        The window's recording and its replayed file.
    recent : RecentFiles
    decoder : PageDecoder
        Decodes pages for the report.
    tasks : TaskRunner
        Builds reports off the GUI thread.
    open_window : callable
        ``open_window(path, passphrase)`` opens a new replay window (from a live one).
    is_live : callable
        True while the window has an engine session.
    reset_views : callable
        Clears every view (File > New).
    window : QMainWindow
        Parent of the dialogs; the window that :meth:`open_path` returns when it replays here.
    """

    status = Signal(str, int)
    """A status bar message and how long to show it (ms)."""

    def __init__(self, recording: RecordingController, replay: ReplayController, recent: RecentFiles,
                 decoder: PageDecoder, tasks: TaskRunner, open_window: ReplayWindowFactory,
                 is_live: Callable[[], bool], reset_views: Callable[[], None], window: QMainWindow) -> None:
        super().__init__(window)
        self.recording = recording
        self.replay = replay
        self.recent = recent
        self.decoder = decoder
        self.tasks = tasks
        self.saving: TaskState | None = None  # a Save As under way
        self._open_window = open_window
        self._is_live = is_live
        self._reset_views = reset_views
        self._window = window
        self.replay_windows: list[QMainWindow] = []  # opened from here; alive until closed
        self.recent_menu = QMenu("Open &Recent", window)
        self.recent_menu.aboutToShow.connect(self._fill_recent)

    def fill_menu(self, menu: QMenu) -> None:
        """Add the session actions to ``menu`` (the File menu)."""
        menu.addActions([
            QAction("&New (clear)", self, shortcut="Ctrl+Shift+N", triggered=self.new),
            QAction("&Open session…", self, shortcut=QKeySequence.StandardKey.Open, triggered=self.open_dialog),
            self.recent_menu.menuAction(),
            # lambdas: `triggered` passes `checked` (False), which would land in the optional argument
            QAction("Save &As…", self, shortcut=QKeySequence.StandardKey.SaveAs, triggered=lambda: self.save_as()),
            QAction("En&crypt Recording…", self, triggered=lambda: self.recording.encrypt_recording(),
                    toolTip="Encrypt this window's recordings with SQLCipher: they hold decrypted pages"),
            QAction("&Export report…", self, shortcut="Ctrl+E", triggered=self.export_dialog),
        ])

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent.paths():
            self.recent_menu.addAction(QAction(path, self.recent_menu, triggered=lambda _=False, p=path: self.open_path(p)))
        if not self.recent_menu.actions():
            self.recent_menu.addAction(QAction("(none)", self.recent_menu, enabled=False))

    @property
    def mode(self) -> RecordingMode:
        """Recording live, replaying, or neither."""
        return RecordingMode.REPLAY if self.replay.replaying else self.recording.mode

    @property
    def current_path(self) -> Path | None:
        """The session file this window shows or records, if any."""
        if self.replay.reader is not None:
            return self.replay.reader.path
        recorder = self.recording.recorder
        return recorder.path if recorder is not None else None

    def _passphrase(self) -> str | None:
        return self.replay.passphrase if self.replay.replaying else self.recording.passphrase

    # -- actions ----------------------------------------------------------------------------
    def new(self) -> None:
        """Start afresh: close the recording or the replayed file and clear every view."""
        self.recording.close_recording()
        was_replay = self.replay.replaying
        self.replay.close_file()
        self._reset_views()
        if was_replay:
            self.replay.leave()
            self.recording.mode = RecordingMode.LIVE if self._is_live() else RecordingMode.IDLE

    def open_dialog(self) -> None:
        """File > Open (Ctrl+O)."""
        start = str(self.current_path.parent) if self.current_path else str(autosave_dir())
        path, _ = QFileDialog.getOpenFileName(self._window, "Open session", start, "tdescope sessions (*.tds)")
        if path:
            self.open_path(path)

    def open_path(self, path: str | Path) -> QMainWindow | None:
        """Replay ``path``: here when this window is not live, else in a new window. Returns that window."""
        try:
            passphrase = ask_passphrase(self._window, path)
            live = self._is_live() or self.recording.recorder is not None
            if not live:
                self.replay.enter_replay(path, passphrase)
                return self._window
            window = self._open_window(str(path), passphrase)
            # closed, it is deleted and forgotten: replay windows do not pile up for the life of the workbench
            window.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
            key = id(window)
            window.destroyed.connect(lambda _obj=None, k=key: self._forget_replay_window(k))
            self.replay_windows.append(window)
            window.show()
            return window
        except UserError as exc:
            QMessageBox.warning(self._window, "Cannot open session", str(exc))
            return None

    def _forget_replay_window(self, key: int) -> None:
        self.replay_windows = [w for w in self.replay_windows if id(w) != key]

    def save_as(self, path: str | None = None) -> Path | None:
        """Save a copy of the recording (or the replayed file) under a new name, on the task runner with
        its progress in the status bar; returns where it goes (:attr:`saving` is its task until done)."""
        src = self.current_path
        if src is None:
            QMessageBox.information(self._window, "Save As", "Nothing recorded yet.")
            return None
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self._window, "Save session as", str(Path.home() / src.name),
                                                  "tdescope sessions (*.tds)")
            if not path:
                return None
        dst = Path(path if str(path).endswith(".tds") else f"{path}.tds")
        self.recording.flush()
        # an encrypted session stays encrypted, under the same passphrase
        passphrase = self._passphrase()
        self.status.emit(f"Saving a copy to {dst}…", 0)

        def copy(state) -> Path:  # on a worker thread: an hour-long session is hundreds of MB
            copy_session(src, dst, passphrase=passphrase, new_passphrase=passphrase, progress=state.set_progress)
            return dst

        def saved(out: Path) -> None:
            self.saving = None
            self.recent.add(out)
            self.status.emit(f"Saved a copy to {out}", 5000)

        def failed(exc: BaseException) -> None:
            self.saving = None
            QMessageBox.warning(self._window, "Save As", describe(exc))

        self.saving = self.tasks.run(copy, name="save-as", on_done=saved, on_exception=failed,
                                     on_progress=lambda f: self.status.emit(f"Saving a copy to {dst}… {f:.0%}", 0))
        return dst

    def export_dialog(self) -> None:
        """File > Export report (Ctrl+E)."""
        src = self.current_path
        if src is None:
            QMessageBox.information(self._window, "Export report", "Nothing recorded yet.")
            return
        dialog = ReportDialog(str(Path.home() / (src.stem + ".html")), self._window)
        if dialog.exec():
            self.export(dialog.path.text(), dialog.include_plaintext.isChecked())

    def export(self, output: str, include_plaintext: bool = False) -> None:
        """Build the report model on the task runner (a long session takes seconds), then write
        it on the GUI thread, where Qt's PDF writer lives."""
        self.recording.flush()
        self.status.emit("Building the report…", 0)
        path, decoder = str(self.current_path), self.decoder
        passphrase = self.replay.passphrase if self.replay.replaying else None

        def build(_state):
            with SessionReader(path, writable=False, passphrase=passphrase) as reader:
                return build_report(reader, decoder, include_plaintext=include_plaintext)

        self.tasks.run(build, name="report", on_done=lambda report: self._write_report(report, output),
                       on_exception=lambda exc: self.status.emit(f"Report failed: {describe(exc)}", 15000))

    def _write_report(self, report, output: str) -> None:
        try:
            out = write_report(report, output)
        except UserError as exc:
            self.status.emit(f"Report failed: {exc}", 15000)
            return
        note = shared_folder_note(out.parent)
        self.status.emit(f"Report written to {out} (readable by you only)" + (f"; note: {note}" if note else ""),
                         10000)

    # -- drops on the window ----------------------------------------------------------------
    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - Qt API
        kind = event.type()
        if kind in (QEvent.Type.DragEnter, QEvent.Type.DragMove):
            if _tds_urls(event.mimeData()):
                event.acceptProposedAction()
                return True
        elif kind == QEvent.Type.Drop:
            paths = _tds_urls(event.mimeData())
            if paths:
                event.acceptProposedAction()
                self.open_path(paths[0])
                return True
        return super().eventFilter(obj, event)


def _tds_urls(mime) -> list[str]:
    if mime is None or not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().endswith(".tds")]
