"""Run the benchmarks: ``python -m bench [--quick | --slow] [--only NAME ...]``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

from bench import _report

#: Benchmark modules, each with ``run(quick: bool) -> dict`` of figures. ``--quick`` runs these, with
#: fewer repetitions (docs/design-notes.md, branch suite, gives what that took).
QUICK_SUITES = ["bench.bench_capture", "bench.bench_armed", "bench.bench_observe", "bench.bench_gui",
                "bench.bench_startup", "bench.bench_session", "bench.bench_gdb_kill", "bench.bench_ebpf",
                "bench.bench_waits"]
#: Slow ones (minutes each even when quick: a MariaDB server, a pg_tde build, mutants, call-graph modes):
#: in a full run, or by name with ``--only``.
SLOW_SUITES = ["bench.bench_mariadb", "bench.bench_mutation", "bench.bench_callgraph", "bench.bench_gdb_threads",
               "bench.bench_pgtde", "bench.bench_observe_choices", "bench.bench_perf_parse", "bench.bench_views",
               "bench.bench_agent", "bench.bench_ssh", "bench.bench_ssh_dsn", "bench.bench_seek"]
SUITES = QUICK_SUITES + SLOW_SUITES
#: Run on their own with arguments of their own (``python -m bench.NAME --help``), never from here.
STANDALONE = ["bench.bench_watch_sql", "bench.bench_postgres", "bench.bench_sample_cost"]


def chosen(quick: bool, only: list[str] | None, slow: bool = False) -> list[str]:
    """The suites a run takes: those named by ``only``, else the quick set, the slow set or all."""
    if only:
        return [name for name in SUITES if name.split(".")[-1] in only]
    return list(QUICK_SUITES if quick else SLOW_SUITES if slow else SUITES)


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true",
                        help="the quick suites with fewer repetitions; the slow ones: --slow, or --only NAME")
    parser.add_argument("--slow", action="store_true", help="the slow suites only (minutes each)")
    parser.add_argument("--only", nargs="*", help="module names to run (e.g. bench_capture)")
    args = parser.parse_args()
    if args.quick and args.slow:
        parser.error("--quick and --slow pick different suites: give one")
    results: dict = {}
    for name in chosen(args.quick, args.only, args.slow):
        t0 = time.time()
        module = importlib.import_module(name)
        try:
            figures = module.run(quick=args.quick)
        except Exception as exc:  # noqa: BLE001 - one failing suite must not lose the others
            print(f"{name}: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            figures = {}
        print(f"{name}: {json.dumps(figures)} ({time.time() - t0:.0f} s)", flush=True)
        results.update(figures)
    path = _report.write(results, args.quick)
    print(path.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
