"""The report's plots read like the window's: a flame graph with its roots at the bottom, a time axis
whose last label is inside the picture."""

from __future__ import annotations

import re

from tdescope.app.report.plots import TimelineLane, flame_graph, timeline


def _rects(svg: str) -> dict[str, float]:
    out = {}
    for title, y in re.findall(r'<title>([^ ]+) \(.*?</title><rect x="[\d.]+" y="([\d.]+)"', svg):
        out[title] = float(y)
    return out


def test_flame_graph_roots_at_the_bottom_as_in_the_window():
    ys = _rects(flame_graph({"main;query;decrypt;aes": 60, "main;query;parse": 40}))
    assert ys["main"] > ys["query"] > ys["decrypt"] > ys["aes"]
    assert ys["parse"] == ys["decrypt"]


def test_timeline_last_tick_label_ends_inside():
    svg = timeline([TimelineLane("workload", (), ((5.0, "x"),), "#c00")], 0.0, 10.0, width=600)
    labels = re.findall(r'<text x="([\d.]+)" y="[\d.]+" text-anchor="(\w+)">\d\d:\d\d:\d\d</text>', svg)
    assert len(labels) == 5 and labels[-1][1] == "end" and float(labels[-1][0]) <= 600
