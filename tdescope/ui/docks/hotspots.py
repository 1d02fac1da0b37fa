"""The Hotspots dock: live symbol table, flame graph, encrypted-vs-plain diff and disassembly.

The dock reads an :class:`~tdescope.app.observe.observed.ObservedRun` (kept by the
observation wiring) when told that new data arrived; it never touches the
samplers. Scope: the last perf window or the whole run, narrowed to the
timeline's selected range when there is one.
"""

from __future__ import annotations

from collections.abc import Mapping

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QButtonGroup,
    QDockWidget,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QRadioButton,
    QScrollArea,
    QTableView,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from tdescope.app.hotspots.glossary import describe
from tdescope.app.hotspots.profile import crypto_pct, diff_profiles
from tdescope.app.observe.observed import ObservedRun
from tdescope.ui.views.disasm import DisassemblyView
from tdescope.ui.views.flamegraph import FlameGraph
from tdescope.ui.models.hotspots import DiffModel, HotspotModel, SymbolFilter

__all__ = ["HotspotsDock", "glossary_of"]

#: Rows kept in the live table: the hottest by total, so a long run stays cheap.
MAX_ROWS = 300


def _table(model, proxy: SymbolFilter) -> QTableView:
    proxy.setSourceModel(model)
    view = QTableView()
    view.setModel(proxy)
    view.setSortingEnabled(True)
    view.setSelectionBehavior(QTableView.SelectionBehavior.SelectRows)
    view.setSelectionMode(QTableView.SelectionMode.SingleSelection)
    view.verticalHeader().hide()
    view.verticalHeader().setDefaultSectionSize(20)
    view.setAlternatingRowColors(True)
    head = view.horizontalHeader()
    head.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
    head.setStretchLastSection(True)
    return view


class HotspotsDock(QDockWidget):
    """Where the target's CPU goes, live."""

    def __init__(self, run: ObservedRun, glossary: Mapping[str, str], parent: QWidget | None = None) -> None:
        super().__init__("Hotspots", parent)
        self.setObjectName("HotspotsDock")
        self.run = run
        self._glossary = glossary
        self._about: dict[str, str] = {}
        self.range: tuple[float, float] | None = None
        self._windows_seen = -1
        self._diff_seen = -1

        self.scope_window = QRadioButton("Last window")
        self.scope_run = QRadioButton("Whole run")
        self.scope_run.setChecked(True)
        group = QButtonGroup(self)
        group.addButton(self.scope_window)
        group.addButton(self.scope_run)
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter symbols, libraries, descriptions (highlighted in the flame graph)…")
        self.filter.setClearButtonEnabled(True)
        self.crypto_label = QLabel("time in crypto: –")
        self.crypto_label.setStyleSheet("font-weight: bold; color: #4b3fbf;")
        self.status = QLabel("Waiting for the first perf window…")
        self.status.setWordWrap(True)  # a longer count wraps; the dock keeps its width
        self.status.setStyleSheet("color: #666;")

        self.model = HotspotModel(self.describe, self)
        self.proxy = SymbolFilter(self)
        self.table = _table(self.model, self.proxy)
        self.table.sortByColumn(2, Qt.SortOrder.DescendingOrder)
        for col, w in enumerate((220, 130, 56, 56, 62, 70)):
            self.table.setColumnWidth(col, w)
        self.flame = FlameGraph(self.describe)
        self.diff_model = DiffModel(self.describe, self)
        self.diff_proxy = SymbolFilter(self)
        self.diff_table = _table(self.diff_model, self.diff_proxy)
        self.diff_table.sortByColumn(3, Qt.SortOrder.DescendingOrder)
        self.diff_table.setColumnWidth(0, 220)
        self.diff_label = QLabel("Run a workload with an encrypted and a plain side (A/B DML) to compare them.")
        self.diff_label.setWordWrap(True)
        diff_page = QWidget()
        dl = QVBoxLayout(diff_page)
        dl.setContentsMargins(0, 0, 0, 0)
        dl.addWidget(self.diff_label)
        dl.addWidget(self.diff_table)
        self.disasm = DisassemblyView()

        self.tabs = QTabWidget()
        self.tabs.addTab(self.table, "Table")
        self.flame_scroll = QScrollArea()  # the whole height of deep stacks: scroll, never clip
        self.flame_scroll.setWidget(self.flame)
        self.flame_scroll.setWidgetResizable(True)
        self.flame_scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        self.flame_scroll.setHorizontalScrollBarPolicy(Qt.ScrollBarPolicy.ScrollBarAlwaysOff)
        self.flame_scroll.verticalScrollBar().rangeChanged.connect(
            lambda _lo, hi: self.flame_scroll.verticalScrollBar().setValue(hi))  # the root (bottom) in view
        self.tabs.addTab(self.flame_scroll, "Flame graph")
        self.tabs.addTab(diff_page, "Encrypted vs plain")
        self.tabs.addTab(self.disasm, "Disassembly")
        top = QHBoxLayout()
        top.addWidget(self.scope_window)
        top.addWidget(self.scope_run)
        top.addWidget(self.filter, 1)
        top.addWidget(self.crypto_label)
        body = QWidget()
        lay = QVBoxLayout(body)
        lay.setContentsMargins(4, 4, 4, 4)
        lay.addLayout(top)
        lay.addWidget(self.tabs)
        lay.addWidget(self.status)
        self.setWidget(body)

        self.filter.textChanged.connect(self._on_filter)
        self.scope_window.toggled.connect(lambda _on: self.refresh(force=True))
        self.tabs.currentChanged.connect(lambda _i: self.refresh(force=True))
        self.table.doubleClicked.connect(self._on_pick)
        self.diff_table.doubleClicked.connect(self._on_pick)
        self.flame.frameClicked.connect(self._select_symbol)

    # -- glossary ----------------------------------------------------------------
    def describe(self, symbol: str) -> str:
        """The glossary sentence of ``symbol`` (memoized: prefix lookups are linear)."""
        text = self._about.get(symbol)
        if text is None:
            text = self._about[symbol] = describe(symbol, self._glossary)
        return text

    def set_glossary(self, glossary: Mapping[str, str]) -> None:
        """Use another engine's glossary."""
        self._glossary = glossary
        self._about.clear()

    # -- refresh -----------------------------------------------------------------
    def set_range(self, rng: tuple[float, float] | None) -> None:
        """Narrow every hotspot view to ``(start, end)`` epoch seconds; None: no range."""
        self.range = rng
        if rng is not None and self.scope_window.isChecked():
            self.scope_run.setChecked(True)  # a range is a span of the run, not one window
        self.refresh(force=True)

    def refresh(self, force: bool = False) -> None:
        """Update the visible view when new windows arrived (or ``force``)."""
        n = len(self.run.windows)
        if n == self._windows_seen and not force:
            return
        self._windows_seen = n
        if self.scope_window.isChecked():
            prof = self.run.last_profile()
            scope = "last window"
        elif self.range is not None:
            prof = self.run.profile(*self.range)
            scope = f"selected range ({self.range[1] - self.range[0]:.1f} s)"
        else:
            prof = self.run.profile()
            scope = f"whole run ({n} windows)"
        self.crypto_label.setText(f"time in crypto: {crypto_pct(prof):.1f}%")
        self.status.setText(f"{prof.samples} samples · {scope}")
        current = self.tabs.currentIndex()
        if current == 0 or force or self.model.rowCount() == 0:
            self.model.set_rows(prof.top(MAX_ROWS, by="total"))
        if current == 1:
            if self.scope_window.isChecked():
                stacks = self.run.stacks(last=True)
            elif self.range is not None:
                stacks = self.run.stacks(*self.range)
            else:
                stacks = self.run.stacks()
            self.flame.set_stacks(stacks)
        if current == 2 and (force or self._diff_seen != n):
            self._diff_seen = n
            self._refresh_diff()
        if current == 3 and self.disasm.symbol and not self.disasm.busy:
            self.disasm.update_heat(self._heat(self.disasm.symbol))

    def _refresh_diff(self) -> None:
        sides = self.run.side_profiles()
        enc, plain = sides.get("encrypted"), sides.get("plain")
        if enc is None or plain is None or not enc.samples or not plain.samples:
            have = ", ".join(f"{k}: {v.samples} samples" for k, v in sides.items()) or "no side seen yet"
            self.diff_label.setText(
                f"Needs hotspot windows from both the encrypted and the plain side of a workload ({have})."
            )
            return
        rows = diff_profiles(enc, plain)
        self.diff_label.setText(
            f"Encrypted phase {enc.samples} samples ({crypto_pct(enc):.1f}% in crypto) vs plain "
            f"{plain.samples} samples ({crypto_pct(plain):.1f}% in crypto). Δ = share of CPU gained; "
            f"encryption added {100.0 * (enc.samples - plain.samples) / plain.samples:+.0f}% CPU samples."
        )
        self.diff_model.set_rows(rows[:MAX_ROWS])

    def _heat(self, symbol: str):
        if self.range is not None:
            return self.run.heat(symbol, *self.range)
        return self.run.heat(symbol)

    # -- interaction -----------------------------------------------------------------
    def _on_filter(self, text: str) -> None:
        self.proxy.setFilterFixedString(text)
        self.diff_proxy.setFilterFixedString(text)
        self.flame.set_search(text, self._frame_matcher(text))

    def _frame_matcher(self, text: str):
        """The table's filter rule for one frame name: ``text`` in its symbol, library or glossary
        sentence, any case (``SymbolFilter`` matches the same three columns)."""
        needle = text.strip().lower()
        # the flame graph asks once per frame name and search: the library lookup stays cheap
        return lambda name: (needle in name.lower() or needle in self.describe(name).lower()
                             or needle in self._dso_of(name).lower())

    def _on_pick(self, index) -> None:
        proxy = index.model()
        src = proxy.mapToSource(index)
        symbol = src.model().rows[src.row()].symbol
        self.show_disassembly(symbol)

    def _select_symbol(self, symbol: str) -> None:
        row = self.model.row_of(symbol)
        if row is not None:
            self.table.selectRow(self.proxy.mapFromSource(self.model.index(row, 0)).row())

    def show_disassembly(self, symbol: str) -> None:
        """Switch to the Disassembly tab and disassemble ``symbol`` off the GUI thread."""
        dso = self.run.profile().dsos.get(symbol, "") or self._dso_of(symbol)
        self.tabs.setCurrentWidget(self.disasm)
        self.disasm.show_function(symbol, dso, self.describe(symbol), self._heat(symbol))

    def _dso_of(self, symbol: str) -> str:
        for w in reversed(self.run.windows):
            if symbol in w.dsos:
                return w.dsos[symbol]
        return ""


def glossary_of(engine) -> Mapping[str, str]:
    """The engine's glossary, or an empty one when the engine's file is broken."""
    try:
        return engine.glossary()
    except Exception:  # noqa: BLE001 - a broken glossary must not stop the window
        return {}
