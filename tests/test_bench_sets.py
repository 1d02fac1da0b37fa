"""`make bench-quick` stays quick: the slow benchmarks run in a full run or by name only."""

import re
from pathlib import Path

from bench.__main__ import QUICK_SUITES, SLOW_SUITES, STANDALONE, SUITES, chosen

BENCH = Path(__file__).parent.parent / "bench"


def test_the_quick_set_leaves_out_the_slow_benchmarks():
    quick = chosen(quick=True, only=None)
    assert quick == QUICK_SUITES
    for slow in ("bench_mariadb", "bench_mutation", "bench_callgraph", "bench_pgtde"):
        assert f"bench.{slow}" not in quick and f"bench.{slow}" in chosen(quick=False, only=None)
    assert chosen(quick=True, only=["bench_mutation"]) == ["bench.bench_mutation"]  # by name, quick or not
    assert chosen(quick=False, only=None, slow=True) == SLOW_SUITES


def test_every_slow_make_target_names_slow_benchmarks():
    """`make bench-slow` and the named targets run slow suites only (the quick set is `make bench-quick`)."""
    makefile = (BENCH.parent / "Makefile").read_text()
    for names in re.findall(r"-m bench --only ([\w ]+)", makefile):
        assert {f"bench.{n}" for n in names.split()} <= set(SLOW_SUITES), names
    assert "-m bench --slow" in makefile and "-m bench --quick" in makefile


def test_every_benchmark_module_is_in_one_set():
    modules = {f"bench.{p.stem}" for p in BENCH.glob("bench_*.py")}
    assert modules == set(SUITES) | set(STANDALONE) and not set(QUICK_SUITES) & set(SLOW_SUITES)


def test_the_sample_cost_bench_measures_with_one_loop():
    """Its perf modes, wait samplers and the whole observation are measured by `_paired` alone (issue #25
    leftovers: the paired on/off loop was written three times)."""
    text = (BENCH / "bench_sample_cost.py").read_text()
    assert len(re.findall(r"for \w+ in range\(pairs\)", text)) == 1
    assert text.count("_paired(") == 4  # its definition and the three parts
    assert text.count("subprocess.Popen(") == 1  # one way to start the loop (`_Loop`)
