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

import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from tdescope import __version__
from tdescope.app.engines.api import PageDecoder
from tdescope.app.errors import UserError
from tdescope.app.ab.result_table import ResultTable, ab_table, runs_table, single_table, text_cell
from tdescope.app.probe.keep_rate import thinned_in
from tdescope.app.events import (ABResult, CaptureWindowState, LessonCard, LostConnection, Problem, WorkloadProgress,
                                 WorkloadResult)
from tdescope.app.session.notes import Note, NoteKind
from tdescope.app.report.captures import MASK, CaptureSection, capture_section, selected_captures
from tdescope.app.report.session_plots import Plot, hotspot_plots, timeline_plot, wait_plot
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import PLAINTEXT_WITHHELD, SessionMeta
from tdescope.app.report.exact_waits import exact_waits_table

__all__ = ["Plot", "ResultTable", "CaptureSection", "Report", "build_report", "render_html", "write_html", "MASK"]

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
    return ab_table(r, f"{_ran(r.label, r.ts, lessons)} — {r.completed_rounds()} rounds, at {_clock(r.ts)}")


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
        return (runs_table(results, f"{len(results)} workload runs (totals)", lambda r: _clock(r.ts),
                           lambda r: _ran(r.label or r.workload, r.ts, lessons)),)
    out = []
    for r in results:
        named = _ran(r.label or r.workload, r.ts, lessons)
        if r.table:
            out.append(single_table(r, f"{named} at {_clock(r.ts)}"))
            continue
        params = ", ".join(f"{k}={v}" for k, v in r.params.items())
        out.append(single_table(r, f"{named} ({params}), one run, at {_clock(r.ts)}"))
    return tuple(out)


def _exact_waits_table(reader: SessionReader) -> list[ResultTable]:
    """The exact OS waits of the session (the eBPF tracer's), per class and syscall; none when not traced."""
    table = exact_waits_table(reader)
    if table is None:
        return []
    return [ResultTable(title=table.title, header=table.header,
                        rows=tuple(tuple(text_cell(v) for v in row) for row in table.rows),
                        facts=(table.facts,) if table.facts else ())]


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
    plots = [timeline_plot(reader, notes, t0, t1), wait_plot(reader, t0, t1), *hotspot_plots(reader)]
    cards = tuple(reader.events(kinds=[LessonCard]))
    captures = []
    for cap, why in selected_captures(reader, notes, max_captures, decoder, cards):
        about = [n for n in notes if n.target.kind in (NoteKind.CAPTURE, NoteKind.BYTES) and n.target.ts is not None
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
    problems = tuple(p.message for p in reader.events(kinds=[Problem, LostConnection]))
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
