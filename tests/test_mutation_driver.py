"""The mutation driver's sampling and interval logic (bench/bench_mutation.py), without running mutmut."""

from __future__ import annotations

import math

import pytest

from bench import bench_mutation as bm


@pytest.mark.parametrize(("killed", "n", "low", "high"), [
    # closed forms: 0 of n -> (0, z²/(n+z²)), n of n -> (n/(n+z²), 1)
    (0, 10, 0.0, 100 * bm.Z95 ** 2 / (10 + bm.Z95 ** 2)),
    (10, 10, 100 * 10 / (10 + bm.Z95 ** 2), 100.0),
    # p = 0.9, n = 150 (Wilson 1927; as statsmodels' proportion_confint(135, 150, method="wilson"))
    (135, 150, 84.1565, 93.8459),
    (1, 2, 9.4531, 90.5469),  # symmetric about 1/2
])
def test_wilson_interval(killed, n, low, high):
    lo, hi = bm.wilson(killed, n)
    assert lo == pytest.approx(low, abs=1e-3) and hi == pytest.approx(high, abs=1e-3)
    assert lo <= 100 * killed / n <= hi


def test_wilson_interval_narrows_with_n_and_covers_nothing_when_empty():
    assert bm.wilson(0, 0) == (0.0, 100.0)
    widths = [math.fsum((-a, b)) for a, b in (bm.wilson(9 * k, 10 * k) for k in (15, 60, 240))]
    assert widths == sorted(widths, reverse=True) and widths[0] > 2 * widths[-1] * 0.9


def test_the_sample_depends_on_the_seed_only():
    names = [f"m.x_f__mutmut_{i}" for i in range(1000)]
    a = bm.draw_sample(names, 150, 7)
    assert len(a) == len(set(a)) == 150 and set(a) <= set(names) and a == sorted(a)
    assert bm.draw_sample(list(reversed(names)), 150, 7) == a  # not mutmut's listing order
    assert bm.draw_sample(names, 150, 8) != a
    assert bm.draw_sample(names, None, 7) == sorted(names) == bm.draw_sample(names, 5000, 7)


def test_sample_size_has_a_floor():
    t = bm.TARGETS[0]
    assert bm.sample_size(t, None) is None
    assert bm.sample_size(t, 0) == bm.SAMPLE_MIN == 150
    assert bm.sample_size(t, 40) == 150 and bm.sample_size(t, 400) == 400
    assert all(t.sample >= bm.SAMPLE_MIN for t in bm.TARGETS)


def test_each_run_draws_a_new_seed_unless_one_is_given():
    seeds = {bm.choose_seed({}) for _ in range(5)}
    assert len(seeds) > 1  # from the clock, nanoseconds
    assert bm.choose_seed({"MUTATE_SEED": "18"}) == 18 and bm.choose_seed({"MUTATE_SEED": "0x12"}) == 18
    assert bm.choose_seed({"MUTATE_SEED": "18"}, given=5) == 5
    with pytest.raises(SystemExit, match="MUTATE_SEED='x' is not an integer"):
        bm.choose_seed({"MUTATE_SEED": "x"})


def test_modules_are_picked_by_name():
    assert [t.name for t in bm.select_targets(["postgres", "innodb_pages", "oracle-trace"])] == [
        "postgres pages", "innodb pages", "oracle trace"]
    assert [t.name for t in bm.select_targets(["oracle"])] == ["oracle blocks", "oracle block dump", "oracle trace"]
    assert bm.select_targets([]) == list(bm.TARGETS)
    with pytest.raises(SystemExit, match="no mutation target 'db2'"):
        bm.select_targets(["db2"])


def test_the_results_record_seed_n_killed_rate_interval_and_time():
    o = bm.Outcome("entropy", total=281, seconds=125, sampled=True, seed=42,
                   statuses={**{f"e__mutmut_{i}": "killed" for i in range(135)},
                             **{f"s__mutmut_{i}": "survived" for i in range(15)}, "x__mutmut_1": "not checked"})
    r = bm.record(o, {"s__mutmut_0": "--- a\n+++ b"}, "abc1234")
    assert (r["mode"], r["seed"], r["n"], r["killed"], r["rate"], r["interval"], r["seconds"]) == (
        "sample", 42, 150, 135, 90.0, [84.2, 93.8], 125)
    md = bm.render({"entropy": {"sample": r}})
    assert "| entropy | 281 | 150 | 0 | 135 | 90.0 % | 84.2–93.8 % | 42 | 2 min |" in md
    assert "## Every mutant (`make mutate-full`)\n\nnot run" in md and "### s__mutmut_0" in md


def test_every_mutated_function_gets_all_the_targets_tests(tmp_path):
    """A call made while a module-scoped fixture is built is credited to one test only: widen to all."""
    stats = tmp_path / "mutmut-stats.json"
    stats.write_text('{"tests_by_mangled_function_name": {"m.x_a": ["t::one"], "m.x_b": ["t::two", "t::one"], '
                     '"m.x_c": []}, "duration_by_test": {"t::one": 1.0}}')
    assert bm.widen_test_selection(stats) == 2
    data = __import__("json").loads(stats.read_text())
    assert data["tests_by_mangled_function_name"] == {k: ["t::one", "t::two"] for k in ("m.x_a", "m.x_b", "m.x_c")}
    assert data["duration_by_test"] == {"t::one": 1.0}
    assert bm.widen_test_selection(tmp_path / "none.json") == 0



@pytest.mark.parametrize("body, word", [("while True:\n            pass", "timeout"), ("pass", "survived"),
                                        ("assert 0", "killed")], ids=["loops", "passes", "fails"])
def test_a_timeout_is_judged_by_cpu_time_not_by_the_clock(tmp_path, body, word):
    """A mutmut timeout is run again under RLIMIT_CPU: only a run that uses up its CPU is a timeout."""
    import os

    from bench import mutation_timeouts as mt

    (tmp_path / "test_it.py").write_text(
        f"import os\n\ndef test_it():\n    if os.environ['MUTANT_UNDER_TEST'] == 'm.x_f__mutmut_1':\n"
        f"        {body}\n")
    code, cpu = mt.run_tests(tmp_path, dict(os.environ), ("test_it.py",), "m.x_f__mutmut_1", 2)
    assert mt.verdict(code) == word
    assert cpu >= 1.5 if word == "timeout" else cpu < 30
    if word != "timeout":  # (a loop would use up the check's CPU floor)
        statuses = {"m.x_f__mutmut_1": "timeout", "m.x_f__mutmut_2": "killed"}
        counts = mt.recheck(tmp_path, dict(os.environ), ("test_it.py",), statuses)
        assert (counts["rechecked"], counts[word]) == (1, 1)
        assert statuses == {"m.x_f__mutmut_1": word, "m.x_f__mutmut_2": "killed"}


def test_a_stopped_full_run_reports_the_mutants_it_ran():
    o = bm.Outcome("sqlite pages", total=1798, seconds=3000, error="stopped: 3 of 1798 mutants run",
                   statuses={"a__mutmut_1": "killed", "a__mutmut_2": "survived", "a__mutmut_3": "timeout",
                             **{f"b__mutmut_{i}": "not checked" for i in range(1795)}})
    r = bm.record(o, {}, "abc1234")
    assert (r["mode"], r["run"], r["n"], r["killed"]) == ("full", 3, 3, 2)
    md = bm.render({"sqlite pages": {"full": r}})
    assert "| sqlite pages | 1798 | 3 | 0 | 2 | 66.7 % (below 90 %) |" in md
    assert "| 3 run (stopped; random order) |" in md and "stopped: 3 of 1798 mutants run" in md
