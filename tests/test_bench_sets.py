"""`make bench-quick` stays quick: the slow benchmarks run in a full run or by name only."""

from pathlib import Path

from bench.__main__ import QUICK_SUITES, SLOW_SUITES, STANDALONE, SUITES, chosen

BENCH = Path(__file__).parent.parent / "bench"


def test_the_quick_set_leaves_out_the_slow_benchmarks():
    quick = chosen(quick=True, only=None)
    assert quick == QUICK_SUITES
    for slow in ("bench_mariadb", "bench_mutation", "bench_callgraph", "bench_pgtde"):
        assert f"bench.{slow}" not in quick and f"bench.{slow}" in chosen(quick=False, only=None)
    assert chosen(quick=True, only=["bench_mutation"]) == ["bench.bench_mutation"]  # by name, quick or not


def test_every_benchmark_module_is_in_one_set():
    modules = {f"bench.{p.stem}" for p in BENCH.glob("bench_*.py")}
    assert modules == set(SUITES) | set(STANDALONE) and not set(QUICK_SUITES) & set(SLOW_SUITES)
