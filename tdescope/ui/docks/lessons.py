"""The Lessons dock: the catalogue for this engine, Run/Cancel with progress, and the result card.

Lessons this engine cannot run stay in the list, greyed, with the reason ("needs Oracle");
selecting one shows its question and published figures all the same.
"""

from __future__ import annotations

import html

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QColor
from PySide6.QtWidgets import (
    QCheckBox,
    QDockWidget,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QListWidgetItem,
    QProgressBar,
    QPushButton,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.events import LessonCard, LessonVerdict
from tdescope.app.lessons.catalogue import Lesson

__all__ = ["LessonsDock", "card_html"]

#: verdict -> colour of its badge
_VERDICT_COLOURS = {LessonVerdict.SAME: "#1b7f3b", LessonVerdict.DIFFERENT: "#b3261e",
                    LessonVerdict.INCONCLUSIVE: "#9a6700", LessonVerdict.NO_COMPARISON: "#555555",
                    LessonVerdict.CANNOT_RUN: "#555555", LessonVerdict.CANCELLED: "#555555",
                    LessonVerdict.FAILED: "#b3261e"}


def _items(lines) -> str:
    return "".join(f"<li>{html.escape(line)}</li>" for line in lines)


def lesson_html(lesson: Lesson, why_not: str) -> str:
    """A lesson before it runs: question, published figures and source, steps, expected observation."""
    parts = [f"<h3>{html.escape(lesson.title)}</h3><p><b>{html.escape(lesson.question)}</b></p>"]
    if why_not:
        parts.append(f"<p style='color:#b3261e'><b>Cannot run here: {html.escape(why_not)}</b></p>")
    parts.append(f"<p><b>Published</b> <small>({html.escape(lesson.source())})</small></p><ul>"
                 + _items(f"{p.label}: {p.text}" for p in lesson.published) + "</ul>")
    parts.append("<p><b>Steps</b></p><ol>" + _items(lesson.steps) + "</ol>")
    parts.append(f"<p><b>Expected:</b> {html.escape(lesson.expected)}</p>")
    return "".join(parts)


def card_html(card: LessonCard) -> str:
    """A result card: published vs ours side by side, the verdict badge, the evidence."""
    colour = _VERDICT_COLOURS.get(card.verdict, "#555555")
    rows = max(len(card.published), len(card.ours), 1)
    table = "".join(
        f"<tr><td valign='top'>{html.escape(card.published[i]) if i < len(card.published) else ''}</td>"
        f"<td valign='top'>{html.escape(card.ours[i]) if i < len(card.ours) else ''}</td></tr>" for i in range(rows))
    parts = [f"<h3>{html.escape(card.title)} <small>on {html.escape(card.engine)}</small></h3>",
             f"<p>{html.escape(card.question)}</p>",
             f"<p><span style='background:{colour};color:white;padding:2px 6px'>&nbsp;{html.escape(card.verdict)}"
             f"&nbsp;</span> {html.escape(card.verdict_text)}</p>",
             "<table border='1' cellspacing='0' cellpadding='4' width='100%'>"
             "<tr><th align='left'>Published</th><th align='left'>Ours</th></tr>" + table + "</table>"]
    if card.evidence:
        parts.append("<p><b>Evidence</b></p><ul>" + _items(card.evidence) + "</ul>")
    if card.note:
        parts.append(f"<p><i>{html.escape(card.note)}</i></p>")
    parts.append(f"<p><small>Source: {html.escape(card.source)}</small></p>")
    return "".join(parts)


class LessonsDock(QDockWidget):
    """The catalogue, Run/Cancel, a progress bar and the card of the selected lesson's last run."""

    runRequested = Signal(str, bool)
    """Run the lesson with this id (quick parameters when True)."""
    cancelRequested = Signal()
    """Cancel the running lesson."""
    addToNotesRequested = Signal(object)
    """Add this :class:`LessonCard` to the session's notes."""

    def __init__(self, parent=None) -> None:
        super().__init__("Lessons", parent)
        self.setObjectName("lessons")
        self._lessons: dict[str, Lesson] = {}
        self._why: dict[str, str] = {}
        self._cards: dict[str, LessonCard] = {}
        self._blocked = ""  # why no lesson can start now (a workload runs, a replay), or ""
        body = QWidget()
        layout = QVBoxLayout(body)
        self.list = QListWidget()
        self.list.setMaximumHeight(130)
        layout.addWidget(self.list)
        row = QHBoxLayout()
        self.run_button = QPushButton("Run lesson")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.quick = QCheckBox("Quick")
        self.quick.setToolTip("Small parameters: seconds instead of minutes, noisier figures")
        self.quick.setChecked(True)
        for w in (self.run_button, self.cancel_button, self.quick):
            row.addWidget(w)
        row.addStretch(1)
        layout.addLayout(row)
        self.progress = QProgressBar()
        self.progress.setTextVisible(True)
        self.progress.setFormat("%v / %m steps")
        self.status = QLabel("")
        self.status.setWordWrap(True)
        layout.addWidget(self.progress)
        layout.addWidget(self.status)
        self.card = QTextBrowser()
        layout.addWidget(self.card, 1)
        self.add_note = QPushButton("Add card to notes")
        self.add_note.setEnabled(False)
        layout.addWidget(self.add_note)
        self.setWidget(body)
        self.list.currentItemChanged.connect(lambda _cur, _prev: self._show_selected())
        self.run_button.clicked.connect(self._on_run)
        self.cancel_button.clicked.connect(self.cancelRequested)
        self.add_note.clicked.connect(self._on_add_note)

    def set_lessons(self, lessons: tuple[Lesson, ...], engine: str) -> None:
        """List ``lessons``: the ones ``engine`` runs first, the others greyed with their reason."""
        self.list.clear()
        self._lessons = {lesson.id: lesson for lesson in lessons}
        self._why = {lesson.id: lesson.why_not(engine) for lesson in lessons}
        ordered = sorted(lessons, key=lambda lesson: bool(self._why[lesson.id]))
        for lesson in ordered:
            why = self._why[lesson.id]
            item = QListWidgetItem(lesson.title + (f"  — {why}" if why else ""))
            item.setData(Qt.ItemDataRole.UserRole, lesson.id)
            if why:
                item.setForeground(QColor("#888888"))
            self.list.addItem(item)
        self.setWindowTitle("Lessons")  # short: it is one tab among six in a compact layout
        self.list.setToolTip(f"Lessons of the source documents; greyed ones cannot run on {engine} here")
        if self.list.count():
            self.list.setCurrentRow(0)

    def selected(self) -> str | None:
        """The selected lesson's id."""
        item = self.list.currentItem()
        return item.data(Qt.ItemDataRole.UserRole) if item is not None else None

    def select(self, lesson_id: str) -> bool:
        """Select the lesson ``lesson_id``; True when listed."""
        for i in range(self.list.count()):
            if self.list.item(i).data(Qt.ItemDataRole.UserRole) == lesson_id:
                self.list.setCurrentRow(i)
                return True
        return False

    def set_running(self, running: bool) -> None:
        """Enable Cancel while a lesson runs, Run otherwise."""
        self.cancel_button.setEnabled(running)
        self._show_selected(running)
        if running:
            self.progress.setValue(0)

    def set_blocked(self, why: str) -> None:
        """``why`` no lesson can start now ("" when one can): Run lesson is disabled and says so."""
        self._blocked = why
        self.run_button.setToolTip(f"Cannot run now: {why}" if why else "Run the selected lesson")
        self._show_selected()

    def show_step(self, done: int, total: int, text: str) -> None:
        """The lesson reached step ``done`` of ``total``."""
        self.progress.setMaximum(max(total, 1))
        self.progress.setValue(min(done, total))
        self.status.setText(text)

    def show_card(self, card: LessonCard) -> None:
        """Keep ``card`` as its lesson's latest and show it when that lesson is selected."""
        self._cards[card.lesson] = card
        if card.verdict not in (LessonVerdict.CANCELLED, LessonVerdict.FAILED):
            self.progress.setValue(self.progress.maximum())
        self.status.setText(f"{card.title}: {card.verdict}")
        if self.selected() != card.lesson:
            self.select(card.lesson)
        self._show_selected()

    def _show_selected(self, running: bool | None = None) -> None:
        lesson_id = self.selected()
        running = self.cancel_button.isEnabled() if running is None else running
        lesson = self._lessons.get(lesson_id) if lesson_id else None
        self.run_button.setEnabled(lesson is not None and not self._why.get(lesson_id, "") and not running
                                   and not self._blocked)
        card = self._cards.get(lesson_id) if lesson_id else None
        self.add_note.setEnabled(card is not None)
        if card is not None:
            self.card.setHtml(card_html(card))
        elif lesson is not None:
            self.card.setHtml(lesson_html(lesson, self._why.get(lesson_id, "")))

    def _on_run(self) -> None:
        lesson_id = self.selected()
        if lesson_id:
            self.runRequested.emit(lesson_id, self.quick.isChecked())

    def _on_add_note(self) -> None:
        card = self._cards.get(self.selected() or "")
        if card is not None:
            self.addToNotesRequested.emit(card)
