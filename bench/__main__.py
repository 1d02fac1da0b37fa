"""Run the benchmarks: ``python -m bench [--quick] [--only NAME ...]``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time

from bench import _report

#: Benchmark modules, each with ``run(quick: bool) -> dict`` of figures.
SUITES = ["bench.bench_capture", "bench.bench_armed", "bench.bench_observe", "bench.bench_gui",
          "bench.bench_startup", "bench.bench_session", "bench.bench_gdb_kill", "bench.bench_ebpf",
          "bench.bench_mariadb", "bench.bench_mutation", "bench.bench_callgraph", "bench.bench_gdb_threads",
          "bench.bench_pgtde", "bench.bench_waits", "bench.bench_agent", "bench.bench_ssh"]


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (<= 3 minutes)")
    parser.add_argument("--only", nargs="*", help="module names to run (e.g. bench_capture)")
    args = parser.parse_args()
    results: dict = {}
    for name in SUITES:
        if args.only and name.split(".")[-1] not in args.only:
            continue
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
