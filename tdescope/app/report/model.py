"""Annotated reports of a recorded session: a model built from the file, rendered with Jinja2.

:func:`build_report` reads a session into a :class:`Report` (title facts,
workload results with ratios, plots as SVG, selected captures, notes, the
environment); :func:`render_html` turns it into one self-contained HTML file
(plots are ``data:`` images). The PDF is made from the same model by the Qt
layer (``tdescope.ui.report_pdf``).

Redaction: every buffer of a capture that may hold plaintext
(:meth:`PageCapture.holds_plaintext`, the one rule) is shown as ``··`` and its
decoded values are hidden unless ``include_plaintext`` is set. Secrets never reach the model: the
session file holds none (see :mod:`tdescope.app.session.meta`).
"""

from __future__ import annotations

import base64
import time
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources

from tdescope import __version__
from tdescope.app.engines.api import DecodedPage, PageDecoder
from tdescope.app.probe.capture_record import side_label
from tdescope.app.probe.entropy import chunk_entropy, shannon_entropy, verdict
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.events import (ABResult, CaptureWindowState, HotspotWindow, LessonCard, Marker, PageCapture, Problem,
                                 WorkloadProgress, WorkloadResult)
from tdescope.app.session.notes import Note
from tdescope.app.report.plots import SIDE_COLORS, TimelineLane, entropy_strip, flame_graph, horizontal_bars, stacked_bars, timeline
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import PLAINTEXT_WITHHELD
from tdescope.app.report.exact_waits import exact_waits_table
from tdescope.app.waits.counter import WaitCounter

__all__ = ["Plot", "ResultTable", "CaptureSection", "Report", "build_report", "render_html", "MASK"]

#: What a redacted byte looks like in hex excerpts.
MASK = "··"
_EXCERPT_ROWS = 8


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


@dataclass(frozen=True, slots=True)
class CaptureSection:
    """One capture as the report shows it."""

    title: str
    ts: float
    before_label: str
    after_label: str
    before_hex: tuple[str, ...]
    after_hex: tuple[str, ...]
    before_entropy: float
    after_entropy: float
    before_verdict: str
    after_verdict: str
    page_type: str
    cells: int
    structure: tuple[tuple[int, str, str, str], ...]  # depth, name, span, value
    records: tuple[tuple[str, ...], ...]  # first decoded rows; empty when redacted
    entropy_svg: str
    redacted: bool
    before_masked: bool = False
    after_masked: bool = False
    notes: tuple[Note, ...] = ()

    @property
    def entropy_uri(self) -> str:
        return "data:image/svg+xml;base64," + base64.b64encode(self.entropy_svg.encode()).decode()


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


def _clock(ts: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) if ts else "—"


def _ab_table(r: ABResult) -> ResultTable:
    total = r.total()
    rows = tuple((p.phase, f"{p.encrypted_median_s:.3f}", f"{p.plain_median_s:.3f}", f"{p.ratio_median:.2f}×",
                  f"{p.ratio_ci_low:.2f}–{p.ratio_ci_high:.2f}") for p in r.phases)
    facts = [f"{r.completed_rounds()} timed rounds in ABBA order after {r.warmup} warm-up round(s); "
             f"captures: {r.capture}; {r.interval}"]
    if r.machine_busy is not None:
        facts.append(f"machine {r.machine_busy * 100:.0f} % busy, {(r.other_busy or 0) * 100:.0f} % by other processes")
    facts += [f"warning: {w}" for w in r.warnings()]
    return ResultTable(f"{r.label} — {r.completed_rounds()} rounds, at {_clock(r.ts)}",
                       ("Phase", "Encrypted (s, median)", "Plain (s, median)", "Ratio (median)", "95 % interval"),
                       rows, total.ratio_median if total else None, r.cancelled,
                       f"{total.ratio_ci_low:.2f}–{total.ratio_ci_high:.2f}" if total else "", " · ".join(facts))


def _results(reader: SessionReader, detailed: int = 6) -> tuple[ResultTable, ...]:
    ab = [_ab_table(r) for r in reader.events(kinds=[ABResult])]
    results = [r for r in reader.events(kinds=[WorkloadResult]) if r.params.get("round") != "capture"]
    return tuple(ab) + _single_results(results, detailed)


def _single_results(results: list[WorkloadResult], detailed: int) -> tuple[ResultTable, ...]:
    if len(results) > detailed:  # a long session: one line per run rather than pages of tables
        rows = []
        for r in results:
            enc, plain, ratio = r.total("encrypted"), r.total("plain"), r.ratio()
            rows.append((_clock(r.ts), (r.label or r.workload) + (" (cancelled)" if r.cancelled else ""),
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
            out.append(ResultTable(f"{r.label or r.workload} at {_clock(r.ts)}", tuple(map(str, header)),
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
        out.append(ResultTable(f"{r.label or r.workload} ({params}), one run, at {_clock(r.ts)}",
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
        if s.state == "armed":
            # the first "armed" opens the window; later ones are live progress of the same window
            armed_at = s.ts if armed_at is None else armed_at
        elif armed_at is not None:
            why = " (paused: stop budget)" if s.state == "paused" else ""
            windows.append((armed_at, s.ts, f"probe window: {s.captures} pages{why}"))
            armed_at = None
    if armed_at is not None:
        windows.append((armed_at, t1, "probe window (still armed at the end)"))
    captures = [(c.ts, f"capture #{c.seq} page {c.pgno}") for c in reader.events(kinds=[PageCapture], with_bytes=False)]
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
    return Plot("timeline", "Timeline", timeline(lanes, t0, t1),
                "Workload sides, probe windows, captures, markers and notes on one clock.")


def _hex_rows(data: bytes, start: int, rows: int, masked: bool) -> tuple[str, ...]:
    out = []
    for off in range(start - start % 16, min(len(data), start - start % 16 + rows * 16), 16):
        chunk = data[off:off + 16]
        if masked:
            hexpart, text = " ".join([MASK] * len(chunk)), "·" * len(chunk)
        else:
            hexpart = " ".join(f"{b:02x}" for b in chunk)
            text = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        out.append(f"{off:06x}  {hexpart:<47}  {text}")
    return tuple(out)


def _structure(decoded: DecodedPage | None, masked: bool, limit: int = 24) -> tuple[tuple[int, str, str, str], ...]:
    if decoded is None:
        return ()
    rows: list[tuple[int, str, str, str]] = []
    for top in decoded.fields:
        rows.append((0, top.name, f"{top.start}–{top.end - 1}", "(redacted)" if masked and top.value else top.value))
        kids = top.children
        for c in kids[:4]:  # a page has hundreds of cells: the first few show the shape
            rows.append((1, c.name, f"{c.start}–{c.end - 1}", "(redacted)" if masked and c.value else c.value))
        if len(kids) > 4:
            rows.append((1, f"… {len(kids) - 4} more", f"{kids[4].start}–{kids[-1].end - 1}", ""))
        if len(rows) >= limit:
            break
    return tuple(rows)


def _cell(value) -> str:
    text = value.hex() if isinstance(value, (bytes, bytearray)) else str(value)
    return text if len(text) <= 60 else text[:57] + "…"


def _capture_section(cap: PageCapture, decoder: PageDecoder | None, include_plaintext: bool,
                     notes: list[Note]) -> CaptureSection:
    mask_before = cap.holds_plaintext("before") and not include_plaintext
    mask_after = cap.holds_plaintext("after") and not include_plaintext
    plain = cap.plaintext
    decoded = decoder.decode(plain, cap.pgno) if decoder is not None and plain else None
    start = min((n.target.start for n in notes if n.target.kind == "bytes" and n.target.start is not None), default=0)
    label = (f"{side_label(cap, 'before')} (input)", f"{side_label(cap, 'after')} (output)")
    return CaptureSection(
        title=f"Capture #{cap.seq}: page {cap.pgno}, {cap.direction} in {cap.symbol}",
        ts=cap.ts,
        before_label=label[0], after_label=label[1],
        before_hex=_hex_rows(cap.before, start, _EXCERPT_ROWS, mask_before),
        after_hex=_hex_rows(cap.after, start, _EXCERPT_ROWS, mask_after),
        before_entropy=shannon_entropy(cap.before), after_entropy=shannon_entropy(cap.after),
        before_verdict=verdict(cap.before), after_verdict=verdict(cap.after),
        page_type=decoded.page_type if decoded else "unknown", cells=decoded.cells if decoded else 0,
        structure=_structure(decoded, masked=not include_plaintext),
        records=() if not include_plaintext or decoded is None else tuple(
            tuple(_cell(v) for v in row) for row in decoded.records[:8]),
        entropy_svg=entropy_strip(chunk_entropy(cap.before), chunk_entropy(cap.after)),
        redacted=not include_plaintext,
        before_masked=mask_before, after_masked=mask_after,
        notes=tuple(notes),
    )


def _selected_captures(reader: SessionReader, notes: list[Note], limit: int) -> list[PageCapture]:
    listing = list(reader.events(kinds=[PageCapture], with_bytes=False))
    noted = {round(n.target.ts, 6) for n in notes if n.target.kind in ("capture", "bytes") and n.target.ts}
    chosen = [c for c in listing if round(c.ts, 6) in noted]
    for c in listing:  # then the first ones, so a report without notes still shows pages
        if len(chosen) >= limit:
            break
        if c not in chosen:
            chosen.append(c)
    out = []
    for c in sorted(chosen, key=lambda c: c.ts):
        full = next(iter(reader.events(kinds=[PageCapture], start=c.ts, end=c.ts + 1e-6, limit=1)), None)
        out.append(full or c)
    return out


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
    captures = []
    for cap in _selected_captures(reader, notes, max_captures):
        about = [n for n in notes if n.target.kind in ("capture", "bytes") and n.target.ts is not None
                 and abs(n.target.ts - cap.ts) < 1e-6]
        captures.append(_capture_section(cap, decoder, include_plaintext, about))
    env = [("Host", meta.host), ("Operating system", meta.os), ("CPU", meta.cpu),
           ("AES-NI", "yes" if meta.aes_ni else "no"),
           ("CPU flags (crypto)", " ".join(f for f in meta.cpu_flags if f in
                                          ("aes", "vaes", "pclmulqdq", "vpclmulqdq", "sha_ni", "avx2", "avx512f"))),
           ("Recorded with", f"tdescope {meta.tdescope_version}"), ("Session file", summary.path),
           ("Session format", str(summary.schema_version))]
    env += [(f"Parameter {k}", str(v)) for k, v in meta.params.items()]
    env += [(f"{section}: {name}", str(value)) for section, name, value in meta.inventory]
    problems = tuple(p.message for p in reader.events(kinds=[Problem]))
    return Report(
        title=meta.title or f"{meta.engine_label or meta.engine or 'Session'} encryption session",
        engine=meta.engine_label or meta.engine, versions=dict(meta.versions), host=meta.host,
        recorded=_clock(t0), duration_s=summary.duration_s, generated=_clock(time.time()),
        results=tuple(_results(reader)) + tuple(_exact_waits_table(reader)), plots=tuple(plots),
        captures=tuple(captures), notes=tuple(notes),
        environment=tuple(env), counts=summary.counts, include_plaintext=include_plaintext, problems=problems[:20],
        plaintext_note=PLAINTEXT_WITHHELD if meta.plaintext_withheld else "",
        lessons=tuple(reader.events(kinds=[LessonCard])),
    )


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
