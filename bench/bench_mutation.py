"""Mutation testing: each decoder and parser module against its own tests (mutmut 3); the kill rate per module.

``python -m bench.bench_mutation [--full] [--only NAME ...] [--sample N] [--jobs N]``; ``make mutate`` runs
the sampled mode (a fixed-seed sample of each module's mutants, under 10 minutes on 2 cores), ``make
mutate-full`` every mutant. Writes ``bench/results/mutation.md`` and ``mutation.json``.

Why a driver rather than ``[tool.mutmut]`` in pyproject.toml: mutmut 3 reads one configuration per
directory (``source_paths``, ``only_mutate``, the tests to run) and keeps its state in ``./mutants``, and
has no command-line switch for either. Restricting each module to its own tests therefore needs one
directory per module: a copy of ``tdescope/`` and ``tests/`` with a ``setup.cfg`` naming the module and
its tests. Those directories live under the system temp dir, so the work tree is never touched.

Equivalent mutants (changes that alter nothing a caller can observe) are listed in :data:`EQUIVALENT`
with the reason, reported, and left out of the rate.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SEED = 18
SAMPLE = 120  # mutants per module in the sampled mode (Target.sample), when --sample is not given
GOAL = 90.0
DETECTED = {"killed", "timeout", "segfault", "caught by type check"}


@dataclass(frozen=True)
class Target:
    """One module (or a module and its private helpers) and the tests that are its own.

    Attributes
    ----------
    name : str
        Short name, for ``--only`` and the results table.
    files : tuple of str
        Source files to mutate, relative to the repository.
    tests : tuple of str
        pytest arguments selecting the module's own tests.
    needs : tuple of str
        Servers the tests need started once for the whole run: ``"postgres"``.
    sample : int
        Mutants run in the sampled mode. mutmut's trampoline wraps every call, so a
        decoder whose tests walk thousands of varints runs ~10 s per mutant: fewer of them.
    """

    name: str
    files: tuple[str, ...]
    tests: tuple[str, ...]
    needs: tuple[str, ...] = ()
    sample: int = 120


TARGETS = (
    Target("perf script", ("tdescope/app/hotspots/perf_script.py",),
           ("tests/test_hotspots.py", "-m", "not perf")),
    Target("entropy", ("tdescope/app/probe/entropy.py",), ("tests/test_entropy.py",)),
    Target("sqlite pages", ("tdescope/plugins/sqlcipher/pages.py", "tdescope/plugins/sqlcipher/_records.py",
                            "tdescope/plugins/sqlcipher/_page_walk.py"),
           ("tests/test_sqlite_pages.py", "tests/test_sqlite_dbstat.py", "tests/test_sqlite_page_fields.py"),
           sample=50),
    Target("postgres pages", ("tdescope/plugins/postgres/pages.py", "tdescope/plugins/postgres/_tuples.py",
                              "tdescope/plugins/postgres/_btree.py"), ("tests/test_pg_pages.py",), ("postgres",)),
    Target("innodb pages", ("tdescope/plugins/mariadb/pages.py", "tdescope/plugins/mariadb/records.py"),
           ("tests/test_innodb_pages.py", "tests/test_innodb_page_branches.py")),
    Target("oracle blocks", ("tdescope/plugins/oracle/blocks.py", "tdescope/plugins/oracle/_kdb.py"),
           ("tests/test_oracle_blocks.py", "tests/test_oracle_block_fields.py")),
    Target("oracle block dump", ("tdescope/plugins/oracle/blockdump.py", "tdescope/plugins/oracle/_dump_grammar.py",
                                 "tdescope/plugins/oracle/_dump_records.py"),
           ("tests/test_oracle_blockdump.py", "tests/test_oracle_blockdump_fields.py")),
    Target("oracle trace", ("tdescope/plugins/oracle/trace.py", "tdescope/plugins/oracle/_trace_grammar.py",
                            "tdescope/plugins/oracle/_trace_records.py"),
           ("tests/test_oracle_trace.py", "tests/test_oracle_trace_fields.py")),
)

#: mutant name -> why it changes nothing observable. Names are mutmut's (stable for an unchanged source).
EQUIVALENT: dict[str, str] = {
    "tdescope.plugins.mariadb.records.x__off_page__mutmut_21":
        "ref[12:20] -> ref[12:21]: the reference is the last 20 bytes, so both slices are its last 8",
    "tdescope.plugins.oracle.trace.xǁ_Parserǁfeed__mutmut_42":
        "after_parse_error = None instead of False: both are false, and the flag is only tested for truth",
    "tdescope.plugins.oracle.trace.x_parse_trace_file__mutmut_10":
        "encoding 'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.oracle.trace.xǁ_Parserǁhandle__mutmut_57":
        "v.get('e') without its default: a call without e= is Malformed before it gets here (CLOSE returns first)",
}


@dataclass
class Outcome:
    """What mutmut said about one target's mutants."""

    target: str
    total: int = 0
    statuses: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""

    @property
    def counted(self) -> dict[str, str]:
        return {k: v for k, v in self.statuses.items() if k not in EQUIVALENT and v != "not checked"}

    @property
    def killed(self) -> int:
        return sum(1 for v in self.counted.values() if v in DETECTED)

    @property
    def rate(self) -> float | None:
        return 100.0 * self.killed / len(self.counted) if self.counted else None

    def survivors(self) -> list[str]:
        return sorted(k for k, v in self.counted.items() if v not in DETECTED)


def _workdir(target: Target, base: Path) -> Path:
    work = base / re.sub(r"\W+", "-", target.name)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copytree(ROOT / "tdescope", work / "tdescope", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "pyproject.toml", work / "pyproject.toml")
    lines = ["[mutmut]", "source_paths = tdescope", "only_mutate ="]
    lines += [f"    {f}" for f in target.files]
    lines += ["pytest_add_cli_args =", "    -p", "    no:cacheprovider", "    -q",
              "pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in target.tests]
    lines += ["use_git_change_detection = false", "timeout_multiplier = 10.0", "timeout_constant = 10.0"]
    (work / "setup.cfg").write_text("\n".join(lines) + "\n")
    return work


def _mutmut(work: Path, env: dict, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """Run mutmut in a session of its own, so that its forked workers end with it (on a timeout or a kill)."""
    exe = Path(sys.executable).with_name("mutmut")
    proc = subprocess.Popen([str(exe), *args], cwd=work, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def _statuses(work: Path, env: dict) -> dict[str, str]:
    out = _mutmut(work, env, "results", "--all", "true", timeout=300).stdout
    return {m.group(1): m.group(2) for m in re.finditer(r"^\s*(\S+__mutmut_\d+): (.+?)\s*$", out, re.M)}


def run_target(target: Target, base: Path, env: dict, sample: int | None, jobs: int) -> Outcome:
    """Generate ``target``'s mutants, run all or a fixed-seed sample of them, and collect the statuses."""
    t0 = time.time()
    out = Outcome(target.name)
    work = _workdir(target, base)
    # mutants and the test-to-function map first (a filter matching nothing stops mutmut right after)
    _mutmut(work, env, "run", "--max-children", str(jobs), "nothing-matches-this", timeout=1200)
    names = sorted(_statuses(work, env))
    out.total = len(names)
    if not names:
        out.error = "mutmut generated no mutants (did the clean test run fail?)"
        return out
    chosen = names if sample is None or sample >= len(names) else sorted(random.Random(SEED).sample(names, sample))
    for i in range(0, len(chosen), 400):  # (argv length)
        res = _mutmut(work, env, "run", "--max-children", str(jobs), *chosen[i:i + 400], timeout=7200)
        if res.returncode not in (0, 1):
            out.error = (res.stdout + res.stderr).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
            out.error = out.error[0]
    statuses = _statuses(work, env)
    out.statuses = {k: statuses.get(k, "not checked") for k in chosen}
    out.seconds = time.time() - t0
    return out


def _diff(work: Path, env: dict, name: str) -> str:
    return _mutmut(work, env, "show", name, timeout=60).stdout


def write_report(outcomes: list[Outcome], sampled: bool, base: Path, env: dict) -> Path:
    """bench/results/mutation.md (the table, equivalents, survivors with their diffs) and mutation.json."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    mode = f"a fixed-seed sample per module, seed {SEED}" if sampled else "every mutant"
    lines = [f"# Mutation testing ({mode})", "",
             f"`make {'mutate' if sampled else 'mutate-full'}` (`python -m bench.bench_mutation"
             f"{'' if sampled else ' --full'}`), mutmut 3, each module against its own tests; "
             f"{time.strftime('%Y-%m-%d %H:%M')}.", "",
             "| module | mutants | run | equivalent | killed | survived | kill rate |", "|---|---|---|---|---|---|---|"]
    for o in outcomes:
        eq = sum(1 for k in o.statuses if k in EQUIVALENT)
        rate = "n/a" if o.rate is None else f"{o.rate:.1f} %"
        flag = "" if o.rate is None or o.rate >= GOAL else " (below 90 %)"
        lines.append(f"| {o.target} | {o.total} | {len(o.statuses)} | {eq} | {o.killed} | "
                     f"{len(o.survivors())} | {rate}{flag} |")
    errors = [o for o in outcomes if o.error]
    if errors:
        lines += ["", "## Errors", ""] + [f"- {o.target}: {o.error}" for o in errors]
    lines += ["", "## Equivalent mutants (not counted)", ""]
    lines += [f"- `{k}`: {why}" for k, why in sorted(EQUIVALENT.items())] or ["- none listed"]
    lines += ["", "## Survivors", ""]
    for o in outcomes:
        for name in o.survivors():
            work = base / re.sub(r"\W+", "-", o.target)
            lines += [f"### {name} ({o.statuses[name]})", "", "```diff", _diff(work, env, name).strip(), "```", ""]
    path = RESULTS / "mutation.md"
    path.write_text("\n".join(lines) + "\n")
    (RESULTS / "mutation.json").write_text(json.dumps(
        {o.target: {"mutants": o.total, "run": len(o.statuses), "killed": o.killed, "rate": o.rate,
                    "survivors": o.survivors(), "error": o.error} for o in outcomes}, indent=1))
    return path


def _start_postgres():
    sys.path.insert(0, str(ROOT / "tests"))
    from pgcluster import PgCluster  # noqa: PLC0415 - the tests' own cluster

    return PgCluster().start()


def mutate(sample: int | None, only: list[str] | None = None, jobs: int = 2) -> list[Outcome]:
    """Run every target (or those named in ``only``); returns their outcomes and writes the report."""
    targets = [t for t in TARGETS if not only or t.name in only or t.name.replace(" ", "_") in only]
    base = Path(tempfile.mkdtemp(prefix="tdescope-mutate-"))
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PYTHONDONTWRITEBYTECODE": "1",
           # the InnoDB tests' pages and facts: a private MariaDB makes them on the clean run, once
           "TDESCOPE_TEST_INNODB_PAGES": str(base / "innodb-pages.pickle")}
    cluster = None
    try:
        if any("postgres" in t.needs for t in targets):
            cluster = _start_postgres()
            env[cluster.SHARED_ENV] = cluster.shared
        outcomes = []
        for target in targets:
            missing = [t for t in target.tests if t.startswith("tests/") and not (ROOT / t).exists()]
            if missing:
                outcomes.append(Outcome(target.name, error=f"no {', '.join(missing)}"))
                continue
            o = run_target(target, base, env, None if sample is None else sample or target.sample, jobs)
            rate = "n/a" if o.rate is None else f"{o.rate:.1f} %"
            print(f"{target.name}: {o.killed}/{len(o.counted)} killed ({rate}) of {o.total} mutants, "
                  f"{o.seconds:.0f} s{' ' + o.error if o.error else ''}", flush=True)
            outcomes.append(o)
        path = write_report(outcomes, sample is not None, base, env)
        print(f"wrote {path.relative_to(ROOT)}")
        return outcomes
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def run(quick: bool) -> dict:
    """The bench entry: kill rate per module (sampled when ``quick``)."""
    outcomes = mutate(0 if quick else None)
    return {f"mutation_kill_pct_{o.target.replace(' ', '_')}": None if o.rate is None else round(o.rate, 1)
            for o in outcomes}


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mutation")
    parser.add_argument("--full", action="store_true", help="every mutant, not a sample")
    parser.add_argument("--sample", type=int, default=0, help="mutants per module in the sampled mode "
                        "(default: each module's own, 120 for most)")
    parser.add_argument("--only", nargs="*", help="target names (e.g. entropy 'postgres pages')")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop the cluster and remove the copies on kill
    outcomes = mutate(None if args.full else args.sample, args.only, args.jobs)
    for o in outcomes:
        rate = "n/a" if o.rate is None else f"{o.rate:5.1f} %"
        print(f"{o.target:20} {rate}")
    return 0 if all(o.rate is not None and o.rate >= GOAL for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
