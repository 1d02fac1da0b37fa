"""Notes in the window: the Notes dock, what a new note is about, and the Edit menu."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QWidget

from tdescope.app.session.notes import NoteKind, NoteStore, NoteTarget
from tdescope.ui.docks.captures import CapturesDock
from tdescope.ui.docks.notes import NotesDock
from tdescope.ui.views.pageview import PageView
from tdescope.ui.docks.timeline import TimelineDock

__all__ = ["NotesController"]


class NotesController(QObject):
    """The Notes dock of one window and what its notes can point at.

    Parameters
    ----------
    captures_dock, page_view, timeline_dock
        Their selection (a capture, its bytes, a time range) is what a new note is about.
    store : callable
        Returns the NoteStore of the window's session file, creating the file if need be.
    play_head : callable
        Returns the replay's position as a timestamp, or None when not replaying.
    seek_to : callable
        ``seek_to(ts, then)`` moves the replay to a timestamp (a double-clicked note's moment) and runs
        ``then`` once the views hold what happened up to it.
    when_shown : callable
        ``when_shown(fn)`` runs ``fn`` once the selected capture is in the page view.
    parent : QWidget
        Parent of the dock (the window).
    """

    def __init__(self, captures_dock: CapturesDock, page_view: PageView, timeline_dock: TimelineDock,
                 store: Callable[[], NoteStore | None], play_head: Callable[[], float | None],
                 seek_to: Callable[[float, Callable[[], None]], None],
                 when_shown: Callable[[Callable[[], None]], None], parent: QWidget) -> None:
        super().__init__(parent)
        self._when_shown = when_shown  # the page view shows a selected capture once it is decoded
        self.captures_dock = captures_dock
        self.page_view = page_view
        self.timeline_dock = timeline_dock
        self._play_head = play_head
        self._seek_to = seek_to
        self.dock = NotesDock(self.targets, store, parent)
        self.dock.noteActivated.connect(self._on_note_activated)
        self.dock.notesChanged.connect(timeline_dock.set_notes)

    def fill_menu(self, menu: QMenu) -> None:
        """Undo, redo and the note actions, in ``menu`` (the Edit menu)."""
        owner = self
        undo = self.dock.undo_stack.createUndoAction(owner, "&Undo")
        undo.setShortcut(QKeySequence("Ctrl+Z"))
        redo = self.dock.undo_stack.createRedoAction(owner, "&Redo")
        redo.setShortcut(QKeySequence("Ctrl+Shift+Z"))
        menu.addActions([undo, redo])
        menu.addSeparator()
        menu.addAction(QAction("&Add note…", owner, shortcut="Ctrl+N", triggered=self.dock.add_interactive))
        menu.addAction(QAction("&Edit note…", owner, triggered=self.dock.edit_interactive))
        menu.addAction(QAction("&Delete note", owner, triggered=self.dock.delete_selected))

    def targets(self) -> list[NoteTarget]:
        """What a new note could be about right now, most specific first."""
        out: list[NoteTarget] = []
        captures = self.captures_dock
        index = captures.view.currentIndex()
        if index.isValid():
            cap, _ = captures.model.row(captures.proxy.mapToSource(index).row())
            for side, view in (("after", self.page_view.after_view), ("before", self.page_view.before_view)):
                start, end = view.selection()
                if end - start > 1:
                    out.append(NoteTarget(NoteKind.BYTES, ts=cap.ts, seq=cap.seq, start=start, end=end, side=side))
            out.append(NoteTarget(NoteKind.CAPTURE, ts=cap.ts, seq=cap.seq))
        rng = self.timeline_dock.selected_range()
        if rng:
            out.append(NoteTarget(NoteKind.RANGE, ts=rng[0], ts_end=rng[1]))
        at = self._play_head()
        if at is not None:
            out.append(NoteTarget(NoteKind.RANGE, ts=at, ts_end=at))
        return out

    def _on_note_activated(self, note) -> None:
        """Go to what the note is about: the replay just past its moment, its capture selected,
        its bytes selected in the page view."""
        t = note.target
        if t.ts is not None:  # past it, then (once its events are fed) the capture is in the views
            self._seek_to(max(t.ts, t.ts_end or t.ts) + 0.001, lambda: self._go_to(t))
        else:
            self._go_to(t)

    def _go_to(self, t) -> None:
        """Select what the note's target names in views that hold it."""
        if t.seq is not None and self.captures_dock.select_capture(t.ts, t.seq) and t.kind is NoteKind.BYTES:
            view = self.page_view.before_view if t.side == "before" else self.page_view.after_view
            if t.start is not None and t.end is not None:
                self._when_shown(lambda: (view.set_selection(t.start, t.end), view.setFocus()))
        if t.kind is NoteKind.RANGE and t.ts is not None and t.ts_end is not None and t.ts_end > t.ts:
            self.timeline_dock.set_range(t.ts, t.ts_end)
