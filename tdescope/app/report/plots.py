"""Report plots drawn as small self-contained SVG documents, without Qt or matplotlib.

Why SVG by hand: app/ may not import Qt, matplotlib is not a dependency, and the
plots a report needs (stacked bars, horizontal bars, an icicle flame graph, a
timeline of lanes) are rectangles and text. SVG embeds in HTML as an image
(``data:image/svg+xml;base64``), stays sharp when printed, and Qt's SVG renderer
rasterises the same documents for the PDF.
"""

from __future__ import annotations

import colorsys
import html
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "SIDE_COLORS", "CLASS_COLORS", "TimelineLane", "stacked_bars", "horizontal_bars", "flame_graph", "timeline",
           "entropy_strip"]

#: One colour per workload side, the same in the window (timeline, A/B chart) and the report.
SIDE_COLORS = {"encrypted": "#d6604d", "plain": "#4393c3"}

#: One colour per OS wait class (matches the live views where they exist).
CLASS_COLORS = {
    "CPU": "#4caf50", "File I/O": "#1f77b4", "Sync": "#ff7f0e", "Memory operation": "#9467bd",
    "Lock": "#d62728", "Network": "#17becf", "Idle": "#c7c7c7", "Other": "#8c564b",
}
_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")
_FONT = 'font-family="DejaVu Sans, Arial, sans-serif"'


def _esc(text) -> str:
    return html.escape(str(text), quote=True)


def _svg(width: int, height: int, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" {_FONT} font-size="11">'
            f'<rect width="{width}" height="{height}" fill="white"/>' + "".join(body) + "</svg>")


def _hsl(h: float, s: float, light: float) -> str:
    # hex, not CSS hsl: Qt's SVG renderer (used for the PDF) implements SVG Tiny, which lacks it
    r, g, b = colorsys.hls_to_rgb(h / 360.0, light, s)
    return f"#{int(r * 255):02x}{int(g * 255):02x}{int(b * 255):02x}"


def _color(name: str, i: int) -> str:
    return CLASS_COLORS.get(name) or _PALETTE[i % len(_PALETTE)]


def _empty(width: int, height: int, text: str) -> str:
    return _svg(width, height, [f'<text x="{width / 2}" y="{height / 2}" text-anchor="middle" fill="#888">'
                                f'{_esc(text)}</text>'])


def stacked_bars(buckets: Sequence[float], series: Mapping[str, Sequence[float]], t0: float,
                 width: int = 900, height: int = 260, unit: str = "samples") -> str:
    """Stacked columns over time (waits per class per bucket), with a legend.

    ``buckets`` are bucket start times (epoch s); ``series`` class -> value per bucket.
    """
    if not buckets or not series:
        return _empty(width, height, "no wait samples recorded")
    left, right, top, bottom = 50, 150, 10, 30
    pw, ph = width - left - right, height - top - bottom
    totals = [sum(s[i] for s in series.values()) for i in range(len(buckets))]
    peak = max(totals) or 1
    bw = pw / len(buckets)
    body = [f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" stroke="#444"/>',
            f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{peak:g}</text>',
            f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">0</text>',
            f'<text x="12" y="{top + ph / 2}" transform="rotate(-90 12 {top + ph / 2})" '
            f'text-anchor="middle">{_esc(unit)}</text>']
    base = [0.0] * len(buckets)
    for ci, (name, values) in enumerate(series.items()):
        color = _color(name, ci)
        for i, v in enumerate(values):
            if v <= 0:
                continue
            h = v / peak * ph
            y = top + ph - base[i] / peak * ph - h
            body.append(f'<rect x="{left + i * bw:.2f}" y="{y:.2f}" width="{max(bw - 0.3, 0.6):.2f}" '
                        f'height="{h:.2f}" fill="{color}"/>')
            base[i] += v
        ly = top + 14 * ci
        body.append(f'<rect x="{left + pw + 12}" y="{ly}" width="10" height="10" fill="{color}"/>'
                    f'<text x="{left + pw + 26}" y="{ly + 9}">{_esc(name)}</text>')
    span = buckets[-1] - t0 + (buckets[1] - buckets[0] if len(buckets) > 1 else 1)
    for k in range(5):
        x = left + pw * k / 4
        body.append(f'<text x="{x:.1f}" y="{height - 10}" text-anchor="middle">+{span * k / 4:.0f} s</text>')
    return _svg(width, height, body)


def horizontal_bars(rows: Sequence[tuple[str, float, str]], width: int = 900, unit: str = "%",
                    title: str = "") -> str:
    """One bar per row ``(label, value, note)``, longest first as given."""
    if not rows:
        return _empty(width, 60, "no hotspot samples recorded")
    bar_h, label_w = 18, 330
    height = 20 + bar_h * len(rows) + (16 if title else 0)
    peak = max(v for _, v, _ in rows) or 1
    body = []
    y0 = 16 if title else 4
    if title:
        body.append(f'<text x="4" y="12" font-weight="bold">{_esc(title)}</text>')
    for i, (label, value, note) in enumerate(rows):
        y = y0 + i * bar_h
        w = value / peak * (width - label_w - 90)
        short = label if len(label) <= 48 else label[:45] + "…"
        body.append(f'<text x="{label_w - 6}" y="{y + 13}" text-anchor="end">{_esc(short)}</text>'
                    f'<rect x="{label_w}" y="{y + 2}" width="{max(w, 1):.1f}" height="{bar_h - 5}" '
                    f'fill="{"#d62728" if note == "crypto" else "#1f77b4"}"/>'
                    f'<text x="{label_w + w + 4:.1f}" y="{y + 13}">{value:.1f}{_esc(unit)}</text>')
    return _svg(width, height, body)


def flame_graph(stacks: Mapping[str, int], width: int = 900, max_depth: int = 18) -> str:
    """A flame graph of folded stacks ``"a;b;c" -> samples``, roots at the bottom as in the window's."""
    total = sum(stacks.values())
    if not total:
        return _empty(width, 60, "no call stacks recorded")
    tree = _prefix_tree(stacks, total / width, max_depth)
    row_h = 17
    boxes: list[tuple[str, int, float, float, int]] = []  # (name, samples, x, width, depth)

    def walk(node: dict, x: float, depth: int) -> None:
        for name, (n, children) in sorted(node.items(), key=lambda kv: -kv[1][0]):
            w = n / total * width
            if w < 1.0:
                continue
            boxes.append((name, n, x, w, depth))
            walk(children, x, depth + 1)
            x += w

    walk(tree, 0.0, 0)
    top = max((b[4] for b in boxes), default=0)
    body: list[str] = []
    for name, n, x, w, depth in boxes:
        hue = (sum(map(ord, name)) * 37) % 60  # warm colours, stable per name
        y = (top - depth) * row_h
        body.append(f'<g><title>{_esc(name)} ({n} samples, {n / total * 100:.1f}%)</title>'
                    f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" height="{row_h - 1}" '
                    f'fill="{_hsl(hue, 0.85, 0.60 + depth % 3 * 0.05)}" stroke="white" stroke-width="0.5"/>')
        if w > 40:
            chars = int(w / 6.5)
            label = name if len(name) <= chars else name[:max(chars - 1, 1)] + "…"
            body.append(f'<text x="{x + 3:.2f}" y="{y + 12}" font-size="10">{_esc(label)}</text>')
        body.append("</g>")
    return _svg(width, (top + 1) * row_h + 2, body)


def _prefix_tree(stacks: Mapping[str, int], min_samples: float, max_depth: int) -> dict:
    """``{frame: [samples, children]}`` for the prefixes worth at least ``min_samples``.

    Built level by level, splitting only the groups of stacks whose prefix is
    wide enough to draw (one pixel), so an hour of perf windows with hundreds of
    thousands of distinct stacks costs a few passes, not one node per frame.
    """
    tree: dict = {}
    level = [(tree, [(s.split(";", max_depth)[:max_depth], n) for s, n in stacks.items()])]
    depth = 0
    while level and depth < max_depth:
        deeper = []
        for node, group in level:
            by_frame: dict[str, list] = {}
            for frames, n in group:
                if len(frames) > depth:
                    by_frame.setdefault(frames[depth], []).append((frames, n))
            for frame, members in by_frame.items():
                weight = sum(n for _, n in members)
                if weight >= min_samples:
                    entry = node[frame] = [weight, {}]
                    deeper.append((entry[1], members))
        level = deeper
        depth += 1
    return tree


@dataclass(frozen=True, slots=True)
class TimelineLane:
    """One row of the timeline: ``spans`` are (start, end, label) and ``ticks`` (ts, label)."""

    name: str
    spans: tuple[tuple[float, float, str], ...] = ()
    ticks: tuple[tuple[float, str], ...] = ()
    color: str = "#1f77b4"


def timeline(lanes: Sequence[TimelineLane], t0: float, t1: float, width: int = 720) -> str:
    """Lanes of spans and ticks on one time axis (workload sides, probe windows, captures, notes).

    720 px wide with 30-px lanes: on an A4 page (640 px of text width) its labels keep a readable size.
    """
    if not lanes or t1 <= t0:
        return _empty(width, 60, "nothing recorded on the timeline")
    left, lane_h = 130, 30
    pw = width - left - 10
    height = lane_h * len(lanes) + 30

    def x(ts: float) -> float:
        return left + (ts - t0) / (t1 - t0) * pw

    body = []
    for i, lane in enumerate(lanes):
        y = i * lane_h + 4
        body.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{_esc(lane.name)}</text>'
                    f'<line x1="{left}" y1="{y + lane_h - 3}" x2="{left + pw}" y2="{y + lane_h - 3}" stroke="#eee"/>')
        for s, e, label in lane.spans:
            w = max(x(e) - x(s), 1.5)
            body.append(f'<g><title>{_esc(label)}</title><rect x="{x(s):.1f}" y="{y + 3}" width="{w:.1f}" '
                        f'height="{lane_h - 9}" fill="{lane.color}" opacity="0.8"/></g>')
            if w > 60:
                body.append(f'<text x="{x(s) + 3:.1f}" y="{y + 15}" fill="white" font-size="10">'
                            f'{_esc(label[: int(w / 6)])}</text>')
        for ts, label in lane.ticks:
            body.append(f'<g><title>{_esc(label)}</title><line x1="{x(ts):.1f}" y1="{y + 2}" x2="{x(ts):.1f}" '
                        f'y2="{y + lane_h - 5}" stroke="{lane.color}" stroke-width="1.5"/></g>')
    axis_y = lane_h * len(lanes) + 4
    body.append(f'<line x1="{left}" y1="{axis_y}" x2="{left + pw}" y2="{axis_y}" stroke="#444"/>')
    for k in range(5):
        ts = t0 + (t1 - t0) * k / 4
        anchor = "end" if k == 4 else "middle"  # the last label ends at the axis' end: never cut
        body.append(f'<text x="{x(ts):.1f}" y="{axis_y + 16}" text-anchor="{anchor}">'
                    f'{time.strftime("%H:%M:%S", time.localtime(ts))}</text>')
    return _svg(width, height, body)


def entropy_strip(before: Sequence[float], after: Sequence[float], width: int = 420) -> str:
    """Two rows of per-chunk entropy (0 white .. 8 bits/byte dark red): ciphertext vs plaintext."""
    n = max(len(before), len(after), 1)
    cw = (width - 60) / n
    body = []
    for row, (name, values) in enumerate((("before", before), ("after", after))):
        y = row * 16 + 2
        body.append(f'<text x="52" y="{y + 11}" text-anchor="end" font-size="10">{name}</text>')
        for i, v in enumerate(values):
            level = max(0.0, min(v / 8.0, 1.0))
            body.append(f'<rect x="{56 + i * cw:.2f}" y="{y}" width="{cw + 0.2:.2f}" height="13" '
                        f'fill="{_hsl(5, 0.75, 0.97 - level * 0.6)}"><title>{v:.2f} bits/byte</title></rect>')
    return _svg(width, 36, body)
