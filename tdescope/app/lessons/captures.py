"""The lessons that count or show captured pages (seed 003): decrypts per scan, a page before and after."""

from __future__ import annotations

from tdescope.app.events import Direction, LessonCard, PageCapture, WorkloadProgress, WorkloadResult
from tdescope.app.lessons.run import LessonRun
from tdescope.app.lessons.verdicts import DIFFERENT, NO_COMPARISON, SAME
from tdescope.app.probe.entropy import shannon_entropy
from tdescope.app.probe.window import CaptureLimits

__all__ = ["page_before_after", "scan_decrypts"]

#: Runs of the before/after lesson's workload at most, while none of its captured pages holds the marker.
_BEFORE_AFTER_RUNS = 3


def _scan_windows(progress: list[WorkloadProgress], scans: tuple[str, ...]) -> dict[str, tuple[float, float]]:
    """Per scan, the span between its first and last progress event (a scan announces its start and end)."""
    spans: dict[str, tuple[float, float]] = {}
    for ev in progress:
        if ev.side in scans:
            start, _ = spans.get(ev.side, (ev.ts, ev.ts))
            spans[ev.side] = (start, ev.ts)
    return spans


def scan_decrypts(run: LessonRun) -> LessonCard:
    """Seed 003: probe hits of the page decrypt (or read) function in a cold and then a warm scan."""
    workload, recipe = run.workload(), run.recipe()
    params = run.params(workload)
    run.step(2, f"arming {recipe.label}")
    ran = run.experiment(workload, params, recipe,
                         limits=CaptureLimits(max_captures=100_000, max_seconds=300, max_hits_per_s=100_000))
    run.step(5, "counting probe hits in each scan")
    spans = _scan_windows(ran.of(WorkloadProgress), ("cold", "warm"))
    if set(spans) != {"cold", "warm"}:
        return run.card([], NO_COMPARISON, f"the workload did not report both scans (saw: {', '.join(spans)})",
                        params=params)
    captures = ran.of(PageCapture)
    count = {scan: sum(1 for c in captures if lo <= c.ts <= hi) for scan, (lo, hi) in spans.items()}
    first, second = count["cold"], count["warm"]
    figures = {"first_scan_decrypts": first, "second_scan_decrypts": second, "probe": recipe.symbols[0],
               "captures_in_window": len(captures)}
    verb = "reads" if recipe.direction is Direction.READ else "decrypts"
    ours = [f"{recipe.symbols[0]} calls in the first (cold) scan: {first}",
            f"{recipe.symbols[0]} calls in the second (warm) scan: {second}"]
    evidence = [f"probe: {recipe.label} ({run.probe_name(ran)})",
                f"cold scan {(spans['cold'][1] - spans['cold'][0]) * 1000:.0f} ms, "
                f"warm scan {(spans['warm'][1] - spans['warm'][0]) * 1000:.0f} ms"]
    for result in ran.of(WorkloadResult):
        for scan, values in result.counts.items():
            if scan in ("cold", "warm"):
                evidence += [f"{scan} scan: {name} {value}" for name, value in values.items()]
    if captures:
        evidence.append(f"captures #{captures[0].seq}–#{captures[-1].seq} on the timeline")
    if run.backend_note:
        evidence.append(run.backend_note)
    if first > 0 and second == 0:
        verdict, text = SAME, f"{verb} only in the first scan: {first} then {second}, as published (then none)"
    else:
        verdict, text = DIFFERENT, f"{first} {verb} in the first scan and {second} in the second; published: none in the second"
    return run.card(ours, verdict, text, evidence, figures, params)


def page_before_after(run: LessonRun) -> LessonCard:
    """Seed 003's gdb macro: one page before and after the decrypt call; the marker only in the plaintext."""
    workload, recipe = run.workload(), run.recipe()
    params = run.params(workload)
    marker = run.binding.marker.encode()
    captures: list[PageCapture] = []
    runs = 0
    # the stop budget may pause a stopping probe (gdb) before the pages with rows come by, on a busy
    # machine or target: the workload runs again, a bounded number of times, until one is caught
    while runs < _BEFORE_AFTER_RUNS and not any(marker in c.plaintext for c in captures):
        runs += 1
        run.step(1, f"arming {recipe.label}" + (f" (run {runs}: no page with the marker yet)" if runs > 1 else ""))
        ran = run.experiment(workload, params, recipe, limits=CaptureLimits(max_captures=400, max_seconds=120))
        captures += [c for c in ran.of(PageCapture) if c.plaintext and c.ciphertext]
    run.step(3, f"looking for {run.binding.marker!r} in the captured pages")
    with_marker = [c for c in captures if marker in c.plaintext]
    in_cipher = [c for c in captures if marker in c.ciphertext]
    figures = {"captures": len(captures), "marker_in_plaintext": len(with_marker),
               "marker_in_ciphertext": len(in_cipher)}
    ours = [f"{len(captures)} pages captured at {recipe.symbols[0]}, before and after the call",
            f"marker {run.binding.marker!r} in the plaintext of {len(with_marker)}, in the ciphertext of {len(in_cipher)}"]
    evidence = [f"the workload ran {runs} times: no page with the marker was caught before"] if runs > 1 else []
    if with_marker:
        page = with_marker[0]
        h_before, h_after = shannon_entropy(page.ciphertext), shannon_entropy(page.plaintext)
        figures.update({"seq": page.seq, "pgno": page.pgno, "entropy_ciphertext": round(h_before, 3),
                        "entropy_plaintext": round(h_after, 3), "marker_offset": page.plaintext.find(marker)})
        where = f" (page {page.pgno})" if page.pgno is not None and page.pgno >= 0 else f" ({len(page.plaintext)} bytes)"
        ours.append(f"capture #{page.seq}{where}: ciphertext {h_before:.2f} bits/byte, "
                    f"plaintext {h_after:.2f} bits/byte")
        evidence.append(f"capture #{page.seq}: the marker at offset 0x{page.plaintext.find(marker):04x} of the "
                        f"plaintext; ciphertext starts {page.ciphertext[:16].hex(' ')}")
    if with_marker and not in_cipher:
        verdict, text = SAME, (f"ciphertext before the call, readable rows after it: the marker in "
                               f"{len(with_marker)} plaintext pages, in no ciphertext")
    else:
        verdict, text = DIFFERENT, (f"marker in {len(with_marker)} plaintext and {len(in_cipher)} ciphertext pages "
                                    f"of {len(captures)}")
    return run.card(ours, verdict, text, evidence, figures, params)
