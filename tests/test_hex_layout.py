"""HexLayout: a hex view's column math and hit-testing, as plain numbers (no Qt, no widget)."""

from __future__ import annotations

import grimp
import pytest

from tdescope.ui.views.hex_layout import (
    BYTES_PER_ROW,
    HEX_COL,
    ByteStyle,
    HexLayout,
    ascii_text,
    byte_styles,
    describe_byte,
    hex_text,
    selected_hex,
    style_runs,
)

#: A fractional advance, as DejaVu Sans Mono 9 has: rounding it anywhere would show as an off-by-one below.
LAYOUT = HexLayout(char_w=7.22, line_h=17, ascent=14, length=1000)


def centre(box):
    x, y, w, h = box
    return x + w / 2, y + h / 2


@pytest.mark.parametrize("top_row, hscroll", [(0, 0), (5, 0), (0, 33), (40, 120)])
def test_the_centre_of_every_cell_hits_its_own_byte(top_row, hscroll):
    for off in range(top_row * BYTES_PER_ROW, LAYOUT.length):
        assert LAYOUT.offset_at(*centre(LAYOUT.hex_cell(off, top_row, hscroll)), top_row, hscroll) == off
        assert LAYOUT.offset_at(*centre(LAYOUT.ascii_cell(off, top_row, hscroll)), top_row, hscroll) == off


def test_points_off_the_bytes_hit_nothing_unless_clamped():
    lay = LAYOUT
    y = lay.header_h + 2
    assert lay.offset_at(lay.hex_x(0) + 1, 3) == -1  # the header row
    assert lay.offset_at(1, y) == -1  # the offset column
    gap = lay.hex_x0 + (3 * BYTES_PER_ROW + 1) * lay.char_w  # between the hex and the ASCII area
    assert lay.offset_at(gap, y) == -1
    assert lay.offset_at(lay.ascii_x(BYTES_PER_ROW) + 2, y) == -1  # right of the ASCII column
    last_row_y = lay.row_y(lay.row_count() - 1) + 2  # 1000 = 62 rows and 8 bytes
    assert lay.offset_at(*centre(lay.hex_cell(999))) == 999
    assert lay.offset_at(lay.hex_x(12) + 1, last_row_y) == -1  # past the end of a partial row
    assert lay.offset_at(lay.hex_x(0) + 1, lay.row_y(lay.row_count()) + 2) == -1  # below the last row
    # clamped, as a drag that leaves the text: the nearest byte
    assert lay.offset_at(1, y, clamp=True) == 0
    assert lay.offset_at(lay.ascii_x(BYTES_PER_ROW) + 50, y, clamp=True) == BYTES_PER_ROW - 1
    assert lay.offset_at(lay.hex_x(3) + 1, -40, top_row=2, clamp=True) == BYTES_PER_ROW + 3  # above: the row above
    assert lay.offset_at(lay.hex_x(0) + 1, 10_000, clamp=True) == 999
    assert HexLayout(char_w=7.0, line_h=16, ascent=12, length=0).offset_at(100, 100, clamp=True) == -1


def test_the_gap_after_the_eighth_byte_belongs_to_the_eighth():
    y = LAYOUT.header_h + 2
    gap = LAYOUT.hex_x0 + 24 * LAYOUT.char_w + 1  # the extra space between columns 7 and 8
    assert LAYOUT.offset_at(gap, y) == 7
    assert LAYOUT.offset_at(LAYOUT.hex_x(8) + 1, y) == 8


def test_columns_follow_the_row_text():
    row = bytes(range(0x41, 0x41 + BYTES_PER_ROW))
    text = hex_text(row)
    assert [text[c : c + 2] for c in HEX_COL] == [f"{b:02x}" for b in row]
    assert text[HEX_COL[7] + 2 : HEX_COL[8]] == "  " and len(text) == 3 * BYTES_PER_ROW + 1
    assert ascii_text(b"A\x00~\x7f ") == "A.~. "
    assert LAYOUT.hex_x(8) - LAYOUT.hex_x(7) == pytest.approx(4 * LAYOUT.char_w)
    assert LAYOUT.ascii_x(0, 10) == pytest.approx(LAYOUT.ascii_x0 - 10)


def test_the_offset_column_widens_past_64_kib():
    assert HexLayout(char_w=8, length=0x10000).digits == 4
    assert HexLayout(char_w=8, length=0x10001).digits == 5
    narrow, wide = HexLayout(char_w=8, length=0x10000), HexLayout(char_w=8, length=0x10001)
    assert wide.hex_x0 - narrow.hex_x0 == 8 and wide.content_w - narrow.content_w == 8


def test_rows_and_visible_rows():
    assert HexLayout(length=0).row_count() == 0
    assert HexLayout(length=17).row_count() == 2 and HexLayout(length=4096).row_count() == 256
    assert LAYOUT.visible_rows(LAYOUT.header_h + 10 * LAYOUT.line_h + 5) == 10
    assert LAYOUT.visible_rows(0) == 1  # at least one, however small the viewport


@pytest.mark.parametrize("first, last, top, expected", [
    (20 * 16, 20 * 16, 15, 15),  # on screen: no move
    (5 * 16, 5 * 16, 15, 4),  # above: one row of context above it
    (0, 0, 15, 0),  # the first row has no row above
    (40 * 16, 41 * 16, 15, 33),  # below: rows 33-42 shown, one row of context below its last
    (40 * 16, 70 * 16, 15, 39),  # taller than the view: its start shows
])
def test_scroll_to_show(first, last, top, expected):
    assert LAYOUT.scroll_to_show(first, last, top, visible=10) == expected


def test_span_boxes_cover_the_span_in_both_areas():
    hex_box, asc_box = LAYOUT.span_boxes(1, 18, 21)
    assert hex_box[0] < LAYOUT.hex_x(2) and hex_box[0] + hex_box[2] > LAYOUT.hex_x(4) + 2 * LAYOUT.char_w
    assert asc_box == (LAYOUT.ascii_x(2), LAYOUT.row_y(1), 3 * LAYOUT.char_w, LAYOUT.line_h)
    assert LAYOUT.span_boxes(0, 18, 21) == [] and LAYOUT.span_boxes(62, 990, 2000)[1][2] == 8 * LAYOUT.char_w


def test_byte_styles_precedence_and_runs():
    chunk = bytes([1, 0, 1, 0, 1, 1])
    styles = byte_styles(chunk, 16, selection=(21, 22), diff=[True, True, False, False])
    assert styles == [ByteStyle.DIFF, ByteStyle.DIFF_DIM, ByteStyle.NORMAL, ByteStyle.DIM, ByteStyle.NORMAL,
                      ByteStyle.SELECTED]
    assert style_runs([ByteStyle.NORMAL] * 3 + [ByteStyle.DIM] + [ByteStyle.NORMAL] * 2) == [
        (0, 2, ByteStyle.NORMAL), (3, 3, ByteStyle.DIM), (4, 5, ByteStyle.NORMAL)]
    assert style_runs([]) == []


def test_describe_byte_and_selected_hex():
    assert describe_byte(b"\x00A", 1, differs=True) == "offset 1 (0x1)\nvalue 0x41 = 65 'A'\ndiffers from the other side"
    assert describe_byte(b"\x00A", 0, differs=False) == "offset 0 (0x0)\nvalue 0x00 = 0"
    assert selected_hex(bytes(range(10)), 2, 5) == "02 03 04"


def test_the_layout_imports_no_qt():
    graph = grimp.build_graph("tdescope", include_external_packages=True)
    imported = graph.find_modules_directly_imported_by("tdescope.ui.views.hex_layout")
    assert not {m for m in imported if m.split(".")[0] in ("PySide6", "pyqtgraph", "shiboken6")}
    assert "PySide6" in {m.split(".")[0] for m in graph.find_modules_directly_imported_by("tdescope.ui.views.hexview")}
