"""Autosave recording of a live window: every event published to its live session goes to a session file.

A live window records every event published to its
:class:`~tdescope.app.session.live.LiveSession` to an autosave file under the
user's data folder (``$XDG_DATA_HOME/tdescope/sessions``), which the hub opens on
demand at the first event (:meth:`RecordingController._start_recording`). File >
Encrypt Recording encrypts it in place, and every later recording of the window,
under a passphrase kept in memory only.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import time
from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Qt, Signal
from PySide6.QtWidgets import QApplication, QMessageBox, QWidget

from tdescope.app.engines.api import Engine, EngineSession, Inventory, PageDecoder
from tdescope.app.errors import UserError
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.live import LiveSession
from tdescope.app.remote.host_session import host_label
from tdescope.app.session.meta import SessionMeta, decoder_catalog, keeps_plaintext
from tdescope.app.session.notes import NoteStore
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.docks.notes import NotesDock
from tdescope.ui.dialogs.passphrase import ask_new_passphrase

__all__ = ["RecordingMode", "RecordingController", "autosave_dir"]


class RecordingMode(enum.StrEnum):
    """What a window does with its session file: records it live, replays one, or neither."""

    LIVE = "live"
    REPLAY = "replay"
    IDLE = "idle"  #: replaying (the recorder's side), closed, or cannot record here

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
    live : LiveSession
        The window's hub: every event published to it is recorded, into an autosave it
        opens on demand with :meth:`_start_recording`.
    pump : EventPump
        Brings "could not record" to the GUI thread.
    notes_dock : NotesDock
        Gets the recording's note store once the file exists.
    remember : callable
        Adds a path to the recent files.
    dialog_parent : QWidget
        Parent of the passphrase and warning dialogs.
    """

    recordingStarted = Signal(str)
    """Emitted with the autosave path once recording begins (handled queued, on the GUI thread)."""
    status = Signal(str, int)
    """A status bar message and how long to show it (ms)."""

    def __init__(self, engine: Engine, session: Callable[[], EngineSession | None], live: LiveSession,
                 pump: EventPump, notes_dock: NotesDock, remember: Callable[[str | Path], None],
                 dialog_parent: QWidget) -> None:
        super().__init__(dialog_parent)
        self.engine = engine
        self._session = session
        self.live = live
        self.pump = pump
        self.notes_dock = notes_dock
        self._remember = remember
        self._dialog_parent = dialog_parent
        self.mode = RecordingMode.LIVE
        self._inventory: Inventory | None = None
        self.decoder: PageDecoder | None = None  # the window's: its catalog goes into the metadata
        self._record_passphrase: str | None = None  # encrypts this window's recordings, in memory only
        # queued even from the GUI thread: the hub attaches the recorder once _start_recording returns
        self.recordingStarted.connect(self._on_recording_started, Qt.ConnectionType.QueuedConnection)
        pump.subscribe(_RecordingFailed, lambda b: self.status.emit(
            f"Not recording this session: {b[-1].message}", 15000))
        live.record_on_demand(self._start_recording)

    # -- live recording (the autosave opens on a producer thread, on the first event) ------
    @property
    def recorder(self) -> SessionRecorder | None:
        """The autosave this live window records into, if it has begun (the hub's recorder)."""
        return self.live.recorder

    def set_inventory(self, inventory: Inventory, decoder: PageDecoder | None = None) -> None:
        """The engine session's inventory (once connected): stored in the recording's metadata. A session
        on another host, or whose decrypted pages the file may not keep, starts a new file.

        ``decoder``, the window's: its catalog is kept there too (and again when the file closes), so
        that a report of the file, made later with no server, decodes captures as the window did.
        """
        self._inventory = inventory
        if decoder is not None:
            self.decoder = decoder
        recorder, session = self.recorder, self._session()
        if recorder is not None and (recorder.keep_plaintext != keeps_plaintext(session)
                                     or recorder.meta.params.get("host", "") != host_label(session)):
            # another kind of target (a lab's, then a host's process): a file keeps one target's facts and
            # plaintext rule, so this one ends and the next event starts a new one
            self.close_recording()
        elif recorder is not None:
            recorder.update_meta(self._meta())

    def _meta(self) -> SessionMeta:
        engine = self.engine
        session = self._session()
        params = {"target_pid": session.server_pid()} if session is not None else {}
        if host_label(session):  # as `record --ssh` says it: the machine facts are this one's, the target is there
            params["host"] = host_label(session)
        rows = self._inventory.rows if self._inventory is not None else ()
        return SessionMeta.collect(engine.name, engine.label, inventory=rows, params=params,
                                   decoder=decoder_catalog(self.decoder))

    def _start_recording(self) -> SessionRecorder | None:
        # called by the LiveSession, one thread at a time, when an event finds no recorder
        if self.mode is not RecordingMode.LIVE:
            return None
        folder = autosave_dir()
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path = folder / f"{stamp}-{self.engine.name}.tds"
        n = 1
        while path.exists():
            n += 1
            path = folder / f"{stamp}-{self.engine.name}-{n}.tds"
        try:
            recorder = SessionRecorder(path, self._meta(), passphrase=self._record_passphrase,
                                       keep_plaintext=keeps_plaintext(self._session()))
        except UserError as exc:
            self.mode = RecordingMode.IDLE  # cannot record here: say so once, keep working
            self.pump.put(_RecordingFailed(str(exc)))
            return None
        self.recordingStarted.emit(str(path))
        _prune(folder)
        return recorder

    def _on_recording_started(self, path: str) -> None:
        self._remember(path)
        if self.notes_dock.store is None and self.recorder is not None and str(self.recorder.path) == path:
            self.notes_dock.set_store(NoteStore(path, self._record_passphrase))
        how = "encrypted " if self._record_passphrase else ""
        self.status.emit(f"Recording {how}to {path}", 5000)

    # -- what the other controllers ask ---------------------------------------------------
    def note_store(self) -> NoteStore | None:
        """Where notes of this live window go (the recording, started if need be); None when idle."""
        if self.mode is not RecordingMode.LIVE:
            return None
        recorder = self.live.ensure_recorder()
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
        if self.mode is not RecordingMode.LIVE:
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
        """Detach the recorder from the hub, commit and close it; the next event starts a new file (while live)."""
        recorder = self.live.detach()
        if recorder is not None:
            # the decoder learnt tables since the file began (MariaDB reads the dictionary for a new index)
            catalog = decoder_catalog(self.decoder)
            if catalog != recorder.meta.decoder:
                recorder.update_meta(dataclasses.replace(recorder.meta, decoder=catalog))
            recorder.close()

    def shutdown(self) -> None:
        """Stop recording for good and close the file (window close). Safe to call twice."""
        self.mode = RecordingMode.IDLE
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
