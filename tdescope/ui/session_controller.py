"""Sessions in the window: autosave recording, File menu, replay, notes and report export.

:func:`attach_sessions` is all ``MainWindow`` calls. A live window records
every event published to its :class:`~tdescope.app.session.live.LiveSession` to an autosave file under the
user's data folder (``$XDG_DATA_HOME/tdescope/sessions``, created on the first
event). A window opened on a .tds file is in replay mode: no database, no
process; a :class:`~tdescope.ui.replay_bar.ReplayPlayer` feeds the recorded
events to the same docks, under a REPLAY banner and window title.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QApplication, QFileDialog, QMenu, QMessageBox

from tdescope.app.engines.api import DecodedPage, Inventory
from tdescope.app.errors import UserError
from tdescope.app.session.notes import NoteStore, NoteTarget
from tdescope.app.session.file import SessionReader, SessionRecorder, copy_session
from tdescope.app.session.meta import SessionMeta, keeps_plaintext
from tdescope.ui.notes_dock import NotesDock
from tdescope.ui.passphrase import ask_new_passphrase, ask_passphrase
from tdescope.ui.replay_bar import ReplayBar, ReplayPlayer
from tdescope.ui.report_dialog import ReportDialog, ReportReady, build_in_background, write_report

__all__ = ["SessionController", "attach_sessions", "autosave_dir", "open_replay_window"]

_RECENT_KEY = "sessions/recent"
_KEEP_AUTOSAVES = 30
_windows: list = []  # replay windows opened from a live one stay alive while shown


def autosave_dir() -> Path:
    """Where live sessions are recorded: ``$XDG_DATA_HOME/tdescope/sessions``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "tdescope" / "sessions"


class _RecordedEngine:
    """Stands in for an engine that is not installed here, so its recordings still replay."""

    def __init__(self, name: str, label: str) -> None:
        self.name, self.label = name or "unknown", label or name or "recorded session"

    def connect(self, params):
        raise UserError(f"engine {self.name} is not installed here; only replay is possible")

    def probe_recipes(self):
        return []

    def page_decoder(self):
        return self

    def decode(self, data: bytes, pgno: int = -1) -> DecodedPage:
        return DecodedPage("unknown", problems=(f"no {self.name} decoder installed here",))

    def glossary(self):
        return {}


def engine_for(meta: SessionMeta):
    """The installed engine that recorded ``meta``, or a stand-in."""
    from tdescope.app.engines import discover_engines

    engines, _ = discover_engines()
    return engines.get(meta.engine) or _RecordedEngine(meta.engine, meta.engine_label)


def open_replay_window(path: str, settings=None, passphrase: str | None = None):
    """A new main window replaying ``path``; raises UserError for a bad file or a wrong passphrase."""
    from tdescope.ui.main_window import MainWindow  # main_window imports this module

    with SessionReader(path, writable=False, passphrase=passphrase) as reader:
        meta = reader.meta
    window = MainWindow(engine_for(meta), settings)
    window.sessions.enter_replay(path, passphrase)
    return window


class SessionController(QObject):
    """Recording, replay, notes and the File menu of one MainWindow."""

    recordingStarted = Signal(str)
    """Emitted (queued to the GUI thread) with the autosave path once recording begins."""

    def __init__(self, window) -> None:
        super().__init__(window)
        self.window = window
        self.mode = "live"  # live | replay | idle
        self.reader: SessionReader | None = None
        self.player: ReplayPlayer | None = None
        self._inventory: Inventory | None = None
        self._passphrase: str | None = None  # of the replayed file, in memory only
        self._record_passphrase: str | None = None  # encrypts this window's recordings, in memory only
        self.notes_dock = NotesDock(self._note_targets, self._ensure_store, window)
        window.addDockWidget(Qt.DockWidgetArea.RightDockWidgetArea, self.notes_dock)
        self.replay_bar = ReplayBar(window)
        window.addToolBar(Qt.ToolBarArea.TopToolBarArea, self.replay_bar)
        self.replay_bar.hide()
        self.notes_dock.notesChanged.connect(self._on_notes)
        self.notes_dock.noteActivated.connect(self._on_note_activated)
        # queued even from the GUI thread: the hub attaches the recorder once _start_recording returns
        self.recordingStarted.connect(self._on_recording_started, Qt.ConnectionType.QueuedConnection)
        window.pump.subscribe(ReportReady, self._on_report_ready)
        window.pump.subscribe(_RecordingFailed, lambda b: window.statusBar().showMessage(
            f"Not recording this session: {b[-1].message}", 15000))
        window.live.record_on_demand(self._start_recording)
        window.setAcceptDrops(True)
        window.installEventFilter(self)
        self._build_menus()

    # -- menus ---------------------------------------------------------------------
    def _menu(self, title: str) -> QMenu | None:
        for action in self.window.menuBar().actions():
            if action.text() == title and action.menu() is not None:
                return action.menu()
        return None

    def _build_menus(self) -> None:
        w = self.window
        file_menu = self._menu("&File") or w.menuBar().addMenu("&File")
        first = file_menu.actions()[0] if file_menu.actions() else None
        self.recent_menu = QMenu("Open &Recent", w)
        self.recent_menu.aboutToShow.connect(self._fill_recent)
        actions = [
            QAction("&New (clear)", w, shortcut="Ctrl+Shift+N", triggered=self.new),
            QAction("&Open session…", w, shortcut=QKeySequence.StandardKey.Open, triggered=self.open_dialog),
            self.recent_menu.menuAction(),
            # lambdas: `triggered` passes `checked` (False), which would land in the optional argument
            QAction("Save &As…", w, shortcut=QKeySequence.StandardKey.SaveAs, triggered=lambda: self.save_as()),
            QAction("En&crypt Recording…", w, triggered=lambda: self.encrypt_recording(),
                    toolTip="Encrypt this window's recordings with SQLCipher: they hold decrypted pages"),
            QAction("&Export report…", w, shortcut="Ctrl+E", triggered=self.export_dialog),
        ]
        file_menu.insertActions(first, actions)
        file_menu.insertSeparator(first)
        edit = QMenu("&Edit", w)
        undo = self.notes_dock.undo_stack.createUndoAction(w, "&Undo")
        undo.setShortcut(QKeySequence("Ctrl+Z"))
        redo = self.notes_dock.undo_stack.createRedoAction(w, "&Redo")
        redo.setShortcut(QKeySequence("Ctrl+Shift+Z"))
        edit.addActions([undo, redo])
        edit.addSeparator()
        edit.addAction(QAction("&Add note…", w, shortcut="Ctrl+N", triggered=self.notes_dock.add_interactive))
        edit.addAction(QAction("&Edit note…", w, triggered=self.notes_dock.edit_interactive))
        edit.addAction(QAction("&Delete note", w, triggered=self.notes_dock.delete_selected))
        menus = w.menuBar().actions()
        w.menuBar().insertMenu(menus[1] if len(menus) > 1 else None, edit)
        view = self._menu("&View")
        if view is not None:
            view.insertAction(view.actions()[0] if view.actions() else None, self.notes_dock.toggleViewAction())

    def _fill_recent(self) -> None:
        self.recent_menu.clear()
        for path in self.recent():
            self.recent_menu.addAction(QAction(path, self.recent_menu, triggered=lambda _=False, p=path: self.open_path(p)))
        if not self.recent_menu.actions():
            self.recent_menu.addAction(QAction("(none)", self.recent_menu, enabled=False))

    def recent(self) -> list[str]:
        """Recently opened or recorded session files, newest first, that still exist."""
        value = self.window.settings.value(_RECENT_KEY, [])
        paths = [value] if isinstance(value, str) else list(value or [])
        return [p for p in paths if os.path.exists(p)]

    def _remember(self, path: str | Path) -> None:
        path = str(Path(path).resolve())
        paths = [path] + [p for p in self.recent() if p != path]
        self.window.settings.setValue(_RECENT_KEY, paths[:10])

    # -- live recording (the autosave opens on a producer thread, on the first event) ------
    @property
    def recorder(self) -> SessionRecorder | None:
        """The autosave this live window records into, if it has begun."""
        return self.window.live.recorder

    def set_inventory(self, inventory: Inventory) -> None:
        """The engine session's inventory (once connected): stored in the recording's metadata."""
        self._inventory = inventory
        if self.recorder is not None:
            self.recorder.update_meta(self._meta())

    def _meta(self) -> SessionMeta:
        engine = self.window.engine
        session = self.window.session
        params = {"target_pid": session.server_pid()} if session is not None else {}
        rows = self._inventory.rows if self._inventory is not None else ()
        return SessionMeta.collect(engine.name, engine.label, inventory=rows, params=params)

    def _start_recording(self) -> SessionRecorder | None:
        # called by the LiveSession, one thread at a time, when an event finds no recorder
        if self.mode != "live":
            return None
        folder = autosave_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = folder / f"{stamp}-{self.window.engine.name}.tds"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"{stamp}-{self.window.engine.name}-{n}.tds"
        try:
            recorder = SessionRecorder(path, self._meta(), passphrase=self._record_passphrase,
                                        keep_plaintext=keeps_plaintext(self.window.session))
        except UserError as exc:
            self.mode = "idle"  # cannot record here: say so once, keep working
            self.window.pump.put(_RecordingFailed(str(exc)))
            return None
        self.recordingStarted.emit(str(path))
        _prune(folder)
        return recorder

    def _on_recording_started(self, path: str) -> None:
        self._remember(path)
        if self.notes_dock.store is None and self.recorder is not None and str(self.recorder.path) == path:
            self.notes_dock.set_store(NoteStore(path, self._record_passphrase))
        how = "encrypted " if self._record_passphrase else ""
        self.window.statusBar().showMessage(f"Recording {how}to {path}", 5000)

    def _ensure_store(self) -> NoteStore | None:
        if self.mode == "replay" and self.reader is not None:
            return NoteStore(self.reader.path, self._passphrase)
        if self.mode == "live":
            recorder = self.window.live.ensure_recorder()
            return NoteStore(recorder.path, self._record_passphrase) if recorder is not None else None
        return None

    @property
    def current_path(self) -> Path | None:
        """The session file this window shows or records, if any."""
        if self.reader is not None:
            return self.reader.path
        return self.recorder.path if self.recorder is not None else None

    # -- replay ---------------------------------------------------------------------------
    def enter_replay(self, path: str | Path, passphrase: str | None = None) -> None:
        """Show ``path`` in this window, driven by the replay bar; raises UserError for a bad file.

        ``passphrase`` opens an encrypted file (see :func:`ask_passphrase`).
        """
        reader = SessionReader(path, passphrase=passphrase)
        self._close_file()
        self.mode = "replay"
        self.reader = reader
        self._passphrase = passphrase
        w = self.window
        meta = reader.meta
        name = Path(path).name
        w.setWindowTitle(f"REPLAY — {name} — tdescope")
        w.workload_dock.set_workloads([], [])
        w.workload_dock.run_button.setEnabled(False)
        w.workload_dock.status.setText("Replay of a recorded session: nothing runs, nothing is armed.")
        w.engine_dock.show_inventory(f"{meta.engine_label or meta.engine} (recorded on {meta.host})",
                                     Inventory(meta.engine, meta.inventory), meta.params.get("target_pid"))
        self.player = ReplayPlayer(reader, w.feed, self._reset_views, self)
        self.replay_bar.attach(self.player, name)
        self.replay_bar.show()
        self.notes_dock.set_store(NoteStore(reader.path, passphrase))
        self._remember(path)
        self.player.seek(0.0)
        w.statusBar().showMessage(f"Replaying {path}: press Space to play", 10000)

    def _reset_views(self) -> None:
        w = self.window
        w.pump.drain()  # what was fed before the seek lands now, then is cleared with the rest
        w.captures_dock.clear()
        w.page_view.clear()
        w.workload_dock.progress.setValue(0)
        observation = getattr(w, "observation", None)
        if observation is not None and hasattr(observation, "clear"):
            observation.clear()

    def _close_file(self) -> None:
        if self.player is not None:
            self.player.stop()
            self.player = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        self._passphrase = None
        self.replay_bar.attach(None)
        self.notes_dock.set_store(None)

    # -- File menu actions ------------------------------------------------------------
    def new(self) -> None:
        """Start afresh: close the recording or the replayed file and clear every view."""
        recorder = self.window.live.detach()
        if recorder is not None:
            recorder.close()
        was_replay = self.mode == "replay"
        self._close_file()
        self._reset_views()
        if was_replay:
            self.replay_bar.hide()
            self.window.setWindowTitle(f"tdescope — {self.window.engine.label}")
            self.mode = "live" if self.window.session is not None else "idle"

    def open_dialog(self) -> None:
        """File > Open (Ctrl+O)."""
        start = str(self.current_path.parent) if self.current_path else str(autosave_dir())
        path, _ = QFileDialog.getOpenFileName(self.window, "Open session", start, "tdescope sessions (*.tds)")
        if path:
            self.open_path(path)

    def open_path(self, path: str | Path):
        """Replay ``path``: here when this window is not live, else in a new window. Returns that window."""
        try:
            passphrase = ask_passphrase(self.window, path)
            live = self.window.session is not None or self.recorder is not None
            if not live:
                self.enter_replay(path, passphrase)
                return self.window
            window = open_replay_window(str(path), self.window.settings, passphrase)
            _windows.append(window)
            window.show()
            return window
        except UserError as exc:
            QMessageBox.warning(self.window, "Cannot open session", str(exc))
            return None

    def save_as(self, path: str | None = None) -> Path | None:
        """Save a copy of the recording (or the replayed file) under a new name."""
        src = self.current_path
        if src is None:
            QMessageBox.information(self.window, "Save As", "Nothing recorded yet.")
            return None
        if path is None:
            path, _ = QFileDialog.getSaveFileName(self.window, "Save session as", str(Path.home() / src.name),
                                                  "tdescope sessions (*.tds)")
            if not path:
                return None
        dst = Path(path if str(path).endswith(".tds") else f"{path}.tds")
        if self.recorder is not None:
            self.recorder.flush()
        # an encrypted session stays encrypted, under the same passphrase
        passphrase = self._passphrase if self.reader is not None else self._record_passphrase
        try:
            copy_session(src, dst, passphrase=passphrase, new_passphrase=passphrase)
        except UserError as exc:
            QMessageBox.warning(self.window, "Save As", str(exc))
            return None
        self._remember(dst)
        self.window.statusBar().showMessage(f"Saved a copy to {dst}", 5000)
        return dst

    def encrypt_recording(self, passphrase: str | None = None) -> bool:
        """File > Encrypt Recording: encrypt the autosave in place, and every later recording
        of this window, under a passphrase asked for twice (kept in memory only)."""
        if self.mode != "live":
            QMessageBox.information(self.window, "Encrypt Recording",
                                    "Only a live session records; use Save As to copy a replayed one.")
            return False
        if self._record_passphrase is not None:
            self.window.statusBar().showMessage("This window's recordings are already encrypted", 5000)
            return True
        if passphrase is None:
            passphrase = ask_new_passphrase(self.window)
            if passphrase is None:
                return False
        recorder = self.recorder
        if recorder is not None:
            notes = self.notes_dock.store
            if notes is not None:
                notes.close()  # its connection would keep writing to the plain file being replaced
            error = None
            QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)  # the writer thread exports the file
            try:
                recorder.encrypt(passphrase)
            except UserError as exc:
                error = str(exc)
            finally:
                QApplication.restoreOverrideCursor()
            if error is not None:
                QMessageBox.warning(self.window, "Encrypt Recording", error)
                passphrase = None
            self.notes_dock.set_store(NoteStore(recorder.path, passphrase if recorder.encrypted else None))
            if passphrase is None:
                return False
        self._record_passphrase = passphrase
        where = f" ({recorder.path.name})" if recorder is not None else ""
        self.window.statusBar().showMessage(f"Recording encrypted{where}: the passphrase is not stored anywhere", 8000)
        return True

    def export_dialog(self) -> None:
        """File > Export report (Ctrl+E)."""
        src = self.current_path
        if src is None:
            QMessageBox.information(self.window, "Export report", "Nothing recorded yet.")
            return
        dialog = ReportDialog(str(Path.home() / (src.stem + ".html")), self.window)
        if dialog.exec():
            self.export(dialog.path.text(), dialog.include_plaintext.isChecked())

    def export(self, output: str, include_plaintext: bool = False) -> None:
        """Build the report off the GUI thread, then write it (see :meth:`_on_report_ready`)."""
        if self.recorder is not None:
            self.recorder.flush()
        self.window.statusBar().showMessage("Building the report…")
        build_in_background(str(self.current_path), output, self.window.decoder, include_plaintext,
                            self.window.pump.put, self._passphrase if self.reader is not None else None)

    def _on_report_ready(self, batch: list[ReportReady]) -> None:
        for ready in batch:
            try:
                if ready.error:
                    raise UserError(ready.error)
                out = write_report(ready.report, ready.output)
                self.window.statusBar().showMessage(f"Report written to {out}", 10000)
            except UserError as exc:
                self.window.statusBar().showMessage(f"Report failed: {exc}", 15000)

    # -- notes ----------------------------------------------------------------------------
    def _note_targets(self) -> list[NoteTarget]:
        w = self.window
        out: list[NoteTarget] = []
        index = w.captures_dock.view.currentIndex()
        if index.isValid():
            cap, _ = w.captures_dock.model.row(w.captures_dock.proxy.mapToSource(index).row())
            for side, view in (("after", w.page_view.after_view), ("before", w.page_view.before_view)):
                start, end = view.selection()
                if end - start > 1:
                    out.append(NoteTarget("bytes", ts=cap.ts, seq=cap.seq, start=start, end=end, side=side))
            out.append(NoteTarget("capture", ts=cap.ts, seq=cap.seq))
        timeline = getattr(getattr(w, "observation", None), "timeline_dock", None)
        rng = timeline.selected_range() if timeline is not None and hasattr(timeline, "selected_range") else None
        if rng:
            out.append(NoteTarget("range", ts=rng[0], ts_end=rng[1]))
        if self.player is not None:
            at = self.player.t0 + self.player.position
            out.append(NoteTarget("range", ts=at, ts_end=at))
        return out

    def _on_notes(self, notes: list) -> None:
        timeline = getattr(getattr(self.window, "observation", None), "timeline_dock", None)
        if timeline is not None and hasattr(timeline, "set_notes"):  # the Timeline dock may show them
            timeline.set_notes([(n.when, n.text) for n in notes])

    def _on_note_activated(self, note) -> None:
        if self.player is not None and note.target.ts is not None:
            self.player.seek(note.target.ts - self.player.t0)

    # -- window events ----------------------------------------------------------------------
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
        elif kind == QEvent.Type.Close:
            self.shutdown()
        return super().eventFilter(obj, event)

    def shutdown(self) -> None:
        """Commit and close the recording and the replayed file. Safe to call twice."""
        self.mode = "idle"
        recorder = self.window.live.detach()
        if recorder is not None:
            recorder.close()
        self._close_file()


class _RecordingFailed:
    """Internal: the autosave file could not be created."""

    def __init__(self, message: str) -> None:
        self.message = message


def _tds_urls(mime) -> list[str]:
    if mime is None or not mime.hasUrls():
        return []
    return [u.toLocalFile() for u in mime.urls() if u.isLocalFile() and u.toLocalFile().endswith(".tds")]


def _prune(folder: Path) -> None:
    # autosaves pile up across runs; keep the newest few dozen
    try:
        files = sorted(folder.glob("*.tds"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[_KEEP_AUTOSAVES:]:
            for suffix in ("", "-wal", "-shm"):
                Path(str(old) + suffix).unlink(missing_ok=True)
    except OSError:
        pass


def attach_sessions(window) -> SessionController:
    """Add recording, replay, notes and the session File menu to ``window``, a MainWindow."""
    return SessionController(window)
