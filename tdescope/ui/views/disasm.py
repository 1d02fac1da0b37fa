"""The Disassembly view: one function's instructions with perf samples per instruction.

Disassembly runs on the task runner (the first call on a big library indexes
its symbols, about a second); the result comes back on the GUI thread.
AES-NI and carry-less multiply rows are highlighted, call targets named.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QBrush, QColor, QFont
from PySide6.QtWidgets import QHeaderView, QLabel, QTableView, QVBoxLayout, QWidget

from tdescope.app.hotspots.disasm import HeatRow, Insn, annotate, code_file, disassemble, disassemble_code
from tdescope.ui.models.table import RowTableModel
from tdescope.ui.gui_thread.tasks import TaskRunner, TaskState, describe

__all__ = ["DisassemblyView", "HeatModel"]

# One at a time: requests queue up instead of indexing the same library twice at once.
_ONE_AT_A_TIME = threading.Lock()

_COLUMNS = ("Samples", "%", "Address", "Bytes", "Instruction", "Target")


class HeatModel(RowTableModel):
    """Instructions with their sample counts; the heat updates in place."""

    columns = _COLUMNS

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.rows: list[HeatRow] = []
        self._max = 1

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        row = self.rows[index.row()]
        insn, col = row.insn, index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return str(row.samples) if row.samples else ""
            if col == 1:
                return f"{row.pct:.1f}" if row.samples else ""
            if col == 2:
                return f"{insn.address:x}"
            if col == 3:
                return insn.bytes_hex
            if col == 4:
                return f"{insn.mnemonic} {insn.op_str}".strip()
            return insn.target_name
        if role == Qt.ItemDataRole.BackgroundRole:
            if col in (0, 1) and row.samples:
                a = int(40 + 200 * row.samples / self._max)
                return QBrush(QColor(230, 80, 40, a))
            if insn.is_crypto:
                return QBrush(QColor(200, 190, 255))
            if insn.is_call:
                return QBrush(QColor(232, 244, 232))
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (0, 1):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        if role == Qt.ItemDataRole.ToolTipRole and insn.is_crypto:
            return "AES-NI / carry-less multiply / SHA instruction: the cipher itself"
        return None

    def set_rows(self, rows: list[HeatRow]) -> None:
        """Replace every row (a new function)."""
        self.beginResetModel()
        self.rows = rows
        self._max = max((r.samples for r in rows), default=0) or 1
        self.endResetModel()

    def set_heat(self, rows: list[HeatRow]) -> None:
        """Same instructions, new counts: one dataChanged over the heat columns."""
        if len(rows) != len(self.rows):
            self.set_rows(rows)
            return
        self.rows = rows
        self._max = max((r.samples for r in rows), default=0) or 1
        if rows:
            self.dataChanged.emit(self.index(0, 0), self.index(len(rows) - 1, 1))


class DisassemblyView(QWidget):
    """Shows the function picked in the hotspot table, with its sample heat."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.title = QLabel("Pick a function in the hotspot table (double-click) to disassemble it.")
        self.title.setWordWrap(True)
        self.about = QLabel("")
        self.about.setWordWrap(True)
        self.about.setStyleSheet("color: #555; font-style: italic;")
        self.model = HeatModel(self)
        self.table = QTableView()
        self.table.setModel(self.model)
        self.table.verticalHeader().hide()
        self.table.verticalHeader().setDefaultSectionSize(18)
        self.table.setFont(QFont("monospace", 9))
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        for col, w in enumerate((60, 48, 80, 150, 300)):
            self.table.setColumnWidth(col, w)
        lay = QVBoxLayout(self)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.title)
        lay.addWidget(self.about)
        lay.addWidget(self.table)
        self.symbol: str | None = None
        self.insns: list[Insn] = []
        self.tasks = TaskRunner(self)
        self._task: TaskState | None = None
        self.busy = False

    #: The observed process, so code whose file is gone can be read through /proc/PID/map_files.
    pid: int | None = None
    #: ``(path, symbol) -> (address, bytes)`` when the code is on another host (read by the agent there).
    read_code: Callable[[str, str], tuple[int, bytes]] | None = None

    def show_function(self, symbol: str, dso: str, about: str, heat: Counter[int]) -> None:
        """Disassemble ``symbol`` from ``dso`` off the GUI thread, then show it with ``heat``."""
        self.symbol = symbol
        self._pending_heat = heat
        self.about.setText(about)
        if not dso.startswith("/"):
            if self._task is not None:
                self._task.cancel()
            self.busy = False
            self.insns = []
            self.model.set_rows([])
            self.title.setText(f"<b>{symbol}</b> lives in {dso or 'an unknown object'}: "
                               "only code in a file on disk is disassembled.")
            return
        self.busy = True
        self._dso = dso
        self.title.setText(f"<b>{symbol}</b> · {dso} · disassembling…")
        if self._task is not None:
            self._task.cancel()  # superseded: its outcome is dropped, and it skips the work if still queued
        pid, read_code = self.pid, self.read_code

        def work(state: TaskState) -> list[Insn] | None:
            with _ONE_AT_A_TIME:
                if state.cancelled:
                    return None
                if read_code is not None:  # the server's binary is on the host, not here
                    address, code = read_code(dso, symbol)
                    return disassemble_code(code, address)
                return disassemble(code_file(dso, pid), symbol)

        self._task = self.tasks.run(work, name="disassemble", on_done=lambda insns: self._on_loaded(symbol, insns),
                                    on_exception=lambda exc: self._on_loaded(symbol, describe(exc)))

    def _on_loaded(self, symbol: str, result: list[Insn] | str) -> None:
        self.busy = False
        if isinstance(result, str):
            self.insns = []
            self.model.set_rows([])
            self.title.setText(f"<b>{symbol}</b>: {result}")
            return
        self.insns = result
        n_crypto = sum(1 for i in result if i.is_crypto)
        extra = f" · {n_crypto} AES-NI/PCLMUL/SHA instructions" if n_crypto else ""
        self.title.setText(f"<b>{symbol}</b> · {self._dso} · {len(result)} instructions{extra}")
        self.model.set_rows(self._rows(self._pending_heat))

    def _rows(self, heat: Counter[int]) -> list[HeatRow]:
        if not self.insns:
            return []
        start = self.insns[0].address
        return annotate(self.insns, Counter({start + off: n for off, n in heat.items()}))

    def update_heat(self, heat: Counter[int]) -> None:
        """New samples for the shown function (cheap: one dataChanged)."""
        self._pending_heat = heat
        if self.insns:
            self.model.set_heat(self._rows(heat))
