"""Annotated reports of a recorded session: a model built from the file, rendered with Jinja2.

:func:`build_report` reads a session into a :class:`Report` (title facts,
workload results with ratios, plots as SVG, selected captures, notes, the
environment); :func:`render_html` turns it into one self-contained HTML file
(plots are ``data:`` images). The PDF is made from the same model by the Qt
layer (``tdescope.ui.export.pdf``).

Which captures are shown, and how (redaction included: every buffer that may hold plaintext,
by :meth:`PageCapture.holds_plaintext`, is shown as ``··`` and its decoded values hidden unless
``include_plaintext`` is set), is :mod:`tdescope.app.report.captures`. Secrets never reach the model: the
session file holds none (see :mod:`tdescope.app.session.meta`).
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tdescope import __version__
from tdescope.app.engines.api import PageDecoder
from tdescope.app.errors import UserError
from tdescope.app.probe.keep_rate import thinned_in
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.events import (ABResult, CaptureWindowState, HotspotWindow, LessonCard, Marker, PageCapture, Problem,
                                 WindowState, WorkloadProgress, WorkloadResult)
from tdescope.app.session.notes import Note
from tdescope.app.report.captures import MASK, CaptureSection, capture_section, selected_captures
from tdescope.app.report.plots import SIDE_COLORS, TimelineLane, flame_graph, horizontal_bars, stacked_bars, timeline
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import PLAINTEXT_WITHHELD, SessionMeta
from tdescope.app.report.exact_waits import exact_waits_table
from tdescope.app.waits.counter import WaitCounter

__all__ = ["Plot", "ResultTable", "CaptureSection", "Report", "build_report", "render_html", "write_html", "MASK"]

@dataclass(frozen=True, slots=True)
class Plot:
    """One figure: ``svg`` is a complete SVG document."""

    name: str
    title: str
    svg: str
    caption: str = ""

    @property
    def data_uri(self) -> str:
        """The SVG as a ``data:`` URI, for ``<img src>``."""
        return "data:image/svg+xml;base64," + base64.b64encode(self.svg.encode()).decode()


@dataclass(frozen=True, slots=True)
class ResultTable:
    """One workload result: rows of (phase, encrypted s, plain s, ratio) or its own table."""

    title: str
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]
    ratio: float | None
    cancelled: bool
    interval: str = ""  # "1.42–1.61" for an A/B run of rounds
    facts: str = ""  # how it was measured, and why not to trust it (warnings)


@dataclass(frozen=True)
class Report:
    """Everything a report shows, in order."""

    title: str
    engine: str
    versions: dict
    host: str
    recorded: str
    duration_s: float
    generated: str
    results: tuple[ResultTable, ...]
    plots: tuple[Plot, ...]
    captures: tuple[CaptureSection, ...]
    notes: tuple[Note, ...]
    environment: tuple[tuple[str, str], ...]
    counts: dict
    include_plaintext: bool
    problems: tuple[str, ...] = field(default_factory=tuple)
    plaintext_note: str = ""  # why the file holds no decrypted bytes, when it holds none by policy
    lessons: tuple[LessonCard, ...] = ()  # lessons' result cards, published figures beside ours
    captures_note: str = ""  # how the captures shown were chosen
    note_cards: dict = field(default_factory=dict)  # note id -> the LessonCard a note was made from


def _clock(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "—"


def _ab_table(r: ABResult, lessons: list[_LessonSpan] = ()) -> ResultTable:
    total = r.total()
    rows = tuple((p.phase, f"{p.encrypted_median_s:.3f}", f"{p.plain_median_s:.3f}", f"{p.ratio_median:.2f}×",
                  f"{p.ratio_ci_low:.2f}–{p.ratio_ci_high:.2f}") for p in r.phases)
    facts = [f"{r.completed_rounds()} timed rounds in ABBA order after {r.warmup} warm-up round(s); "
             f"captures: {r.capture}; {r.interval}"]
    if r.machine_busy is not None:
        facts.append(f"machine {r.machine_busy * 100:.0f} % busy, {(r.other_busy or 0) * 100:.0f} % by other processes")
    facts += [f"warning: {w}" for w in r.warnings()]
    return ResultTable(f"{_ran(r.label, r.ts, lessons)} — {r.completed_rounds()} rounds, at {_clock(r.ts)}",
                       ("Phase", "Encrypted (s, median)", "Plain (s, median)", "Ratio (median)", "95 % interval"),
                       rows, total.ratio_median if total else None, r.cancelled,
                       f"{total.ratio_ci_low:.2f}–{total.ratio_ci_high:.2f}" if total else "", " · ".join(facts))


@dataclass(frozen=True, slots=True)
class _LessonSpan:
    """A lesson's run: from its first step to its card."""

    start: float
    end: float
    title: str

    def holds(self, ts: float) -> bool:
        return self.start <= ts <= self.end


def _lesson_spans(reader: SessionReader) -> list[_LessonSpan]:
    """Each lesson run of the session (a lesson announces its steps, then publishes its card)."""
    spans, opened = [], {}
    for ev in reader.events(kinds=[WorkloadProgress, LessonCard]):
        if isinstance(ev, WorkloadProgress) and ev.workload.startswith("lesson:"):
            opened.setdefault(ev.workload[len("lesson:"):], ev.ts)
        elif isinstance(ev, LessonCard):
            spans.append(_LessonSpan(opened.pop(ev.lesson, ev.ts), ev.ts, ev.title))
    return spans


def _ran(label: str, ts: float, lessons: list[_LessonSpan]) -> str:
    """What ran: ``label``, or the lesson it ran for and ``label`` (a lesson's runs are not free runs)."""
    lesson = next((s for s in lessons if s.holds(ts)), None)
    return f"Lesson “{lesson.title}”: its run of {label}" if lesson else label


def _results(reader: SessionReader, detailed: int = 6) -> tuple[ResultTable, ...]:
    lessons = _lesson_spans(reader)
    ab = [_ab_table(r, lessons) for r in reader.events(kinds=[ABResult])]
    results = [r for r in reader.events(kinds=[WorkloadResult]) if not r.capture_round]
    return tuple(ab) + _single_results(results, detailed, lessons)


def _single_results(results: list[WorkloadResult], detailed: int,
                    lessons: list[_LessonSpan] = ()) -> tuple[ResultTable, ...]:
    if len(results) > detailed:  # a long session: one line per run rather than pages of tables
        rows = []
        for r in results:
            enc, plain, ratio = r.total("encrypted"), r.total("plain"), r.ratio()
            rows.append((_clock(r.ts), _ran(r.label or r.workload, r.ts, lessons) + (" (cancelled)" if r.cancelled else ""),
                         f"{enc:.3f}" if enc is not None else "—", f"{plain:.3f}" if plain is not None else "—",
                         f"{ratio:.2f}×" if ratio else "—"))
        ratios = [r.ratio() for r in results if r.ratio() and not r.cancelled]
        mean = sum(ratios) / len(ratios) if ratios else None
        return (ResultTable(f"{len(results)} workload runs (totals)", ("Finished", "Workload", "Encrypted (s)",
                                                                        "Plain (s)", "Ratio"),
                            tuple(rows), mean, False),)
    out = []
    for r in results:
        if r.table:
            header, *rows = r.table
            out.append(ResultTable(f"{_ran(r.label or r.workload, r.ts, lessons)} at {_clock(r.ts)}",
                                   tuple(map(str, header)),
                                   tuple(tuple(map(str, row)) for row in rows), r.ratio(), r.cancelled))
            continue
        phases = list(dict.fromkeys(t.phase for t in r.timings))
        by = {(t.side, t.phase): t.elapsed_s for t in r.timings}
        rows = []
        for ph in phases:
            enc, plain = by.get(("encrypted", ph)), by.get(("plain", ph))
            ratio = f"{enc / plain:.2f}×" if enc is not None and plain else "—"
            rows.append((ph, f"{enc:.3f}" if enc is not None else "—", f"{plain:.3f}" if plain is not None else "—",
                         ratio))
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        out.append(ResultTable(f"{_ran(r.label or r.workload, r.ts, lessons)} ({params}), one run, at {_clock(r.ts)}",
                               ("Phase", "Encrypted (s)", "Plain (s)", "Ratio"),
                               tuple(rows), r.ratio(), r.cancelled))
    return tuple(out)


def _wait_plot(reader: SessionReader, t0: float, t1: float) -> Plot:
    span = max(t1 - t0, 1.0)
    bucket = max(span / 120, 0.25)
    n = int(span / bucket) + 1
    waits = WaitCounter(bucket, origin=t0)
    waits.add_rows(reader.wait_rows())
    series = {c: [float(k) for k in v] for c, v in waits.class_series(n).items()}
    order = ["CPU", "File I/O", "Sync", "Memory operation", "Lock", "Network", "Other", "Idle"]
    ordered = {c: series[c] for c in order if c in series}
    # the engine's own classes after, by first bucket they show in
    ordered.update({c: series[c] for c in sorted(set(series) - set(ordered),
                                                 key=lambda c: (next(i for i, k in enumerate(series[c]) if k), c))})
    svg = stacked_bars([t0 + i * bucket for i in range(n)] if series else [], ordered, t0, unit="thread samples")
    return Plot("waits", "Waits over time", svg, f"Thread samples per {bucket:.1f} s bucket, by wait class.")


def _hotspot_plots(reader: SessionReader) -> list[Plot]:
    stacks: Counter = Counter()
    for w in reader.events(kinds=[HotspotWindow]):
        stacks.update(w.stacks)
    total = sum(stacks.values())
    self_counts: Counter = Counter()
    for stack, n in stacks.items():
        self_counts[stack.rsplit(";", 1)[-1]] += n
    rows = [(sym, n / total * 100, "crypto" if is_crypto(sym) else "")
            for sym, n in self_counts.most_common(15)] if total else []
    return [
        Plot("hotspots", "Top hotspots (self time)", horizontal_bars(rows),
             f"{total} perf samples; cipher and hash functions in red."),
        Plot("flame", "Flame graph", flame_graph(dict(stacks)),
             "All call stacks merged, outermost frame on top; width is share of samples."),
    ]


def _timeline_plot(reader: SessionReader, notes: list[Note], t0: float, t1: float) -> Plot:
    runs: list[list] = []  # contiguous stretches of progress on one side: [side, start, end]
    for p in reader.events(kinds=[WorkloadProgress]):
        if runs and runs[-1][0] == p.side and p.ts - runs[-1][2] < 2.0:
            runs[-1][2] = p.ts
        else:
            runs.append([p.side, p.ts, p.ts])
    windows, armed_at = [], None
    for s in reader.events(kinds=[CaptureWindowState]):
        if s.state is WindowState.ARMED:
            # the first "armed" opens the window; later ones are live progress of the same window
            armed_at = s.ts if armed_at is None else armed_at
        elif armed_at is not None:
            why = " (paused: stop budget)" if s.state is WindowState.PAUSED else ""
            kept = f", {s.unsent} not kept (keep rate)" if s.unsent else ""
            windows.append((armed_at, s.ts, f"probe window: {s.captures} pages{kept}{why}"))
            armed_at = None
    if armed_at is not None:
        windows.append((armed_at, t1, "probe window (still armed at the end)"))
    captures = [(c.ts, f"capture #{c.seq}" + (f" page {c.pgno}" if c.pgno >= 0 else ""))
                for c in reader.events(kinds=[PageCapture], with_bytes=False)]
    markers = [(m.ts, m.label) for m in reader.events(kinds=[Marker])]
    problems = [(p.ts, p.message) for p in reader.events(kinds=[Problem])]
    lanes = [TimelineLane(f"workload {side}", spans=tuple((a, b, side) for s, a, b in runs if s == side),
                          color=SIDE_COLORS.get(side, "#888888"))
             for side in dict.fromkeys(r[0] for r in runs)]
    lanes += [TimelineLane("probe armed", spans=tuple(windows), color="#c0392b"),
              TimelineLane("captures", ticks=tuple(captures[:2000]), color="#2ca02c")]
    if markers:
        lanes.append(TimelineLane("markers", ticks=tuple(markers), color="#9467bd"))
    if problems:
        lanes.append(TimelineLane("problems", ticks=tuple(problems), color="#d62728"))
    lanes.append(TimelineLane("notes", ticks=tuple((n.when, n.text[:80]) for n in notes), color="#ff7f0e"))
    # cropped to what happened (runs, probe windows, captures, markers, notes), not the idle time around it
    moments = [t for lane in lanes for s, e, _ in lane.spans for t in (s, e)]
    moments += [ts for lane in lanes for ts, _ in lane.ticks if ts is not None]
    lo, hi = (min(moments), max(moments)) if moments else (t0, t1)
    pad = max((hi - lo) * 0.02, 0.5)
    lo, hi = max(t0, lo - pad), min(t1, hi + pad) if hi + pad > lo else hi + pad
    cropped = f" Shown: {time.strftime('%H:%M:%S', time.localtime(lo))} to {time.strftime('%H:%M:%S', time.localtime(hi))}" \
              f" ({hi - lo:.0f} s of the session's {t1 - t0:.0f} s), where something happened." \
        if (hi - lo) < 0.9 * (t1 - t0) else ""
    return Plot("timeline", "Timeline", timeline([lane for lane in lanes if lane.spans or lane.ticks], lo, hi),
                "Workload sides, probe windows, captures, markers and notes on one clock." + cropped)


def _exact_waits_table(reader: SessionReader) -> list[ResultTable]:
    """The exact OS waits of the session (the eBPF tracer's), per class and syscall; none when not traced."""
    table = exact_waits_table(reader)
    return [ResultTable(table.title, table.header, table.rows, None, False, facts=table.facts)] if table else []


def build_report(reader: SessionReader, decoder: PageDecoder | None = None, include_plaintext: bool = False,
                 max_captures: int = 4) -> Report:
    """Read ``reader``'s session into a :class:`Report`.

    Parameters
    ----------
    reader : SessionReader
    decoder : PageDecoder, optional
        The engine's page decoder (from the registry; app/ cannot import plugins).
    include_plaintext : bool
        Show decrypted bytes and decoded values instead of masking them.
    max_captures : int
        Captures shown besides those that notes point at.
    """
    summary = reader.summary()
    meta = summary.meta
    t0 = summary.start or meta.started or time.time()
    t1 = summary.end or t0 + 1
    notes = reader.notes()
    plots = [_timeline_plot(reader, notes, t0, t1), _wait_plot(reader, t0, t1), *_hotspot_plots(reader)]
    cards = tuple(reader.events(kinds=[LessonCard]))
    captures = []
    for cap, why in selected_captures(reader, notes, max_captures, decoder, cards):
        about = [n for n in notes if n.target.kind in ("capture", "bytes") and n.target.ts is not None
                 and abs(n.target.ts - cap.ts) < 1e-6]
        captures.append(capture_section(cap, decoder, include_plaintext, about, why))
    total = summary.counts.get("capture", 0)
    chosen = (f"{len(captures)} of the session's {total} captures: those the notes and lesson cards point to, then "
              f"the first of each kind of page (direction and page type), at most {max_captures} of those "
              "(--captures N shows more).") if captures else ""
    env = [("Host", meta.host), ("Operating system", meta.os), ("CPU", meta.cpu),
           ("AES-NI", "yes" if meta.aes_ni else "no"),
           ("CPU flags (crypto)", " ".join(f for f in meta.cpu_flags if f in
                                          ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "sha_ni", "avx2", "avx512f"))),
           ("Recorded with", f"tdescope {meta.tdescope_version}"), ("Session file", summary.path),
           ("Session format", str(summary.schema_version))]
    env += [(f"Parameter {k}", str(v)) for k, v in meta.params.items()]
    env += [(f"{section}: {name}", str(value)) for section, name, value in meta.inventory]
    thinned = thinned_in(reader.events(kinds=[CaptureWindowState]))
    if thinned:
        env.append(("Captures not kept", f"{thinned} not kept: over the probe windows' keep rate, a storm is "
                                         f"recorded as a sample (counted, not stored)"))
    problems = tuple(p.message for p in reader.events(kinds=[Problem]))
    return Report(
        title=meta.title or f"{meta.engine_label or meta.engine or 'Session'} encryption session",
        engine=meta.engine_label or meta.engine, versions=dict(meta.versions), host=_host(meta),
        recorded=_clock(t0), duration_s=summary.duration_s, generated=_clock(time.time()),
        results=tuple(_results(reader)) + tuple(_exact_waits_table(reader)), plots=tuple(plots),
        captures=tuple(captures), notes=tuple(notes),
        environment=tuple(env), counts=summary.counts, include_plaintext=include_plaintext, problems=problems[:20],
        plaintext_note=PLAINTEXT_WITHHELD if meta.plaintext_withheld else "",
        lessons=cards, captures_note=chosen,
        note_cards={n.id: c for n in notes for c in cards if n.text == c.text()},
    )


def _host(meta: SessionMeta) -> str:
    """Where the target was: ``db1 via ssh (workbench on laptop)`` for a recording made over ssh."""
    target = meta.params.get("host")
    return f"{target} (workbench on {meta.host})" if target else meta.host


def render_html(report: Report, image_src=None, for_print: bool = False) -> str:
    """The report as one HTML document.

    ``image_src(name, data_uri)`` chooses each image's ``src`` (the PDF path
    swaps in resource names); by default images are embedded ``data:`` URIs.
    """
    import jinja2

    source = resources.files("tdescope.resources").joinpath("templates", "report.html.j2").read_text()
    env = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters["clock"] = lambda ts: time.strftime("%H:%M:%S", time.localtime(ts)) if ts else ""
    template = env.from_string(source)
    src = image_src or (lambda name, uri: uri)
    return template.render(r=report, src=src, version=__version__, for_print=for_print)


def write_html(report: Report, out: Path) -> Path:
    """Write ``report`` as one self-contained HTML file: 0600, a folder created for it 0700, whatever
    the umask (:mod:`tdescope.app.system.private_files`). Needs no Qt: a server without PySide6 can do it."""
    from tdescope.app.system.private_files import write_private

    try:
        write_private(out, render_html(report).encode("utf-8"))
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
