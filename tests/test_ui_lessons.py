"""The Lessons dock in the real window on the SQLCipher lab: list, run, card, capture shown, card as a note."""

from __future__ import annotations

from PySide6.QtCore import Qt


def test_lessons_dock_runs_a_lesson_to_its_card_and_adds_it_to_the_notes(lab_window, qtbot):
    win = lab_window
    dock = win.lessons.dock
    titles = [dock.list.item(i).text() for i in range(dock.list.count())]
    assert titles[0] == "TDE cost in DML" and "SecureFiles vs BasicFiles LOBs  — needs Oracle" in titles
    assert dock.select("securefiles-lobs") and not dock.run_button.isEnabled()
    assert "Cannot run here: needs Oracle" in dock.card.toPlainText() and "127 s vs 14 s" in dock.card.toPlainText()

    assert dock.select("block-before-after") and dock.run_button.isEnabled()
    qtbot.mouseClick(dock.run_button, Qt.MouseButton.LeftButton)
    assert dock.cancel_button.isEnabled() and not win.workload_dock.run_button.isEnabled()
    qtbot.waitUntil(lambda: win.lessons.run is None and "block-before-after" in dock._cards, timeout=60000)
    card = dock._cards["block-before-after"]
    assert card.verdict == "same direction", card.text()
    text = dock.card.toPlainText()
    assert "same direction" in text and "Published" in text and "Ours" in text
    assert dock.progress.value() == dock.progress.maximum()
    # the Workload dock showed the lesson's steps: it says the lesson ended, not its last step
    assert win.workload_dock.status.text().startswith("Lesson “Block before and after decryption” done: same direction")
    assert win.workload_dock.progress.value() == 100
    # the page the card speaks of is the one selected in the Captures dock
    cap, _ = win.captures_dock.model.row(win.captures_dock.proxy.mapToSource(
        win.captures_dock.view.currentIndex()).row())
    assert cap.seq == card.figures["seq"]
    # the lesson's time range is the one selected on the timeline (the hotspot and wait docks follow it)
    rng = win.observation.timeline_dock.selected_range()
    assert rng is not None and win.observation.timeline_dock.filter.isChecked()
    assert abs(rng[0] - win.lessons._started["block-before-after"]) < 0.01 and abs(rng[1] - card.ts) < 0.01
    assert dock.add_note.isEnabled()
    qtbot.mouseClick(dock.add_note, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: any("Block before and after decryption" in n.text
                                for n in win.notes.dock.store.all()) if win.notes.dock.store else False,
                    timeout=5000)
