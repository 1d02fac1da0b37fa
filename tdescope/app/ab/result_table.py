"""One result model, rendered twice: a workload's figures as rows of typed cells.

:class:`ResultTable` is what the Workload dock's table (Qt) and the report's tables (Jinja)
both draw: its rows are :class:`Cell` objects holding the number itself (a value, its unit,
its 95 % interval, the verdict of a ratio), and each renderer only asks a cell for its
:attr:`~Cell.text` or its :attr:`~Cell.value`. Nothing downstream parses text back into floats.

:func:`interval_text` is the one way an interval (or a range) is written, everywhere.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from tdescope.app.events import ABResult, PhaseRatio, WorkloadResult

__all__ = ["AB_HEADER", "MISSING", "SINGLE_HEADER", "Cell", "Interval", "ResultTable", "Verdict", "ab_facts",
           "ab_table", "interval_text", "ratio_cell", "runs_table", "seconds_cell", "single_table", "text_cell"]

#: Shown where a side did not run.
MISSING = "—"


def interval_text(low: float, high: float, unit: str = "", digits: int = 2) -> str:
    """``1.42–1.61`` (``unit`` after the high end): the one way an interval or a range is written."""
    return f"{low:.{digits}f}–{high:.{digits}f}{unit}"


class Verdict(str, enum.Enum):
    """What an encrypted/plain ratio with its interval says."""

    COST = "cost"  # the whole interval above 1
    NO_CLEAR_COST = "no clear cost"  # the interval reaches 1
    NO_COST = "no cost"  # the whole interval at or below 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Interval:
    """A 95 % interval, ``low`` to ``high``."""

    low: float
    high: float

    def text(self, unit: str = "") -> str:
        """The interval as people read it (:func:`interval_text`)."""
        return interval_text(self.low, self.high, unit)

    def verdict(self) -> Verdict:
        """Whether the interval of a ratio to plain shows a cost."""
        return Verdict.COST if self.low > 1 else Verdict.NO_COST if self.high <= 1 else Verdict.NO_CLEAR_COST


@dataclass(frozen=True, slots=True, kw_only=True)
class Cell:
    """One table cell: a number with its unit and, for a ratio, its interval and verdict; or a text.

    ``value`` None is a side that did not run (shown as ``—``). A cell with only an
    ``interval`` is an interval column.
    """

    value: float | int | str | None
    unit: str = ""
    digits: int = 3
    interval: Interval | None = None
    verdict: Verdict | None = None

    @property
    def text(self) -> str:
        """The cell as people read it."""
        if self.value is None:
            return self.interval.text(self.unit) if self.interval is not None else MISSING
        if isinstance(self.value, float):
            return f"{self.value:.{self.digits}f}{self.unit}"
        return f"{self.value}{self.unit}"

    @property
    def numeric(self) -> bool:
        """A number (right-aligned), not a label."""
        return not isinstance(self.value, str)

    def __str__(self) -> str:
        return self.text


def text_cell(value) -> Cell:
    """A cell shown as given (a workload's own table, a label)."""
    return Cell(value=str(value))


def seconds_cell(value: float | None) -> Cell:
    """Elapsed seconds, three decimals (the unit is in the header)."""
    return Cell(value=value, unit="", digits=3)


def ratio_cell(ratio: float | None, interval: Interval | None = None) -> Cell:
    """A ratio to plain (``1.52×``), with its interval and verdict when rounds gave one."""
    return Cell(value=ratio, unit="×", digits=2, interval=interval,
                verdict=interval.verdict() if interval is not None else None)


def _phase_interval(p: PhaseRatio) -> Interval:
    return Interval(low=p.ratio_ci_low, high=p.ratio_ci_high)


@dataclass(frozen=True, slots=True, kw_only=True)
class ResultTable:
    """One workload result as a table.

    Attributes
    ----------
    title : str
        What ran, for people ("" where the view names it elsewhere).
    header : tuple of str
        Column names.
    rows : tuple of tuple of Cell
    ratio : Cell or None
        The headline: encrypted over plain (with its interval after rounds), when there is one.
    cancelled : bool
    facts : tuple of str
        How it was measured, one fact each.
    method : str
        How the intervals were computed ("" when there are none).
    warnings : tuple of str
        Reasons not to trust the figure as it stands.
    """

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    ratio: Cell | None = None
    cancelled: bool = False
    facts: tuple[str, ...] = ()
    method: str = ""
    warnings: tuple[str, ...] = ()

    @property
    def interval(self) -> str:
        """The headline ratio's interval as text, or ""."""
        return self.ratio.interval.text() if self.ratio is not None and self.ratio.interval is not None else ""

    def text_rows(self) -> list[tuple[str, ...]]:
        """Every row as the texts people read."""
        return [tuple(c.text for c in row) for row in self.rows]

    def column(self, name: str) -> list[Cell]:
        """The cells of column ``name``."""
        i = self.header.index(name)
        return [row[i] for row in self.rows]


AB_HEADER = ("Phase", "Encrypted (s, median)", "Plain (s, median)", "Ratio (median)", "95 % interval")
SINGLE_HEADER = ("Phase", "Encrypted (s)", "Plain (s)", "Ratio")


def ab_facts(result: ABResult) -> tuple[str, ...]:
    """How an A/B run was measured: its rounds, its captures, the machine's load."""
    done = result.completed_rounds()
    rounds = (f"cancelled after {done} timed round(s) (ABBA)" if result.cancelled and done
              else "cancelled before any timed round" if result.cancelled
              else f"{done} rounds (ABBA) + {result.warmup} warm-up")
    facts = [rounds, f"captures: {result.capture}"]
    if result.machine_busy is not None:
        facts.append(f"machine {result.machine_busy * 100:.0f} % busy, "
                     f"{(result.other_busy or 0) * 100:.0f} % by other processes")
    return tuple(facts)


def ab_table(result: ABResult, title: str = "") -> ResultTable:
    """An A/B run of rounds: per phase the medians, the median ratio and its 95 % interval."""
    rows = tuple((text_cell(p.phase), seconds_cell(p.encrypted_median_s), seconds_cell(p.plain_median_s),
                  ratio_cell(p.ratio_median, _phase_interval(p)), Cell(value=None, interval=_phase_interval(p)))
                 for p in result.phases)
    total = result.total()
    headline = ratio_cell(total.ratio_median, _phase_interval(total)) if total is not None else None
    return ResultTable(title=title, header=AB_HEADER, rows=rows, ratio=headline, cancelled=result.cancelled,
                       facts=ab_facts(result), method=result.interval, warnings=tuple(result.warnings()))


def single_table(result: WorkloadResult, title: str = "") -> ResultTable:
    """One run: the workload's own table when it made one, else per phase encrypted, plain and their ratio."""
    ratio = result.ratio()
    headline = ratio_cell(ratio) if ratio else None
    if result.table:
        header, *rows = result.table
        return ResultTable(title=title, header=tuple(map(str, header)),
                           rows=tuple(tuple(text_cell(v) for v in row) for row in rows),
                           ratio=headline, cancelled=result.cancelled)
    by = {(t.side, t.phase): t.elapsed_s for t in result.timings}
    rows = []
    for phase in dict.fromkeys(t.phase for t in result.timings):
        enc, plain = by.get(("encrypted", phase)), by.get(("plain", phase))
        rows.append((text_cell(phase), seconds_cell(enc), seconds_cell(plain),
                     ratio_cell(enc / plain if enc is not None and plain else None)))
    return ResultTable(title=title, header=SINGLE_HEADER, rows=tuple(rows), ratio=headline,
                       cancelled=result.cancelled)


def runs_table(results: Iterable[WorkloadResult], title: str, finished: Callable[[WorkloadResult], str],
               named: Callable[[WorkloadResult], str]) -> ResultTable:
    """Many single runs, one line each (``finished(result)`` and ``named(result)`` write the first two cells)."""
    results = list(results)
    rows = tuple((text_cell(finished(r)), text_cell(named(r) + (" (cancelled)" if r.cancelled else "")),
                  seconds_cell(r.total("encrypted")), seconds_cell(r.total("plain")), ratio_cell(r.ratio() or None))
                 for r in results)
    ratios = [r.ratio() for r in results if r.ratio() and not r.cancelled]
    mean = sum(ratios) / len(ratios) if ratios else None
    return ResultTable(title=title, header=("Finished", "Workload", "Encrypted (s)", "Plain (s)", "Ratio"),
                       rows=rows, ratio=ratio_cell(mean) if mean else None)
