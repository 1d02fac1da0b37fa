"""Replay of a recorded session in a window: no database, no process.

A :class:`~tdescope.ui.views.replay_bar.ReplayPlayer` feeds the recorded events to the
window's event path, so the same docks show them, under a REPLAY banner. The
window reacts to :attr:`ReplayController.entered` and :attr:`~ReplayController.left`
(title, workload and engine docks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from tdescope.app.engines.api import DecodedPage
from tdescope.app.errors import UserError
from tdescope.app.session.feeder import PackedEvents
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta
from tdescope.app.session.notes import NoteStore
from tdescope.ui.docks.notes import NotesDock
from tdescope.ui.gui_thread.event_pump import EventPump
from tdescope.ui.views.replay_bar import ReplayBar, ReplayPlayer

__all__ = ["ReplayController", "engine_for"]


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

    def decode(self, data: bytes, pgno: int = -1, context=None) -> DecodedPage:
        return DecodedPage("unknown", problems=(f"no {self.name} decoder installed here",))

    def glossary(self):
        return {}


def engine_for(meta: SessionMeta):
    """The installed engine that recorded ``meta``, or a stand-in."""
    from tdescope.app.engines import discover_engines

    engines, _ = discover_engines()
    return engines.get(meta.engine) or _RecordedEngine(meta.engine, meta.engine_label)


class ReplayController(QObject):
    """The replayed file of one window, its player and the replay bar.

    The replayed events reach the window's views as a live producer's do, through ``publish``, on the
    GUI thread: the feeder's thread queues each batch on the ``pump`` still packed (unpickling is Python
    work, and the GIL it holds is what the GUI thread would wait for), and the pump's tick unpacks it
    within its budget.

    Parameters
    ----------
    publish : callable
        The window's event path (its live session's ``publish``): receives each replayed event.
    pump : EventPump
        The window's pump: carries the packed batches, and its room bounds the feeder's backlog.
    reset_views : callable
        Clears every view (a seek back replays from the start; what was queued unseen is dropped first).
    notes_dock : NotesDock
        Shows the replayed file's notes.
    remember : callable
        Adds a path to the recent files.
    parent : QWidget
        Parent of the replay bar (the window adds it as a toolbar).
    """

    entered = Signal(str, object)
    """Replay began: the file's path and its :class:`SessionMeta`."""
    left = Signal()
    """Replay ended (File > New): the window is live or idle again."""
    status = Signal(str, int)
    """A status bar message and how long to show it (ms)."""
    headMoved = Signal(object)
    """The play head moved (play, slider, a note): its timestamp, or None when the replay closed."""

    def __init__(self, publish: Callable[[object], None], pump: EventPump, reset_views: Callable[[], None],
                 notes_dock: NotesDock, remember: Callable[[str | Path], None], parent: QWidget) -> None:
        super().__init__(parent)
        self._publish = publish
        self._pump = pump
        pump.subscribe(PackedEvents, self._unpack)
        self._reset_views = reset_views
        self.notes_dock = notes_dock
        self._remember = remember
        self.reader: SessionReader | None = None
        self.player: ReplayPlayer | None = None
        self._passphrase: str | None = None  # of the replayed file, in memory only
        self.replay_bar = ReplayBar(parent)
        self.replay_bar.hide()

    @property
    def replaying(self) -> bool:
        """True while a file is open for replay."""
        return self.reader is not None

    @property
    def passphrase(self) -> str | None:
        """The replayed file's passphrase (in memory only), or None."""
        return self._passphrase

    def enter_replay(self, path: str | Path, passphrase: str | None = None) -> None:
        """Show ``path`` in this window, driven by the replay bar; raises UserError for a bad file.

        ``passphrase`` opens an encrypted file (see :func:`~tdescope.ui.dialogs.passphrase.ask_passphrase`).
        """
        reader = SessionReader(path, passphrase=passphrase)
        self.close_file()
        self.reader = reader
        self._passphrase = passphrase
        name = Path(path).name
        self.entered.emit(str(path), reader.meta)
        self.player = ReplayPlayer(reader, lambda pack: self._pump.put(pack, weight=pack.count), self._reset, self,
                                   passphrase=passphrase, ready=lambda: self._pump.has_room)
        self.player.failed.connect(lambda line: self.status.emit(line, 15000))
        self.player.positionChanged.connect(lambda pos, p=self.player: self.headMoved.emit(p.t0 + pos))
        # and again once the events up to it are fed (on the feeder's thread): the views then hold them
        self.player.caughtUp.connect(lambda p=self.player: self.headMoved.emit(p.t0 + p.position))
        self.replay_bar.attach(self.player, name)
        self.replay_bar.show()
        self.notes_dock.set_store(NoteStore(reader.path, passphrase))
        self._remember(path)
        self.player.seek(0.0)
        self.status.emit(f"Replaying {path}: press Space to play", 10000)

    def _unpack(self, batch: list[PackedEvents]) -> None:
        for pack in batch:
            for event in pack.events():
                self._publish(event)  # numbered and summarised, then queued for the views' next tick

    def _reset(self) -> None:
        self._pump.discard()  # what was fed before the seek back, unseen: the views are cleared and fed again
        self._reset_views()

    def note_store(self) -> NoteStore | None:
        """Where notes about the replayed file go, or None when not replaying."""
        return NoteStore(self.reader.path, self._passphrase) if self.reader is not None else None

    def play_head(self) -> float | None:
        """The player's position as a timestamp, or None."""
        return self.player.t0 + self.player.position if self.player is not None else None

    def seek_to(self, ts: float, then: Callable[[], None] | None = None) -> None:
        """Move the play head to timestamp ``ts`` (a note's moment); ``then`` runs once its events are fed
        (at once when nothing is replayed)."""
        if self.player is not None:
            self.player.seek(ts - self.player.t0)
            if then is not None:
                self.player.when_fed(then)
        elif then is not None:
            then()

    def close_file(self) -> None:
        """Stop the player and close the file (the replay bar stays as it is)."""
        if self.player is not None:
            self.player.stop()
            self.player = None
        if self.reader is not None:
            self.reader.close()
            self.reader = None
        self._passphrase = None
        self.replay_bar.attach(None)
        self.notes_dock.set_store(None)
        self.headMoved.emit(None)

    def leave(self) -> None:
        """Close the file and hide the replay bar; announces :attr:`left`."""
        self.close_file()
        self.replay_bar.hide()
        self.left.emit()
