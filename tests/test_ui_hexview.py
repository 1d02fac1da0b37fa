"""Page view widgets: HexView, EntropyStrip and PageView, offscreen with pytest-qt."""

from __future__ import annotations

import math
import os
import sys
from collections import Counter

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

if sys.version_info < (3, 12):
    # PySide6 6.12 (abi3 wheel) returns None from void methods without a new reference;
    # on Python < 3.12 None is not immortal, so a few thousand calls deallocate it and
    # abort the interpreter. Pin None until the app carries its own guard.
    import ctypes

    ctypes.c_ssize_t.from_address(id(None)).value += 1 << 40

import numpy as np  # noqa: E402
import pytest  # noqa: E402
from PySide6.QtCore import QPoint, Qt  # noqa: E402
from PySide6.QtGui import QGuiApplication, QImage  # noqa: E402

from tdescope.app.engines.api import DecodedField, DecodedPage  # noqa: E402
from tdescope.ui.views.entropy_strip import EntropyStrip, entropy_color  # noqa: E402
from tdescope.ui.views.hexview import HexView  # noqa: E402
from tdescope.ui.views.pageview import SPAN_ROLE, PageView  # noqa: E402


def chunk_entropy(data: bytes, chunk: int = 256) -> list[float]:
    """Local stand-in for tdescope.app.probe.entropy.chunk_entropy."""
    out = []
    for i in range(0, len(data), chunk):
        c = data[i : i + chunk]
        out.append(-sum(k / len(c) * math.log2(k / len(c)) for k in Counter(c).values()))
    return out


def make_page(ncells: int = 4, size: int = 1024) -> tuple[bytes, bytes, DecodedPage]:
    """A tiny table-leaf-like page: header, pointers, cells of (rowid, name)."""
    page = bytearray(size)
    cells, pos = [], size
    for i in range(ncells):
        text = f"row-{i}".encode()
        pos -= 2 + len(text)
        page[pos : pos + 2 + len(text)] = bytes([i, len(text)]) + text
        kids = (
            DecodedField("rowid", pos, pos + 1, str(i)),
            DecodedField("length", pos + 1, pos + 2, str(len(text))),
            DecodedField("name", pos + 2, pos + 2 + len(text), text.decode()),
        )
        cells.append(DecodedField(f"cell {i}", pos, pos + 2 + len(text), f"rowid {i}", kids))
    fields = (
        DecodedField("page header", 0, 8, "table leaf", (DecodedField("cell count", 3, 5, str(ncells)),)),
        *reversed(cells),
    )
    after = bytes(page)
    before = np.random.default_rng(7).integers(0, 256, size, dtype=np.uint8).tobytes()
    return before, after, DecodedPage("table leaf", fields, ncells, problems=("freeblock chain loops",))


@pytest.fixture
def hexview(qtbot):
    view = HexView()
    qtbot.addWidget(view)
    view.resize(640, 320)
    view.show()
    return view


def red_pixels(img: QImage, rect) -> int:
    """Pixels in ``rect`` that are clearly red (diff text)."""
    n = 0
    for x in range(rect.left(), rect.right() + 1):
        for y in range(rect.top(), rect.bottom() + 1):
            c = img.pixelColor(x, y)
            n += c.red() > c.green() + 60 and c.red() > c.blue() + 60
    return n


def test_scroll_range_counts_rows(hexview):
    hexview.set_data(bytes(4096))
    assert hexview.row_count() == 256
    assert hexview.verticalScrollBar().maximum() == 256 - hexview.visible_rows()
    hexview.set_data(bytes(65536))
    assert hexview.row_count() == 4096
    assert hexview.verticalScrollBar().maximum() == 4096 - hexview.visible_rows()
    hexview.set_data(bytes(17))
    assert hexview.row_count() == 2 and hexview.verticalScrollBar().maximum() == 0


@pytest.mark.parametrize("offset", [0, 7, 8, 15, 16 + 9, 4095])
def test_click_on_byte_emits_its_offset(qtbot, hexview, offset):
    hexview.set_data(bytes(range(256)) * 16)
    hexview.scroll_to(offset)
    for rect in (hexview.byte_rect(offset), hexview.ascii_rect(offset)):
        with qtbot.waitSignal(hexview.offsetClicked) as sig:
            qtbot.mouseClick(hexview.viewport(), Qt.MouseButton.LeftButton, pos=rect.center())
        assert sig.args == [offset]
    assert hexview.cursor_offset() == offset


def test_click_outside_bytes_emits_nothing(qtbot, hexview):
    hexview.set_data(bytes(20))
    with qtbot.assertNotEmitted(hexview.offsetClicked):
        qtbot.mouseClick(hexview.viewport(), Qt.MouseButton.LeftButton, pos=QPoint(5, 5))  # header row
        qtbot.mouseClick(hexview.viewport(), Qt.MouseButton.LeftButton, pos=hexview.byte_rect(25).center())


def test_drag_selects_span(qtbot, hexview):
    hexview.set_data(bytes(256))
    vp = hexview.viewport()
    qtbot.mousePress(vp, Qt.MouseButton.LeftButton, pos=hexview.byte_rect(10).center())
    with qtbot.waitSignal(hexview.selectionChanged) as sig:
        qtbot.mouseMove(vp, hexview.byte_rect(40).center())
    qtbot.mouseRelease(vp, Qt.MouseButton.LeftButton, pos=hexview.byte_rect(40).center())
    assert sig.args == [10, 41]
    assert hexview.selection() == (10, 41)


def test_keyboard_moves_cursor_and_ctrl_c_copies_hex(qtbot, hexview):
    hexview.set_data(bytes(range(256)))
    hexview.setFocus()
    qtbot.mouseClick(hexview.viewport(), Qt.MouseButton.LeftButton, pos=hexview.byte_rect(0x20).center())
    qtbot.keyClick(hexview, Qt.Key.Key_Down)
    assert hexview.cursor_offset() == 0x30
    qtbot.keyClick(hexview, Qt.Key.Key_End)
    assert hexview.cursor_offset() == 0x3F
    qtbot.keyClick(hexview, Qt.Key.Key_Home)
    for _ in range(3):
        qtbot.keyClick(hexview, Qt.Key.Key_Right, Qt.KeyboardModifier.ShiftModifier)
    assert hexview.selection() == (0x30, 0x34)
    qtbot.keyClick(hexview, Qt.Key.Key_C, Qt.KeyboardModifier.ControlModifier)
    assert QGuiApplication.clipboard().text() == "30 31 32 33"
    qtbot.keyClick(hexview, Qt.Key.Key_End, Qt.KeyboardModifier.ControlModifier)
    assert hexview.cursor_offset() == 255
    qtbot.keyClick(hexview, Qt.Key.Key_PageUp)
    assert hexview.cursor_offset() == max(0, 255 - 16 * hexview.visible_rows())


@pytest.mark.parametrize("as_numpy", [False, True])
def test_diff_mask_paints_differing_bytes_red(hexview, as_numpy):
    hexview.set_data(bytes([0x41]) * 64)
    mask = bytes(1 if i in (3, 20) else 0 for i in range(64))
    hexview.set_diff(np.frombuffer(mask, np.uint8).astype(bool) if as_numpy else mask)
    img = hexview.viewport().grab().toImage()
    assert red_pixels(img, hexview.byte_rect(3)) > 0
    assert red_pixels(img, hexview.byte_rect(20)) > 0
    assert red_pixels(img, hexview.byte_rect(4)) == 0
    hexview.set_diff(None)
    assert red_pixels(hexview.viewport().grab().toImage(), hexview.byte_rect(3)) == 0


def test_empty_view_paints_placeholder(hexview):
    hexview.set_placeholder("No capture selected")
    img = hexview.viewport().grab().toImage()
    base = hexview.palette().color(hexview.viewport().backgroundRole())
    mid_row = img.height() // 2
    inked = [x for x in range(img.width()) for dy in range(-6, 7) if img.pixelColor(x, mid_row + dy) != base]
    assert inked, "placeholder text should be painted in the middle"
    assert hexview.verticalScrollBar().maximum() == 0 and hexview.offset_at(QPoint(50, 50)) == -1


def test_highlight_scrolls_into_view_and_link_scroll(hexview):
    other = HexView()
    other.resize(hexview.size())
    other.show()
    hexview.set_data(bytes(4096))
    other.set_data(bytes(4096))
    hexview.link_scroll(other)
    hexview.set_highlight(3000, 3010)
    start, end = hexview.visible_range()
    assert start <= 3000 < 3010 <= end and hexview.highlight() == (3000, 3010)
    assert other.verticalScrollBar().value() == hexview.verticalScrollBar().value()
    other.verticalScrollBar().setValue(3)
    assert hexview.verticalScrollBar().value() == 3
    hexview.unlink_scroll(other)
    other.verticalScrollBar().setValue(10)
    assert hexview.verticalScrollBar().value() == 3
    other.close()


def test_entropy_strip_click_and_colors(qtbot):
    strip = EntropyStrip()
    qtbot.addWidget(strip)
    strip.resize(16, 160)
    strip.show()
    strip.set_values([0.5, 4.0, 7.2, 7.9], chunk=256, total=1024)
    cell = strip.cell_rect(2).center().toPoint()
    with qtbot.waitSignal(strip.chunkClicked) as sig:
        qtbot.mouseClick(strip, Qt.MouseButton.LeftButton, pos=cell)
    assert sig.args == [512]
    cool, hot = entropy_color(0.0), entropy_color(8.0)
    assert cool.blue() > cool.red() and hot.red() > hot.blue()
    assert entropy_color(-1) == cool and entropy_color(99) == hot


@pytest.fixture
def pageview(qtbot):
    view = PageView()
    qtbot.addWidget(view)
    view.resize(1400, 800)
    view.show()
    before, after, page = make_page()
    mask = np.frombuffer(before, np.uint8) != np.frombuffer(after, np.uint8)
    view.show_capture(
        before, after, page, None, "page 2 · decrypt", chunk_entropy(before), chunk_entropy(after), mask
    )
    return view, page


def _find_row(model, name, parent=None):
    from PySide6.QtCore import QModelIndex

    parent = parent or QModelIndex()
    for r in range(model.rowCount(parent)):
        idx = model.index(r, 0, parent)
        if idx.data() == name:
            return idx
        found = _find_row(model, name, idx)
        if found is not None:
            return found
    return None


def test_tree_model_passes_model_tester(qtmodeltester, pageview):
    view, _ = pageview
    qtmodeltester.check(view.model)


def test_tree_row_highlights_span_in_both_panes(pageview):
    view, page = pageview
    cell2 = next(f for f in page.fields if f.name == "cell 2")
    name2 = next(f for f in cell2.walk() if f.name == "name")
    idx = _find_row(view.model, "cell 2")
    child = _find_row(view.model, "name", idx)
    assert child.data(SPAN_ROLE) == ("after", name2.start, name2.end)
    assert child.siblingAtColumn(1).data() == f"0x{name2.start:04x}–0x{name2.end - 1:04x}"
    view.tree.setCurrentIndex(child)
    assert view.after_view.highlight() == (name2.start, name2.end)
    assert view.before_view.highlight() == (name2.start, name2.end)
    assert view.current_field() is name2


def test_hex_click_selects_innermost_field(qtbot, pageview):
    view, page = pageview
    hv = view.after_view
    cell3 = next(f for f in page.fields if f.name == "cell 3")
    target = next(f for f in cell3.walk() if f.name == "name")
    offset = target.start + 1
    hv.scroll_to(offset)
    with qtbot.waitSignal(view.fieldSelected) as sig:
        qtbot.mouseClick(hv.viewport(), Qt.MouseButton.LeftButton, pos=hv.byte_rect(offset).center())
    assert sig.args == [target] and page.field_at(offset) is target
    assert view.tree.currentIndex().siblingAtColumn(0).data(SPAN_ROLE) == ("after", target.start, target.end)
    assert view.tree.isExpanded(view.tree.currentIndex().parent())
    # A ciphertext byte maps to the plaintext field at the same offset.
    view.before_view.scroll_to(4)
    qtbot.mouseClick(view.before_view.viewport(), Qt.MouseButton.LeftButton, pos=view.before_view.byte_rect(4).center())
    assert view.current_field().name == "cell count"


def test_problems_are_red_rows_and_clear_empties(pageview):
    view, _ = pageview
    idx = _find_row(view.model, "⚠ problem")
    assert idx is not None and idx.siblingAtColumn(2).data() == "freeblock chain loops"
    color = view.model.itemFromIndex(idx).foreground().color()
    assert color.red() > color.green() + 60
    view.clear()
    assert view.model.rowCount() == 0
    assert view.after_view.data() == b"" and view.before_view.data() == b""
    assert view.after_strip.values() == []


def test_before_structure_is_grouped(qtbot):
    view = PageView()
    qtbot.addWidget(view)
    before, after, page = make_page()
    enc = DecodedPage("encrypted", (DecodedField("IV", 1000, 1016, "…"),))
    view.show_capture(before, after, page, enc, "p", [], [], None)
    assert [view.model.index(r, 0).data() for r in range(view.model.rowCount())] == [
        "After (plaintext)",
        "Before (ciphertext)",
    ]
    view.before_view.cursorMoved.emit(1003)
    assert view.current_field().name == "IV"
    view.before_view.cursorMoved.emit(3)  # no ciphertext field there: falls back to the plaintext's
    assert view.current_field().name == "cell count"


def test_hover_emits_offset_and_tooltip_names_it(qtbot, hexview):
    hexview.set_data(b"\x00AB" * 10)
    hexview.set_diff(bytes([0, 1] * 15))
    with qtbot.waitSignal(hexview.offsetHovered) as sig:
        qtbot.mouseMove(hexview.viewport(), hexview.byte_rect(1).center())
    assert sig.args == [1]
    tip = hexview.describe_offset(1)
    assert "offset 1 (0x1)" in tip and "0x41 = 65 'A'" in tip and "differs" in tip


def test_entry_only_capture_labels_its_one_buffer_plaintext(qtbot):
    from tdescope.app.events import PageCapture
    from tdescope.app.probe.capture_record import side_label

    view = PageView()
    qtbot.addWidget(view)
    _before, after, page = make_page()
    cap = PageCapture(0.0, 1, "kcbchk_ctx", "decrypt", 907, after, b"")  # entry-only: the decrypted block
    roles = (side_label(cap, "before"), side_label(cap, "after"))
    assert roles == ("plaintext", "not captured")
    view.show_capture(cap.before, cap.after, None, page, "p", [1.0], [], None, roles=roles)
    assert "Before (plaintext)" in view._before_caption.text()
    assert "After (not captured)" in view._after_caption.text()
    assert [view.model.index(r, 0).data() for r in range(view.model.rowCount())] == ["Before (plaintext)"]
    assert "ciphertext" not in view._header.text()


def test_a_short_ciphertext_is_too_short_to_judge_as_the_report_says(qtbot):
    """A 15-byte pgcrypto chunk: the window says what the report says, not "does not look random"."""
    from tdescope.app.probe.entropy import verdict

    view = PageView()
    qtbot.addWidget(view)
    before, after = bytes(range(200, 215)), b"WOMBAT-ROW-0001"
    view.show_capture(before, after, None, None, "decrypt · pgp_cfb_decrypt", [], [], None,
                      roles=("ciphertext", "plaintext"))
    assert verdict(before) == "too short to judge"
    assert "ciphertext too short to judge (15 B)" in view._header.text()
    assert "does not look random" not in view._header.text()
