"""What parsing perf script's output costs the workbench's own process, with and without the frame cache.

A running observation parses every sample perf script prints (:func:`~tdescope.app.hotspots.perf_script.
iter_perf_script`) in the workbench's process, at its priority, while the target competes for the same cores.
Text: ``bench/fast_target.py`` (a SQLCipher scan, busy on one core) recorded for 5 s as the sampler records
(DWARF, 16 KiB, 499 Hz), printed by ``perf script`` with the sampler's fields. Each pair parses that text
once uncached (the parser's ``__wrapped__`` frame function) and once with a cleared cache (so only the
repeats inside these 5 s hit: a running observation keeps its cache warm across windows and does better),
the order alternated; the figure is the median of the paired ratios with its 95 % interval, and the CPU
(``time.process_time``) per sample of each.

Run alone: ``python -m bench.bench_perf_parse [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

from bench._report import goal
from bench._steady import median_interval

goal("parse_samples", "samples in the recorded text (5 s of a busy SQLCipher scan, DWARF 16 KiB, 499 Hz)")
goal("parse_frames_distinct_pct", "distinct frame lines among all frame lines, %")
goal("parse_uncached_us_per_sample", "parsing CPU per sample without the frame cache, µs (median)")
goal("parse_cached_us_per_sample", "parsing CPU per sample with the frame cache, cold at start, µs (median)")
goal("parse_cached_ratio", "cached / uncached parsing CPU, median of paired ratios (95 % interval in _ci95)")


def _record(tmp: str) -> list[str]:
    from tdescope.app.hotspots.perf_stream import PERF_SCRIPT_FIELDS

    stop = os.path.join(tmp, "stop")
    target = subprocess.Popen([sys.executable, os.path.join(os.path.dirname(__file__), "fast_target.py"),
                               os.path.join(tmp, "db"), stop], stdout=subprocess.PIPE, text=True)
    try:
        pid = target.stdout.readline().strip()
        data = os.path.join(tmp, "perf.data")
        subprocess.run(["perf", "record", "-q", "-F", "499", "--call-graph", "dwarf,16384", "-e", "cpu-clock",
                        "-p", pid, "-o", data, "--", "sleep", "5"], check=True, capture_output=True)
    finally:
        open(stop, "w").close()
        target.communicate(timeout=60)  # it prints a line per scan until it sees the stop file
    out = subprocess.run(["perf", "script", "-i", data, "-F", PERF_SCRIPT_FIELDS, "--no-inline"],
                         check=True, capture_output=True, text=True).stdout
    return out.splitlines(True)


def run(quick: bool) -> dict:
    from tdescope.app.hotspots import perf_script

    pairs = 11 if quick else 21
    with tempfile.TemporaryDirectory() as tmp:
        lines = _record(tmp)
    frames = [ln for ln in lines if ln.startswith("\t")]
    cached_fn = perf_script._parse_frame

    def parse(cached: bool) -> tuple[float, int]:
        cached_fn.cache_clear()
        perf_script._parse_frame = cached_fn if cached else cached_fn.__wrapped__
        try:
            t = time.process_time()
            n = sum(1 for _ in perf_script.iter_perf_script(lines))
            return time.process_time() - t, n
        finally:
            perf_script._parse_frame = cached_fn

    ratios, plain, cached = [], [], []
    n = 1
    for i in range(pairs):
        got = {}
        for mode in ((False, True) if i % 2 == 0 else (True, False)):
            got[mode], n = parse(mode)
        ratios.append(got[True] / got[False])
        plain.append(got[False])
        cached.append(got[True])
    mid, lo, hi, _ = median_interval(ratios)
    return {
        "parse_samples": n,
        "parse_frames_distinct_pct": round(100 * len(set(frames)) / max(1, len(frames)), 1),
        "parse_uncached_us_per_sample": round(1e6 * median_interval(plain)[0] / max(1, n), 1),
        "parse_cached_us_per_sample": round(1e6 * median_interval(cached)[0] / max(1, n), 1),
        "parse_cached_ratio": round(mid, 3),
        "parse_cached_ratio_ci95": [round(lo, 3), round(hi, 3)],
        "parse_load_avg_1m": os.getloadavg()[0],
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
