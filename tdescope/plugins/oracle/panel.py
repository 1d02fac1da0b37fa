"""Qt panel of the Oracle engine: SQL trace (tkprof-like), inventory, and wait deltas.

The only module of the plugin that imports Qt; tdescope.ui loads it lazily
through the engine (``OracleEngine.panel``), never by import. Views are fed
plain dataclasses (TraceSummary, Inventory, SnapperReport) on the GUI thread.
"""

from __future__ import annotations

from PySide6 import QtCore, QtWidgets

from tdescope.plugins.oracle.trace import CALL_KINDS, masked_summary

__all__ = ["OracleDock", "TkprofTree", "create_docks"]

_CALL_LABEL = {"parse": "Parse", "execute": "Execute", "fetch": "Fetch"}
_COLUMNS = ("Statement / call", "count", "cpu s", "elapsed s", "disk", "query", "current", "rows")


def _s(us: int) -> str:
    return f"{us / 1e6:.2f}"


_RIGHT = QtCore.Qt.AlignmentFlag.AlignRight | QtCore.Qt.AlignmentFlag.AlignVCenter


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _item(cells: list[str]) -> QtWidgets.QTreeWidgetItem:
    item = QtWidgets.QTreeWidgetItem(cells)
    for col in range(1, len(cells)):
        item.setTextAlignment(col, _RIGHT)
    return item


def _call_cells(label: str, c) -> list[str]:
    return [label, str(c.count), _s(c.cpu_us), _s(c.elapsed_us), str(c.disk), str(c.query), str(c.current),
            str(c.rows)]


class TkprofTree(QtWidgets.QTreeWidget):
    """One top-level row per statement (its totals), Parse/Execute/Fetch and its waits below."""

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.setColumnCount(len(_COLUMNS))
        self.setHeaderLabels(list(_COLUMNS))
        self.setUniformRowHeights(True)
        self.setAlternatingRowColors(True)
        self.header().setStretchLastSection(False)
        self.header().setSectionResizeMode(0, QtWidgets.QHeaderView.ResizeMode.Stretch)

    def show_summary(self, summary) -> None:
        """Replace the contents with ``summary`` (a TraceSummary), statements by elapsed time."""
        self.clear()
        stmts = sorted(masked_summary(summary).statements, key=lambda s: -s.total().elapsed_us)
        for st in stmts:
            tot = st.total()
            head = ("  " * st.depth) + (f"[{st.sql_id}] " if st.sql_id else "") + " ".join(st.text.split())[:160]
            top = _item(_call_cells(head, tot))
            top.setToolTip(0, st.text[:2000] + (f"\n(recursive, dep={st.depth})" if st.depth else ""))
            for kind in CALL_KINDS:
                top.addChild(_item(_call_cells(_CALL_LABEL[kind], st.calls[kind])))
            for event, w in sorted(st.waits.items(), key=lambda kv: -kv[1].total_ela_us):
                top.addChild(_item([f"wait: {event}", str(w.count), "", _s(w.total_ela_us), "", "", "", ""]))
            self.addTopLevelItem(top)
        for col in range(1, len(_COLUMNS)):
            self.resizeColumnToContents(col)


def _table(headers: list[str]) -> QtWidgets.QTableWidget:
    t = QtWidgets.QTableWidget(0, len(headers))
    t.setHorizontalHeaderLabels(headers)
    t.verticalHeader().setVisible(False)
    t.setEditTriggers(QtWidgets.QAbstractItemView.EditTrigger.NoEditTriggers)
    t.horizontalHeader().setStretchLastSection(True)
    t.verticalHeader().setDefaultSectionSize(t.fontMetrics().height() + 6)
    return t


def _fill(table: QtWidgets.QTableWidget, rows) -> None:
    table.setRowCount(0)
    for r, row in enumerate(rows):
        table.insertRow(r)
        for c, value in enumerate(row):
            item = QtWidgets.QTableWidgetItem(str(value))
            if c and _numeric(str(value)):
                item.setTextAlignment(_RIGHT)
            table.setItem(r, c, item)
    table.resizeColumnsToContents()


class OracleDock(QtWidgets.QDockWidget):
    """The Oracle dock: tabs for SQL trace, whole-file waits, inventory and snapper deltas."""

    def __init__(self, parent=None) -> None:
        super().__init__("Oracle", parent)
        self.setObjectName("oracle-dock")
        tabs = QtWidgets.QTabWidget()
        self.trace_tree = TkprofTree()
        self.trace_waits = _table(["Event", "Times waited", "Max wait ms", "Total waited s"])
        self.inventory = _table(["Section", "Name", "Value"])
        self.deltas = _table(["Event / statistic", "Class", "Waits", "Time ms", "% of interval", "Avg µs"])
        self.status = QtWidgets.QLabel("No trace loaded")
        trace_page = QtWidgets.QWidget()
        lay = QtWidgets.QVBoxLayout(trace_page)
        lay.setContentsMargins(2, 2, 2, 2)
        lay.addWidget(self.status)
        split = QtWidgets.QSplitter(QtCore.Qt.Orientation.Vertical)
        split.addWidget(self.trace_tree)
        split.addWidget(self.trace_waits)
        split.setSizes([300, 120])
        lay.addWidget(split)
        tabs.addTab(trace_page, "SQL trace")
        tabs.addTab(self.inventory, "Inventory")
        tabs.addTab(self.deltas, "Wait deltas")
        self.tabs = tabs
        self.setWidget(tabs)

    def show_trace(self, summary, source: str = "") -> None:
        """A parsed 10046 trace: the tkprof tree and the whole file's waits."""
        self.trace_tree.show_summary(summary)
        waits = sorted(summary.waits.items(), key=lambda kv: -kv[1].total_ela_us)
        _fill(self.trace_waits, [(e, w.count, f"{w.max_ela_us / 1e3:.2f}", f"{w.total_ela_us / 1e6:.2f}")
                                 for e, w in waits])
        extra = f", {summary.skipped_lines} lines skipped" if summary.skipped_lines else ""
        pga = f", {len(summary.pga_operations)} 'PGA memory operation' waits" if summary.pga_operations else ""
        self.status.setText(f"{source or 'trace'}: {len(summary.statements)} statements{pga}{extra}")

    def show_inventory(self, inventory) -> None:
        """Inventory rows (section, name, value)."""
        _fill(self.inventory, inventory.rows)

    def show_deltas(self, report) -> None:
        """A snapper report: events then time model statistics."""
        rows = [(r.name, r.wait_class, r.count, f"{r.time_us / 1e3:.1f}", f"{r.percent:.1f}", f"{r.avg_us:.0f}")
                for r in report.events]
        rows += [(r.name, r.wait_class, "", f"{r.time_us / 1e3:.1f}", f"{r.percent:.1f}", "")
                 for r in report.time_model]
        _fill(self.deltas, rows)


def create_docks(parent=None) -> list[QtWidgets.QDockWidget]:
    """The docks this engine adds to the main window."""
    return [OracleDock(parent)]
