"""Autosave recording of a live window: every event through the pump goes to a session file.

A live window records every event that passes through its event pump to an
autosave file under the user's data folder (``$XDG_DATA_HOME/tdescope/sessions``,
created on the first event). File > Encrypt Recording encrypts it in place, and
every later recording of the window, under a passphrase kept in memory only.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from tdescope.app.engines.api import Engine, EngineSession, Inventory
from tdescope.app.errors import UserError
from tdescope.app.events import Event, PageCapture
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta
from tdescope.app.session.notes import NoteStore
from tdescope.ui.event_pump import EventPump
from tdescope.ui.notes_dock import NotesDock
from tdescope.ui.passphrase import ask_new_passphrase

__all__ = ["RecordingController", "autosave_dir"]

_KEEP_AUTOSAVES = 30


def autosave_dir() -> Path:
    """Where live sessions are recorded: ``$XDG_DATA_HOME/tdescope/sessions``."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "tdescope" / "sessions"


class RecordingController(QObject):
    """The autosave recording of one live window.

    Parameters
    ----------
    engine : Engine
        Names the file and the session's metadata.
    session : callable
        Returns the connected engine session, or None (its target pid goes in the metadata).
    pump : EventPump
        Every event put on it is recorded (a tap, on the producer's thread).
    notes_dock : NotesDock
        Gets the recording's note store once the file exists.
    remember : callable
        Adds a path to the recent files.
    dialog_parent : QWidget
        Parent of the passphrase and warning dialogs.
    """

    recordingStarted = Signal(str)
    """Emitted (queued to the GUI thread) with the autosave path once recording begins."""
    status = Signal(str, int)
    """A status bar message and how long to show it (ms)."""

    def __init__(self, engine: Engine, session: Callable[[], EngineSession | None], pump: EventPump,
                 notes_dock: NotesDock, remember: Callable[[str | Path], None], dialog_parent: QWidget) -> None:
        super().__init__(dialog_parent)
        self.engine = engine
        self._session = session
        self.pump = pump
        self.notes_dock = notes_dock
        self._remember = remember
        self._dialog_parent = dialog_parent
        self.mode = "live"  # live: records | idle: not (replaying, closed, or cannot record here)
        self.recorder: SessionRecorder | None = None
        self._inventory: Inventory | None = None
        self._record_passphrase: str | None = None  # encrypts this window's recordings, in memory only
        self._lock = threading.Lock()
        self.recordingStarted.connect(self._on_recording_started)
        pump.subscribe(_RecordingFailed, lambda b: self.status.emit(
            f"Not recording this session: {b[-1].message}", 15000))
        pump.add_tap(self._tap)

    # -- live recording (the tap runs on producer threads) ------------------------------
    def _tap(self, event) -> None:
        if self.mode != "live":
            return
        if isinstance(event, Event):
            recordable = event
        elif isinstance(getattr(event, "capture", None), PageCapture):
            recordable = event.capture  # the window wraps captures with their summary
        else:
            inventory = getattr(event, "inventory", None)
            if isinstance(inventory, Inventory):
                self._inventory = inventory
                if self.recorder is not None:
                    self.recorder.update_meta(self._meta())
            return
        recorder = self.recorder or self._start_recording()
        if recorder is not None:
            recorder.record(recordable)

    def _meta(self) -> SessionMeta:
        engine = self.engine
        session = self._session()
        params = {"target_pid": session.server_pid()} if session is not None else {}
        rows = self._inventory.rows if self._inventory is not None else ()
        return SessionMeta.collect(engine.name, engine.label, inventory=rows, params=params)

    def _start_recording(self) -> SessionRecorder | None:
        with self._lock:
            if self.recorder is None and self.mode == "live":
                folder = autosave_dir()
                stamp = time.strftime("%Y%m%d-%H%M%S")
                path = folder / f"{stamp}-{self.engine.name}.tds"
                n = 1
                while path.exists():
                    n += 1
                    path = folder / f"{stamp}-{self.engine.name}-{n}.tds"
                try:
                    self.recorder = SessionRecorder(path, self._meta(), passphrase=self._record_passphrase)
                except UserError as exc:
                    self.mode = "idle"  # cannot record here: say so once, keep working
                    self.pump.put(_RecordingFailed(str(exc)))
                    return None
                self.recordingStarted.emit(str(path))
                _prune(folder)
            return self.recorder

    def _on_recording_started(self, path: str) -> None:
        self._remember(path)
        if self.notes_dock.store is None and self.recorder is not None and str(self.recorder.path) == path:
            self.notes_dock.set_store(NoteStore(path, self._record_passphrase))
        how = "encrypted " if self._record_passphrase else ""
        self.status.emit(f"Recording {how}to {path}", 5000)

    # -- what the other controllers ask ---------------------------------------------------
    def note_store(self) -> NoteStore | None:
        """Where notes of this live window go (the recording, started if need be); None when idle."""
        if self.mode != "live":
            return None
        recorder = self.recorder or self._start_recording()
        return NoteStore(recorder.path, self._record_passphrase) if recorder is not None else None

    @property
    def passphrase(self) -> str | None:
        """The passphrase encrypting this window's recordings (in memory only), or None."""
        return self._record_passphrase

    def flush(self) -> None:
        """Commit what was recorded so far (before copying or reporting the file)."""
        if self.recorder is not None:
            self.recorder.flush()

    def encrypt_recording(self, passphrase: str | None = None) -> bool:
        """File > Encrypt Recording: encrypt the autosave in place, and every later recording
        of this window, under a passphrase asked for twice (kept in memory only)."""
        parent = self._dialog_parent
        if self.mode != "live":
            QMessageBox.information(parent, "Encrypt Recording",
                                    "Only a live session records; use Save As to copy a replayed one.")
            return False
        if self._record_passphrase is not None:
            self.status.emit("This window's recordings are already encrypted", 5000)
            return True
        if passphrase is None:
            passphrase = ask_new_passphrase(parent)
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
                QMessageBox.warning(parent, "Encrypt Recording", error)
                passphrase = None
            self.notes_dock.set_store(NoteStore(recorder.path, passphrase if recorder.encrypted else None))
            if passphrase is None:
                return False
        self._record_passphrase = passphrase
        where = f" ({recorder.path.name})" if recorder is not None else ""
        self.status.emit(f"Recording encrypted{where}: the passphrase is not stored anywhere", 8000)
        return True

    def close_recording(self) -> None:
        """Commit and close the current file; the next event starts a new one (while live)."""
        with self._lock:
            recorder, self.recorder = self.recorder, None
        if recorder is not None:
            recorder.close()

    def shutdown(self) -> None:
        """Stop recording for good and close the file (window close). Safe to call twice."""
        self.mode = "idle"
        self.pump.remove_tap(self._tap)
        self.close_recording()


class _RecordingFailed:
    """Internal: the autosave file could not be created."""

    def __init__(self, message: str) -> None:
        self.message = message


def _prune(folder: Path) -> None:
    # autosaves pile up across runs; keep the newest few dozen
    try:
        files = sorted(folder.glob("*.tds"), key=lambda p: p.stat().st_mtime, reverse=True)
        for old in files[_KEEP_AUTOSAVES:]:
            for suffix in ("", "-wal", "-shm"):
                Path(str(old) + suffix).unlink(missing_ok=True)
    except OSError:
        pass
