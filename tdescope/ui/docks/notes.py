"""The Notes dock: a session's notes in time order; add, edit, delete, with undo and redo.

Each change is a QUndoCommand on the dock's :attr:`NotesDock.undo_stack` that
writes through to the session file's :class:`~tdescope.app.session.notes.NoteStore`,
so undo of a delete brings the note back under its old id.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QUndoCommand, QUndoStack
from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QTreeWidget,
    QTreeWidgetItem,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.session.notes import Note, NoteKind, NoteStore, NoteTarget

__all__ = ["NotesDock", "NoteDialog"]


class NoteDialog(QDialog):
    """Ask for a note's text and, for a new note, what it is about."""

    def __init__(self, targets: list[NoteTarget], text: str = "", parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Note" if not targets else "New note")
        self.targets = targets
        self.about = QComboBox()
        for t in targets:
            self.about.addItem(t.describe())
        self.edit = QPlainTextEdit(text)
        self.edit.setPlaceholderText("What is worth remembering here?")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        lay = QVBoxLayout(self)
        if targets:
            lay.addWidget(QLabel("About"))
            lay.addWidget(self.about)
        lay.addWidget(self.edit, 1)
        lay.addWidget(buttons)
        self.resize(460, 240)

    def target(self) -> NoteTarget:
        """The chosen target (free when none was offered)."""
        return self.targets[self.about.currentIndex()] if self.targets else NoteTarget()

    def text(self) -> str:
        """The note's text, trimmed."""
        return self.edit.toPlainText().strip()


class _AddNote(QUndoCommand):
    def __init__(self, dock: "NotesDock", target: NoteTarget, text: str) -> None:
        super().__init__(f"add note ({target.describe()})")
        self.dock, self.target, self.text = dock, target, text
        self.note_id: int | None = None
        self.created: float | None = None

    def redo(self) -> None:
        note = self.dock.store.add(self.target, self.text, note_id=self.note_id, created=self.created)
        self.note_id, self.created = note.id, note.created
        self.dock.reload()

    def undo(self) -> None:
        self.dock.store.delete(self.note_id)
        self.dock.reload()


class _EditNote(QUndoCommand):
    def __init__(self, dock: "NotesDock", note: Note, text: str) -> None:
        super().__init__("edit note")
        self.dock, self.note_id, self.old, self.new = dock, note.id, note.text, text

    def redo(self) -> None:
        self.dock.store.edit(self.note_id, self.new)
        self.dock.reload()

    def undo(self) -> None:
        self.dock.store.edit(self.note_id, self.old)
        self.dock.reload()


class _DeleteNote(QUndoCommand):
    def __init__(self, dock: "NotesDock", note: Note) -> None:
        super().__init__("delete note")
        self.dock, self.note = dock, note

    def redo(self) -> None:
        self.dock.store.delete(self.note.id)
        self.dock.reload()

    def undo(self) -> None:
        self.dock.store.add(self.note.target, self.note.text, note_id=self.note.id, created=self.note.created)
        self.dock.reload()


class NotesDock(QDockWidget):
    """Lists notes; Add (Ctrl+N), Edit, Delete; undo/redo on :attr:`undo_stack`.

    Parameters
    ----------
    targets : callable
        Returns what a new note could be about right now (selected capture,
        byte range, time range...), most specific first; free is always added.
    ensure_store : callable
        Returns the NoteStore to write to, creating the session file if needed.
    """

    notesChanged = Signal(list)
    noteAdded = Signal(str)
    """A line for the status bar once a note is stored."""
    """Emitted with the notes (time order) after every change."""
    noteActivated = Signal(object)
    """Emitted with a Note when the user clicks it, double-clicks it or presses Enter on it (go to its
    moment)."""

    def __init__(self, targets: Callable[[], list[NoteTarget]], ensure_store: Callable[[], NoteStore | None],
                 parent=None) -> None:
        super().__init__("Notes", parent)
        self.setObjectName("NotesDock")
        self._targets = targets
        self._ensure_store = ensure_store
        self.store: NoteStore | None = None
        self.notes: list[Note] = []
        self.undo_stack = QUndoStack(self)
        self.tree = QTreeWidget()
        self.tree.setHeaderLabels(["Time", "About", "Note"])
        self.tree.setRootIsDecorated(False)
        self.tree.setAlternatingRowColors(True)
        self.tree.setWordWrap(True)
        self.tree.header().setStretchLastSection(True)
        # a click (or Enter) on a note goes to its moment; a double-click is a click too
        self.tree.itemClicked.connect(self._on_activated)
        self.tree.itemActivated.connect(self._on_activated)
        self.add_button = QPushButton("Add…")
        self.add_button.setToolTip("Add a note on the selection, a time range, or free-standing (Ctrl+N)")
        self.add_button.clicked.connect(self.add_interactive)
        self.edit_button = QPushButton("Edit…")
        self.edit_button.clicked.connect(self.edit_interactive)
        self.delete_button = QPushButton("Delete")
        self.delete_button.clicked.connect(self.delete_selected)
        self.empty = QLabel("No notes yet. Select a capture, bytes in the page view or a time range, "
                            "then press Ctrl+N.")
        self.empty.setWordWrap(True)
        self.empty.setStyleSheet("color: gray; padding: 6px;")
        buttons = QHBoxLayout()
        for b in (self.add_button, self.edit_button, self.delete_button):
            buttons.addWidget(b)
        buttons.addStretch(1)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.empty)
        lay.addWidget(self.tree, 1)
        lay.addLayout(buttons)
        self.setWidget(body)
        self.reload()

    # -- store -------------------------------------------------------------------
    def set_store(self, store: NoteStore | None) -> None:
        """Show the notes of ``store`` (None: no session file yet); clears undo history."""
        self.store = store
        self.undo_stack.clear()
        self.reload()

    def reload(self) -> None:
        """Re-read the notes and refill the list."""
        self.notes = self.store.all() if self.store is not None else []
        current = self.selected_note()
        self.tree.clear()
        for note in self.notes:
            item = QTreeWidgetItem([time.strftime("%H:%M:%S", time.localtime(note.when)), note.target.describe(),
                                    note.text])
            item.setData(0, Qt.ItemDataRole.UserRole, note.id)
            item.setToolTip(2, note.text)
            self.tree.addTopLevelItem(item)
            if current is not None and note.id == current.id:
                self.tree.setCurrentItem(item)
        self.tree.resizeColumnToContents(0)
        self.tree.resizeColumnToContents(1)
        self.empty.setVisible(not self.notes)
        self.edit_button.setEnabled(bool(self.notes))
        self.delete_button.setEnabled(bool(self.notes))
        self.notesChanged.emit(list(self.notes))

    def selected_note(self) -> Note | None:
        """The note of the current row, or None."""
        item = self.tree.currentItem() if hasattr(self, "tree") else None
        if item is None:
            return None
        note_id = item.data(0, Qt.ItemDataRole.UserRole)
        return next((n for n in self.notes if n.id == note_id), None)

    # -- changes (undoable) ----------------------------------------------------------
    def add_note(self, target: NoteTarget, text: str) -> bool:
        """Add a note; False when there is nowhere to store it."""
        if self.store is None:
            self.set_store(self._ensure_store())
        if self.store is None or not text:
            return False
        self.undo_stack.push(_AddNote(self, target, text))
        # feedback: the Notes dock comes forward with the new note selected, and the status bar says so
        added = max(self.notes, key=lambda n: n.id or 0, default=None)
        for i in range(self.tree.topLevelItemCount()):
            if added is not None and self.tree.topLevelItem(i).data(0, Qt.ItemDataRole.UserRole) == added.id:
                self.tree.setCurrentItem(self.tree.topLevelItem(i))
        self.show()
        self.raise_()
        self.noteAdded.emit(f"Note added on {target.describe()} (Ctrl+Z undoes it)")
        return True

    def edit_note(self, note: Note, text: str) -> None:
        """Change ``note``'s text."""
        if self.store is not None and text and text != note.text:
            self.undo_stack.push(_EditNote(self, note, text))

    def delete_note(self, note: Note) -> None:
        """Remove ``note``."""
        if self.store is not None:
            self.undo_stack.push(_DeleteNote(self, note))

    # -- interactive -----------------------------------------------------------------
    def add_interactive(self) -> None:
        """Ask what the note is about and its text (Ctrl+N)."""
        targets = [*self._targets(), NoteTarget(NoteKind.FREE)]
        dialog = NoteDialog(targets, parent=self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.add_note(dialog.target(), dialog.text())

    def edit_interactive(self) -> None:
        """Edit the selected note's text."""
        note = self.selected_note()
        if note is None:
            return
        dialog = NoteDialog([], note.text, parent=self)
        if dialog.exec() == QDialog.DialogCode.Accepted:
            self.edit_note(note, dialog.text())

    def delete_selected(self) -> None:
        """Delete the selected note (undo brings it back)."""
        note = self.selected_note()
        if note is not None:
            self.delete_note(note)

    def _on_activated(self, item: QTreeWidgetItem, _col: int) -> None:
        note_id = item.data(0, Qt.ItemDataRole.UserRole)
        note = next((n for n in self.notes if n.id == note_id), None)
        if note is not None:
            self.noteActivated.emit(note)
