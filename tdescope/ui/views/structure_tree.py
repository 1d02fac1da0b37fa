"""The page view's structure tree: a decoded page's fields as rows of Field, Offset and Value.

The rows are QStandardItems, which are no QObjects: :func:`structure_rows` builds them off-model, on any
thread (a capture's are built with its decoding, off the GUI thread; a page's few hundred fields took
the GUI thread ~100 ms under load), and :func:`fill_structure_model` attaches them to the view's model.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QStandardItem, QStandardItemModel

from tdescope.app.engines.api import DecodedField, DecodedPage

__all__ = ["HEADERS", "SPAN_ROLE", "StructureRows", "fill_structure_model", "structure_rows"]

#: Item data role on column 0 holding ``(side, start, end)``; side is "after" or "before".
SPAN_ROLE = Qt.ItemDataRole.UserRole + 1
#: The tree's columns.
HEADERS = ("Field", "Offset", "Value")


def _span_text(f: DecodedField) -> str:
    return f"0x{f.start:04x}–0x{f.end - 1:04x}" if f.end > f.start else f"0x{f.start:04x} (empty)"


def _field_row(f: DecodedField, side: str, index: dict[int, QStandardItem]) -> list[QStandardItem]:
    name = QStandardItem(f.name)
    name.setData((side, f.start, f.end), SPAN_ROLE)
    value = QStandardItem(f.value)
    if len(f.value) > 40:
        value.setToolTip(f.value)
    index[id(f)] = name
    # Children are attached while the parent is still off-model, so no model signals fire here.
    for c in f.children:
        name.appendRow(_field_row(c, side, index))
    return [name, QStandardItem(_span_text(f)), value]


def _problem_row(text: str, color) -> list[QStandardItem]:
    items = [QStandardItem("⚠ problem"), QStandardItem(""), QStandardItem(text)]
    for it in items if color is not None else ():  # no colour given: the palette's own
        it.setForeground(color)
    items[2].setToolTip(text)
    return items


@dataclass(frozen=True, slots=True)
class StructureRows:
    """The structure tree's rows, built off-model (on any thread: a QStandardItem is no QObject), and
    ``id(field) -> column-0 item`` for the after and the before page. Attached to one model, once."""

    top: list
    after_items: dict
    before_items: dict


def structure_rows(
    after: DecodedPage | None,
    before: DecodedPage | None = None,
    problem_color=None,
    roles: tuple[str, str] = ("ciphertext", "plaintext"),
) -> StructureRows:
    """The rows of the structure tree for decoded pages: columns Field, Offset, Value.

    The plaintext's fields sit at the top level; when the ciphertext side has
    structure or problems of its own, both sides are grouped under one row each.
    Page-level problems become rows coloured ``problem_color``. ``roles`` name
    what the before and after buffers hold (:func:`side_label`).
    """
    after_items: dict[int, QStandardItem] = {}
    before_items: dict[int, QStandardItem] = {}

    def rows_for(page: DecodedPage, side: str, index: dict) -> list[list[QStandardItem]]:
        rows = [_problem_row(p, problem_color) for p in page.problems]
        return rows + [_field_row(f, side, index) for f in page.fields]

    grouped = before is not None and bool(before.fields or before.problems)
    top: list[list[QStandardItem]] = []
    if after is not None:
        rows = rows_for(after, "after", after_items)
        if grouped:
            group = QStandardItem(f"After ({roles[1]})")
            for r in rows:
                group.appendRow(r)
            top.append([group, QStandardItem(""), QStandardItem(after.page_type)])
        else:
            top.extend(rows)
    if grouped:
        group = QStandardItem(f"Before ({roles[0]})")
        for r in rows_for(before, "before", before_items):
            group.appendRow(r)
        top.append([group, QStandardItem(""), QStandardItem(before.page_type)])
    return StructureRows(top, after_items, before_items)


def fill_structure_model(
    model: QStandardItemModel,
    after: DecodedPage | None,
    before: DecodedPage | None = None,
    problem_color=None,
    roles: tuple[str, str] = ("ciphertext", "plaintext"),
    rows: StructureRows | None = None,
) -> tuple[dict[int, QStandardItem], dict[int, QStandardItem]]:
    """Rebuild ``model`` from decoded pages (:func:`structure_rows`, or ``rows`` built already).

    Returns
    -------
    tuple of dict
        ``id(field) -> column-0 item``, for the after and the before page.
    """
    model.removeRows(0, model.rowCount())
    model.setHorizontalHeaderLabels(list(HEADERS))
    rows = rows or structure_rows(after, before, problem_color, roles)
    root = model.invisibleRootItem()
    for r in rows.top:
        root.appendRow(r)
    return rows.after_items, rows.before_items
