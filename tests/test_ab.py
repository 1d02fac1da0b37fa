"""The A/B runner: interleaved rounds, paired ratios, medians with intervals, and ``tdescope ab``."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time

import pytest

from tdescope.app.ab.runner import ABRunner, round_order, summarize
from tdescope.app.ab.stats import median_interval, spread
from tdescope.app.engines.api import Workload, WorkloadControl, wanted_sides
from tdescope.app.errors import UserError
from tdescope.app.events import ABResult, PhaseTiming, RoundTime, WorkloadProgress, WorkloadResult
from tdescope.app.session.codec import decode, encode


def test_median_interval_is_the_median_and_a_bootstrap_band():
    assert median_interval([2.08, 1.51, 1.56, 1.05, 2.41]) == (1.56, 1.05, 2.41)  # 5 rounds: [min, max]
    med, low, high = median_interval([1.50, 1.52, 1.49, 1.51, 1.50, 1.53, 1.48, 1.50, 1.51, 1.52] * 2)
    assert med == 1.505 and 1.49 <= low <= 1.50 and 1.51 <= high <= 1.52
    assert median_interval([1.7]) == (1.7, 1.7, 1.7)
    assert all(math.isnan(v) for v in median_interval([float("nan"), float("inf")]))
    assert median_interval([3.0, 1.0, 2.0, 2.5]) == median_interval([1.0, 2.0, 2.5, 3.0])  # seeded: stable
    assert spread(2.0, 1.8, 2.2) == pytest.approx(0.1) and math.isnan(spread(0.0, 0.0, 0.0))


def test_rounds_alternate_after_an_encrypted_first_warmup():
    assert [round_order(n) for n in range(4)] == [("encrypted", "plain"), ("plain", "encrypted"),
                                                  ("encrypted", "plain"), ("plain", "encrypted")]


def _times(ratios, plain=1.0):
    out = [RoundTime(0, "encrypted", {"total": 99.0, "io": 1.0}), RoundTime(0, "plain", {"total": 1.0, "io": 1.0})]
    for n, r in enumerate(ratios, 1):
        out += [RoundTime(n, "encrypted", {"total": r * plain, "io": 2 * r}), RoundTime(n, "plain", {"total": plain, "io": 2.0})]
    return out


def test_summarize_pairs_rounds_and_skips_the_warmup_and_broken_rounds():
    times = _times([1.5, 1.4, 1.6]) + [RoundTime(4, "encrypted", {"total": 9.0})]  # round 4 has no plain side
    total, io = summarize(times)
    assert total.phase == "total" and total.ratios == (1.5, 1.4, 1.6) and total.ratio_median == 1.5
    assert (total.ratio_ci_low, total.ratio_ci_high) == (1.4, 1.6)
    assert total.encrypted_median_s == 1.5 and total.plain_median_s == 1.0
    assert io.phase == "io" and io.ratios == (1.5, 1.4, 1.6)
    assert summarize([RoundTime(0, "encrypted", {"total": 1.0})]) == ()


def test_warnings_say_noisy_busy_and_too_few():
    def result(ratios, other=0.0):
        times = tuple(_times(ratios))
        return ABResult(0.0, "w", "W", {}, len(ratios), 1, times, summarize(times), other_busy=other)
    assert result([1.5, 1.5, 1.51, 1.49, 1.5]).warnings() == []
    assert result([1.0, 1.5, 2.0, 1.2, 1.8]).warnings() == ["noisy: ±33 %, rerun or raise rounds"]
    assert result([1.5] * 5, other=0.4).warnings() == ["busy machine: other processes used 40 % of the CPUs"]
    assert "only 2 timed round(s)" in result([1.5, 1.5]).warnings()[0]


def test_the_result_survives_a_session_file_round_trip():
    times = tuple(_times([1.5, 1.4, 1.6]))
    res = ABResult(5.0, "ab_dml", "A/B DML", {"groups": 4}, 3, 1, times, summarize(times), "m", "off", 0.5, 0.1, 0.7)
    enc = encode(res)
    assert decode(enc.kind, enc.ts, enc.payload, {}) == res


def _workload(order_seen, fail_on=None):
    def run(params, control):
        sides = wanted_sides(params)
        order_seen.append(sides)
        time.sleep(0.02)  # long enough for /proc/stat's clock ticks to move
        control.emit(WorkloadProgress(0.0, "fake", sides[0], 1, 2, "half"))
        timings = tuple(PhaseTiming(s, "total", 0.002 if s == "encrypted" else 0.001) for s in sides)
        cancelled = fail_on is not None and len(order_seen) == fail_on
        if cancelled:
            control.cancel()
        return WorkloadResult(0.0, "fake", dict(params), timings, {}, cancelled)
    return Workload("fake", "Fake", "", {"n": 1}, run, sides=("encrypted", "plain"))


def test_runner_runs_each_side_alone_in_abba_order_and_reports_progress():
    seen, events = [], []
    result = ABRunner(_workload(seen), {"n": 1}, os.getpid(), rounds=3, warmup=1).run(WorkloadControl(events.append))
    assert seen == [("encrypted",), ("plain",), ("plain",), ("encrypted",), ("encrypted",), ("plain",),
                    ("plain",), ("encrypted",)]
    assert result.completed_rounds() == 3 and result.total().ratio_median == 2.0
    assert 0 <= result.other_busy <= result.machine_busy <= 1
    progress = [e for e in events if isinstance(e, WorkloadProgress)]
    assert [e.side for e in progress] == [s for (s,) in seen]  # each side's own events, for the timeline
    fractions = [e.run_fraction for e in progress]
    assert fractions == sorted(fractions) and 0 < fractions[0] < fractions[-1] < 1  # never goes back
    assert progress[0].message == "warm-up · half" and progress[-1].message == "round 3/3 · half"


def test_runner_keeps_the_busy_fractions_within_0_and_1_on_a_fully_busy_machine(monkeypatch):
    # /proc/stat in seconds: every tick busy, and the float division rounds above 1 (9.96 - 9.95 > 10.01 - 10.0)
    clock = iter([(9.95, 10.0), (9.96, 10.01)])
    monkeypatch.setattr("tdescope.app.ab.runner.machine_cpu_seconds", lambda: next(clock))
    result = ABRunner(_workload([]), {"n": 1}, None, rounds=1, warmup=0).run(WorkloadControl())
    assert result.machine_busy == 1.0 and 0 <= result.other_busy <= result.machine_busy


def test_runner_stops_on_cancel_and_keeps_what_completed():
    seen = []
    result = ABRunner(_workload(seen, fail_on=5), {}, None, rounds=5).run(WorkloadControl())
    assert result.cancelled and len(seen) == 5 and result.completed_rounds() == 1


def test_runner_refuses_a_workload_that_is_not_a_comparison():
    with pytest.raises(UserError, match="not an encrypted/plain comparison"):
        ABRunner(Workload("sql", "SQL", "", {}, lambda p, c: None), {}, None)


def test_wanted_sides():
    assert wanted_sides({}) == ("encrypted", "plain")
    assert wanted_sides({"sides": "plain, encrypted"}) == ("plain", "encrypted")
    with pytest.raises(ValueError, match="unknown side"):
        wanted_sides({"sides": "cold"})


def _tdescope(*args, timeout=240):
    return subprocess.run([sys.executable, "-m", "tdescope", *args], capture_output=True, text=True, timeout=timeout)


def test_ab_cli_on_the_sqlcipher_lab_gives_a_median_with_its_interval():
    proc = _tdescope("ab", "--lab", "sqlcipher", "--rounds", "3", "--set", "groups=6", "--set", "ids_per_group=400",
                     "--set", "cache_pages=20", "--json")  # a small page cache: pages go through the cipher
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["rounds"] == 3 and out["warmup"] == 1 and out["capture"] == "off"
    assert out["ratio_ci_low"] <= out["ratio_median"] <= out["ratio_ci_high"]
    # the cipher costs something on this DML: in the worker's CPU seconds, which a loaded machine does not
    # stretch as it stretches elapsed time (elapsed ratios of 0.95 were seen at load 8)
    cpu = {side: sum(r["server_cpu_s"] for r in out["raw"] if r["round"] > 0 and r["side"] == side)
           for side in ("encrypted", "plain")}
    assert cpu["encrypted"] > cpu["plain"], cpu
    assert [p["phase"] for p in out["phases"]][0] == "total" and len(out["phases"]) == 6
    assert [(r["round"], r["side"]) for r in out["raw"]] == [
        (0, "encrypted"), (0, "plain"), (1, "plain"), (1, "encrypted"), (2, "encrypted"), (2, "plain"),
        (3, "plain"), (3, "encrypted")]
    assert all(r["server_cpu_s"] is not None for r in out["raw"])
    assert out["params"]["groups"] == 6 and "sides" not in out["params"]


def test_ab_cli_text_and_bad_input():
    proc = _tdescope("ab", "--lab", "sqlcipher", "--rounds", "2", "--set", "groups=2", "--set", "ids_per_group=100")
    assert proc.returncode == 0, proc.stderr
    assert "2 timed rounds" in proc.stdout and "95 % interval" in proc.stdout and "\ntotal " in proc.stdout
    assert "warning: only 2 timed round(s)" in proc.stdout
    bad = _tdescope("ab", "--lab", "sqlcipher", "--set", "nope=1")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "parameters are groups" in bad.stderr
    bad = _tdescope("ab", "--lab", "sqlcipher", "--set", "groups=many")
    assert bad.returncode == 2 and "groups takes an int" in bad.stderr


def test_the_report_shows_the_median_its_interval_and_keeps_the_capture_round_out(tmp_path):
    import html as html_mod

    from tdescope.app.report.model import build_report, render_html
    from tdescope.app.session.file import SessionRecorder
    from tdescope.app.session.meta import SessionMeta
    from tdescope.app.session.reader import SessionReader

    path = tmp_path / "ab.tds"
    times = tuple(_times([1.5, 1.4, 1.6, 1.45, 1.55]))
    slow = (PhaseTiming("encrypted", "total", 9.0), PhaseTiming("plain", "total", 1.0))
    older_file_form = WorkloadResult(1.0, "ab_dml", {"round": "capture"}, slow, {})  # before capture_round existed
    capture_round = WorkloadResult(1.5, "ab_dml", {}, slow, {}, capture_round=True)
    assert older_file_form.capture_round
    with SessionRecorder(path, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(older_file_form)
        rec.record(capture_round)
        rec.record(ABResult(2.0, "ab_dml", "A/B DML (seed 000)", {}, 5, 1, times, summarize(times),
                            "bootstrap 95 % interval of the median", "separate round", 0.6, 0.05, 0.8))
    with SessionReader(path) as reader:
        report = build_report(reader)
        page = html_mod.unescape(render_html(report))
    (table,) = report.results  # the untimed capture round is not a result
    assert table.title.startswith("A/B DML (seed 000) — 5 rounds") and table.interval == "1.40–1.60"
    assert table.text_rows()[0] == ("total", "1.500", "1.000", "1.50×", "1.40–1.60")
    assert table.rows[0][3].value == 1.5 and table.rows[0][3].interval.low == 1.4  # numbers, not text
    assert "Encrypted / plain = <b>1.50×</b> (median; 95 % interval 1.40–1.60×)" in page
    assert "captures: separate round" in page and "9.00×" not in page


def test_ab_captures_in_an_untimed_round_first():
    """``--captures N``: a capture round before the timed rounds (no probe in a timed round); its pairs counted."""
    proc = _tdescope("ab", "--lab", "sqlcipher", "--rounds", "1", "--warmup", "0", "--set", "groups=2",
                     "--set", "ids_per_group=200", "--set", "cache_pages=20", "--captures", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["capture"] == "separate round" and out["rounds"] == 1
    assert "3 pairs captured in the untimed capture round" in proc.stderr
    bad = _tdescope("ab", "--lab", "sqlcipher", "--captures", "-1")
    assert bad.returncode != 0 and bad.stderr.strip() == "tdescope: --captures must be 0 or more"
