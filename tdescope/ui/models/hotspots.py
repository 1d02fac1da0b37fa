"""Item models of the hotspot views: the live symbol table and the encrypted-vs-plain diff.

Both update in place: rows of symbols already shown change with one
``dataChanged``, new symbols are appended, and the model resets only when
symbols leave it, so a refresh costs little and the selection stays put.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

from PySide6.QtCore import QModelIndex, QSortFilterProxyModel, Qt
from PySide6.QtGui import QBrush, QColor

from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.hotspots.profile import DiffRow, SymbolStat
from tdescope.ui.models.table import RowTableModel

__all__ = ["HotspotModel", "DiffModel", "SymbolFilter"]

_RIGHT = int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
_CRYPTO_BG = QBrush(QColor(225, 220, 255))
SORT_ROLE = Qt.ItemDataRole.UserRole


@functools.lru_cache(maxsize=8192)
def _crypto(symbol: str) -> bool:
    # data() asks for every cell and role on each repaint: the regex runs once per symbol
    return is_crypto(symbol)


def _runs(descending: list[int]) -> list[tuple[int, int]]:
    """Contiguous ``(first, last)`` ranges of the row numbers ``descending``, last range first."""
    out: list[tuple[int, int]] = []
    for i in descending:
        if out and out[-1][0] == i + 1:
            out[-1] = (i, out[-1][1])
        else:
            out.append((i, i))
    return out


class _RowsModel(RowTableModel):
    """Rows keyed by symbol, updated in place."""

    columns: tuple[str, ...] = ()

    def __init__(self, describe: Callable[[str], str], parent=None) -> None:
        super().__init__(parent)
        self._describe = describe
        self.rows: list = []
        self._index: dict[str, int] = {}
        self._order: tuple[int, Qt.SortOrder] | None = None  # the column and order the rows are kept in

    def sort_key(self, row, column: int):
        """What ``column`` sorts ``row`` by (also the :data:`SORT_ROLE` data)."""
        raise NotImplementedError

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:  # Qt API
        """Keep the rows ordered by ``column``, keyed here once per row: the proxy's own sort asked ``data()``
        for every comparison (some 5,000 Python calls for each refresh of a 300-row table)."""
        self._order = (column, order) if column >= 0 else None
        self._reorder()

    def _reorder(self) -> None:
        if self._order is None or len(self.rows) < 2:
            return
        column, order = self._order
        ordered = sorted(self.rows, key=lambda r: self.sort_key(r, column),
                         reverse=order == Qt.SortOrder.DescendingOrder)
        if all(a.symbol == b.symbol for a, b in zip(ordered, self.rows)):
            return
        self.layoutAboutToBeChanged.emit()
        index = {r.symbol: i for i, r in enumerate(ordered)}
        moved = self.persistentIndexList()  # the selection and the current row follow their symbols
        self.changePersistentIndexList(moved, [self.index(index[self.rows[i.row()].symbol], i.column()) for i in moved])
        self.rows, self._index = ordered, index
        self.layoutChanged.emit()

    def set_rows(self, rows: Sequence) -> None:
        """Show ``rows`` (each with a ``.symbol``)."""
        new_index = {r.symbol: i for i, r in enumerate(rows)}
        gone = sorted((i for symbol, i in self._index.items() if symbol not in new_index), reverse=True)
        if gone:  # removed, not reset: a reset re-sorted and re-filtered every row (a live storm: 10 times a second)
            for first, last in _runs(gone):
                self.beginRemoveRows(QModelIndex(), first, last)
                del self.rows[first:last + 1]
                self.endRemoveRows()
            self._index = {r.symbol: i for i, r in enumerate(self.rows)}
        old = self.rows
        appended = [r for r in rows if r.symbol not in self._index]
        merged = list(old)
        for r in rows:
            i = self._index.get(r.symbol)
            if i is not None:
                merged[i] = r
        self.rows = merged
        if old:
            self.dataChanged.emit(self.index(0, 0), self.index(len(old) - 1, len(self.columns) - 1))
        if appended:
            first = len(self.rows)
            self.beginInsertRows(QModelIndex(), first, first + len(appended) - 1)
            for r in appended:
                self._index[r.symbol] = len(self.rows)
                self.rows.append(r)
            self.endInsertRows()
        self._reorder()

    def row_of(self, symbol: str) -> int | None:
        """Source row of ``symbol``, or None."""
        return self._index.get(symbol)


class HotspotModel(_RowsModel):
    """Symbol, DSO, self %, total %, samples, crypto mark, glossary."""

    columns = ("Symbol", "DSO", "Self %", "Total %", "Samples", "Crypto", "What it does")

    def sort_key(self, row: SymbolStat, column: int):
        if column == 5:
            return int(_crypto(row.symbol))
        if column == 6:
            return self._describe(row.symbol)
        return (row.symbol, row.dso, row.self_pct, row.total_pct, row.self_samples)[column]

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r: SymbolStat = self.rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return r.symbol
            if col == 1:
                return r.dso.rsplit("/", 1)[-1]
            if col == 2:
                return f"{r.self_pct:.1f}"
            if col == 3:
                return f"{r.total_pct:.1f}"
            if col == 4:
                return str(r.self_samples)
            if col == 5:
                return "◆ crypto" if _crypto(r.symbol) else ""
            return self._describe(r.symbol)
        if role == SORT_ROLE:
            return self.sort_key(r, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            about = self._describe(r.symbol)
            return f"{r.symbol}\n{r.dso}" + (f"\n\n{about}" if about else "")
        if role == Qt.ItemDataRole.TextAlignmentRole and col in (2, 3, 4):
            return _RIGHT
        if role == Qt.ItemDataRole.BackgroundRole and _crypto(r.symbol):
            return _CRYPTO_BG
        return None


class DiffModel(_RowsModel):
    """Functions ranked by how much bigger a share of the CPU they take when encrypted."""

    columns = ("Symbol", "Encrypted %", "Plain %", "Δ points", "Added % of plain", "Crypto", "What it does")

    def sort_key(self, row: DiffRow, column: int):
        if column == 6:
            return self._describe(row.symbol)
        return (row.symbol, row.enc_pct, row.plain_pct, row.delta_pct, row.added_pct, int(row.crypto))[column]

    def data(self, index, role=Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        r: DiffRow = self.rows[index.row()]
        col = index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            return (r.symbol, f"{r.enc_pct:.1f}", f"{r.plain_pct:.1f}", f"{r.delta_pct:+.1f}",
                    f"{r.added_pct:+.1f}", "◆ crypto" if r.crypto else "", self._describe(r.symbol))[col]
        if role == SORT_ROLE:
            return self.sort_key(r, col)
        if role == Qt.ItemDataRole.ToolTipRole:
            about = self._describe(r.symbol)
            return (f"{r.symbol}: {r.enc_samples} samples encrypted, {r.plain_samples} plain"
                    + (f"\n\n{about}" if about else ""))
        if role == Qt.ItemDataRole.TextAlignmentRole and 1 <= col <= 4:
            return _RIGHT
        if role == Qt.ItemDataRole.BackgroundRole:
            if col == 3 and r.delta_pct > 0:
                return QBrush(QColor(240, 120, 80, min(220, int(30 + 12 * r.delta_pct))))
            if r.crypto:
                return _CRYPTO_BG
        return None


class SymbolFilter(QSortFilterProxyModel):
    """Keeps rows whose symbol, DSO or glossary text matches; a sort (a header click) is passed to the source
    model, which keeps its rows in that order, so the proxy only filters."""

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:  # Qt API
        self.sourceModel().sort(column, order)

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setSortRole(SORT_ROLE)
        self.setFilterCaseSensitivity(Qt.CaseSensitivity.CaseInsensitive)
        self.setFilterKeyColumn(-1)
        self.setDynamicSortFilter(True)
