"""The Waits dock's two tables colour their class column and right-align their numbers through one helper
(issue #25 leftovers: the same data() was written twice)."""

from __future__ import annotations

import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

from PySide6.QtCore import Qt  # noqa: E402
from PySide6.QtGui import QColor  # noqa: E402

from tdescope.app.events import WaitFigure  # noqa: E402
from tdescope.app.waits.counter import WaitTopRow  # noqa: E402
from tdescope.ui.docks.waits import ExactWaitModel, WaitTopModel, class_color  # noqa: E402

ROLE = Qt.ItemDataRole
RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)


def _roles(model, row: int = 0) -> list[tuple]:
    return [(model.data(model.index(row, c), ROLE.DisplayRole), model.data(model.index(row, c), ROLE.DecorationRole),
             model.data(model.index(row, c), ROLE.TextAlignmentRole)) for c in range(model.columnCount())]


def test_the_top_table_colours_its_class_and_aligns_its_numbers(qapp):
    model = WaitTopModel()
    model.set_rows([WaitTopRow("os", "I/O", "pread64", 12, 37.5)])
    cells = _roles(model)
    assert [c[0] for c in cells] == ["os", "I/O", "pread64", "12", "37.5"]
    assert [c[1] for c in cells] == [None, QColor(*class_color("I/O")), None, None, None]
    assert [c[2] for c in cells] == [None, None, None, RIGHT, RIGHT]


def test_the_exact_table_colours_its_class_and_aligns_its_numbers(qapp):
    model = ExactWaitModel()
    model.set_rows([WaitFigure("ebpf", "I/O", "pread64", 1200, 3500.0, 2.5, None)])
    cells = _roles(model)
    assert [c[0] for c in cells][:7] == ["I/O", "pread64", "1,200", "3.50", "2.9", "2.5", "–"]
    assert [c[1] for c in cells] == [QColor(*class_color("I/O"))] + [None] * 7
    assert [c[2] for c in cells] == [None, None] + [RIGHT] * 5 + [None]


def test_neither_table_writes_its_own_data():
    assert "data" not in vars(WaitTopModel) and "data" not in vars(ExactWaitModel)  # one helper paints both
