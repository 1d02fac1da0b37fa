"""Mutation testing: each decoder and parser module against its own tests (mutmut 3); the kill rate per module.

``python -m bench.bench_mutation [--full] [--only NAME ...] [--sample N] [--seed N] [--jobs N]``; ``make
mutate`` runs the sampled mode, ``make mutate-full`` every mutant; ``MUTATE_MODULES=postgres,innodb`` picks
modules for either. Writes ``bench/results/mutation.md`` and ``mutation.json``.

A sample cannot be tuned to: each run draws a new one (the seed is the time unless ``MUTATE_SEED`` or
``--seed`` names it, and is printed and recorded), of at least :data:`SAMPLE_MIN` mutants per module, and
its rate is reported with a 95 % Wilson interval (:func:`wilson`). The goal is judged on the full run.
Results are kept per module and mode in ``mutation.json``, so per-module runs add up to one table.

Why a driver rather than ``[tool.mutmut]`` in pyproject.toml: mutmut 3 reads one configuration per
directory (``source_paths``, ``only_mutate``, the tests to run) and keeps its state in ``./mutants``, and
has no command-line switch for either. Restricting each module to its own tests therefore needs one
directory per module: a copy of ``tdescope/`` and ``tests/`` with a ``setup.cfg`` naming the module and
its tests. Those directories live under the system temp dir, so the work tree is never touched.

Equivalent mutants (changes that alter nothing a caller can observe) are listed in :data:`EQUIVALENT`
with the reason, reported, and left out of the rate. Long because the equivalents list, with a reason per
mutant, is a third of it.
"""

from __future__ import annotations

import argparse
import collections
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

from bench.mutation_timeouts import recheck

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
SAMPLE_MIN = 150  # mutants per module in the sampled mode, at least
Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval
GOAL = 90.0
DIFFS_SHOWN = 60  # survivors per module whose diff the report shows
DETECTED = {"killed", "timeout", "segfault", "caught by type check"}
CHUNK = 100  # mutants per mutmut run: what a stop leaves unfinished (each run repeats the clean tests first)


class Stopped(Exception):
    """SIGTERM or SIGINT during a run: the mutants run so far are reported (:func:`stop_on_signals`)."""


def stop_on_signals() -> None:
    """A first SIGTERM/SIGINT ends the mutmut run and reports the mutants run so far; a second one quits."""
    def stop(*_):
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # (the cluster stops, the copies go)
        signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
        raise Stopped

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)


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
        Mutants run in the sampled mode (never fewer than :data:`SAMPLE_MIN`).
    timeout : tuple of float
        mutmut's ``timeout_multiplier`` and ``timeout_constant``: a mutant's run is stopped after
        ``(the tests' time in the clean run + constant) * multiplier`` seconds of wall time. Every
        timeout is checked again by CPU time (:mod:`bench.mutation_timeouts`), so a short bound makes a
        run cheaper, never a rate higher.
    """

    name: str
    files: tuple[str, ...]
    tests: tuple[str, ...]
    needs: tuple[str, ...] = ()
    sample: int = SAMPLE_MIN
    timeout: tuple[float, float] = (10.0, 10.0)


TARGETS = (
    Target("perf script", ("tdescope/app/hotspots/perf_script.py",),
           ("tests/test_hotspots.py", "-m", "not perf")),
    Target("entropy", ("tdescope/app/probe/entropy.py",), ("tests/test_entropy.py",)),
    Target("sqlite pages", ("tdescope/plugins/sqlcipher/pages.py", "tdescope/plugins/sqlcipher/_records.py",
                            "tdescope/plugins/sqlcipher/_page_walk.py"),
           ("tests/test_sqlite_pages.py", "tests/test_sqlite_dbstat.py", "tests/test_sqlite_page_fields.py"),
           timeout=(4.0, 10.0)),
    Target("postgres pages", ("tdescope/plugins/postgres/pages.py", "tdescope/plugins/postgres/_tuples.py",
                              "tdescope/plugins/postgres/_btree.py"),
           ("tests/test_pg_pages.py", "tests/test_pg_page_gaps.py"), ("postgres",)),
    Target("innodb pages", ("tdescope/plugins/mariadb/pages.py", "tdescope/plugins/mariadb/records.py"),
           ("tests/test_innodb_pages.py", "tests/test_innodb_page_branches.py", "tests/test_innodb_charsets.py",
            "tests/test_innodb_page_fields.py")),
    Target("oracle blocks", ("tdescope/plugins/oracle/blocks.py", "tdescope/plugins/oracle/_kdb.py"),
           ("tests/test_oracle_blocks.py", "tests/test_oracle_block_fields.py")),
    Target("oracle block dump", ("tdescope/plugins/oracle/blockdump.py", "tdescope/plugins/oracle/_dump_grammar.py",
                                 "tdescope/plugins/oracle/_dump_records.py"),
           ("tests/test_oracle_blockdump.py", "tests/test_oracle_blockdump_fields.py")),
    Target("oracle trace", ("tdescope/plugins/oracle/trace.py", "tdescope/plugins/oracle/_trace_grammar.py",
                            "tdescope/plugins/oracle/_trace_records.py"),
           ("tests/test_oracle_trace.py", "tests/test_oracle_trace_fields.py")),
)

#: Shown under the tables of mutation.md: what the table leaves out and why.
NOTES = (
    "A timeout counts only when it is confirmed: each is run again alone under a CPU-time limit (4 times "
    "a clean run's CPU; `bench/mutation_timeouts.py`), so that a survivor slowed by a loaded machine is "
    "not counted as killed. `timeouts_rechecked` in mutation.json gives what the check found.",
    "A module missing from a table was not run in that mode since issue 24 (the older fixed-seed-18 figures "
    "are not comparable: that sample was the one the tests were written against).",
)

#: mutant name -> why it changes nothing observable. Names are mutmut's (stable for an unchanged source).
EQUIVALENT: dict[str, str] = {
    "tdescope.plugins.mariadb.records.x__value__mutmut_16":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x__value__mutmut_68":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x__value__mutmut_135":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x__datetime__mutmut_6":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x__off_page__mutmut_8":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x__off_page__mutmut_19":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x_decode_redundant__mutmut_7":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x_decode_redundant__mutmut_50":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.mariadb.records.x__value__mutmut_114":
        "'LATIN-1' instead of 'latin-1': codec names are case-insensitive",
    "tdescope.plugins.mariadb.records.x__value__mutmut_117":
        "'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.mariadb.records.x_decode_record__mutmut_15":
        "the NULL bitmap read when it has no bytes: the slice is empty, so it is 0 anyway",
    "tdescope.plugins.mariadb.records.x_decode_record__mutmut_25":
        "bitmap 1 when it has no bytes: then no field is nullable, and only nullable fields look at it",
    "tdescope.plugins.mariadb.records.x_decode_record__mutmut_51":
        "external = None instead of False: both are false, and it is only tested for truth",
    "tdescope.plugins.mariadb.records.x_decode_redundant__mutmut_9":
        "n_fields from 3 bytes instead of 2: the extra byte lands at bit 16 and up, and >> 1 & 0x3FF keeps bits 1-10",
    "tdescope.plugins.mariadb.records.x_decode_redundant__mutmut_23":
        "cols = '' instead of None: both are false, and cols is only tested for truth",
    "tdescope.plugins.mariadb.records.x_decode_redundant__mutmut_29":
        "cols = '' instead of None: both are false, and cols is only tested for truth",
    "tdescope.plugins.mariadb.pages.x__walk__mutmut_13":
        "a record's next offset read unsigned: (origin + rel + 65536) % size is the same, as every InnoDB "
        "page size (4-64 KiB) divides 65536",
    "tdescope.plugins.mariadb.pages.x__walk__mutmut_38":
        "len(out) > size / 5 instead of size // 5: len(out) is an integer, so it exceeds both at the same count",
    "tdescope.plugins.mariadb.pages.x__walk_redundant__mutmut_32":
        "len(out) > size / 6 instead of size // 6: len(out) is an integer, so it exceeds both at the same count",
    "tdescope.plugins.mariadb.pages.x__walk__mutmut_186":
        "a record's end always from its last field: decode_record returns one field per column, and every "
        "layout has one (a node pointer its child page number)",
    "tdescope.plugins.mariadb.pages.xǁInnoDbPageDecoderǁ_fcrc32_compressed__mutmut_12":
        "the page type read signed: only its low byte (& 0xFF) is used, the same either way",
    "tdescope.plugins.mariadb.pages.xǁInnoDbPageDecoderǁ_fcrc32_compressed__mutmut_20":
        "27 < stored instead of 26 <: stored is a multiple of 256, never 26 or 27",
    "tdescope.plugins.mariadb.pages.xǁInnoDbPageDecoderǁ_fcrc32_compressed__mutmut_21":
        "26 <= stored instead of 26 <: stored is a multiple of 256, never 26",
    "tdescope.plugins.mariadb.pages.xǁInnoDbPageDecoderǁ_fcrc32_compressed__mutmut_22":
        "stored < size instead of <= size: when stored is the size, end is the size either way",
    "tdescope.plugins.mariadb.pages.xǁInnoDbPageDecoderǁ_fcrc32_compressed__mutmut_54":
        "b'XXXX' instead of b'' after a zlib error: neither is a page's length, and the bytes are not used",
    "tdescope.plugins.mariadb.pages.xǁInnoDbPageDecoderǁdecode__mutmut_15":
        "_FIL.unpack_from(data) without its offset: the offset defaults to 0",
    "tdescope.plugins.mariadb.records.x__off_page__mutmut_21":
        "ref[12:20] -> ref[12:21]: the reference is the last 20 bytes, so both slices are its last 8",
    "tdescope.plugins.oracle.trace.xǁ_Parserǁfeed__mutmut_42":
        "after_parse_error = None instead of False: both are false, and the flag is only tested for truth",
    "tdescope.plugins.oracle.trace.x_parse_trace_file__mutmut_10":
        "encoding 'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_11":
        "name: split(b'\\x00') without maxsplit: the first piece is the same",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_14":
        "name: split(b'\\x00', 2) instead of 1: the first piece is the same",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_17":
        "'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_6":
        "decode() without 'utf-8': UTF-8 is the default",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_25":
        "'LATIN-1' instead of 'latin-1': codec names are case-insensitive",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_29":
        "decode() without 'utf-8': UTF-8 is the default",
    "tdescope.plugins.postgres._tuples.x__show__mutmut_32":
        "'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_325":
        "cstring decode() without 'utf-8': UTF-8 is the default",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_328":
        "cstring 'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_135":
        "nulls = None instead of []: it is only tested for truth until the bitmap sets it",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_160":
        "i / 8 < len(bits) instead of i // 8: i < 8n either way",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_313":
        "nul <= 0: a cstring starts after the 23-byte tuple header, so its NUL is never at 0",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_314":
        "nul < 1: a cstring starts after the 23-byte tuple header, so its NUL is never at 0",
    "tdescope.plugins.postgres._tuples.x_format_value__mutmut_12":
        "repr for every non-str value: repr and str agree on int, float and bool, the only other values _show returns",
    "tdescope.plugins.postgres.pages.xǁPgPageDecoderǁdecode__mutmut_4":
        "len <= 24 instead of < 24: a 24-byte buffer is not a multiple of 1024 either",
    "tdescope.plugins.postgres.pages.xǁPgPageDecoderǁdecode__mutmut_246":
        "the meta page's problems left out: the list is always empty there (only a bad header adds one, and returns)",
    "tdescope.plugins.postgres.pages.xǁPgPageDecoderǁdecode__mutmut_380":
        "format the values without columns too: there are none, so the text is '' either way",
    "tdescope.plugins.postgres._tuples.x_decode_tuple__mutmut_148":
        "t_bits sliced one byte longer: only bytes below (natts + 7) // 8 are ever indexed",
    "tdescope.plugins.sqlcipher._page_walk.x__shift__mutmut_21":
        "end clamped at 1, not 0: only a field ending at or before the shift would see it, and none does "
        "(the salt's fields are made only when nothing is shifted; every other field starts at 8 or later)",
    "tdescope.plugins.sqlcipher._page_walk.x__u__mutmut_4":
        "int.from_bytes(raw) without 'big': big-endian is the default since Python 3.11 (the project's floor)",
    "tdescope.plugins.sqlcipher._page_walk.x_is_page_size__mutmut_5":
        "n <= 65537 instead of 65536: 65537 is not a power of two, so the second test rejects it anyway",
    "tdescope.plugins.sqlcipher._page_walk.x_is_page_size__mutmut_8":
        "n & (n - 2) == 0 instead of n & (n - 1): the same for every n in 512..65536 (checked for all of them)",
    "tdescope.plugins.sqlcipher._records.x_format_value__mutmut_12":
        "repr for every value left: only int reaches that line (None, bytes, str return before; float is repr'd), "
        "and repr and str agree on int",
    "tdescope.plugins.sqlcipher._records.x_read_varint__mutmut_29":
        "the unreachable assertion's text: the loop returns by its ninth byte, so the line never runs",
    "tdescope.plugins.sqlcipher._page_walk.xǁPageWalkǁ_btree__mutmut_273":
        "limit + base instead of limit - base in 'past the bytes captured': a page 1 tail (base 16) is never "
        "cut, so a pointer below the usable size is never past it and the message is made with base 0 only",
    "tdescope.plugins.sqlcipher._records.x_read_varint__mutmut_30":
        "the unreachable assertion's text: the loop returns by its ninth byte, so the line never runs",
    "tdescope.plugins.sqlcipher._records.x_format_value__mutmut_11":
        "str for a float too: str and repr of a float are the same text in Python 3",
    "tdescope.plugins.sqlcipher._records.x__value__mutmut_14":
        "int.from_bytes(raw, signed=True) without 'big': big-endian is the default since Python 3.11",
    "tdescope.plugins.sqlcipher.pages.xǁSqlitePageDecoderǁ__init____mutmut_2":
        "default encoding 'UTF-8' instead of 'utf-8': codec names are case-insensitive",
    "tdescope.plugins.sqlcipher._page_walk.xǁPageWalkǁ_reserve_area__mutmut_7":
        "r < 0 instead of r <= 0: with r == 0 the usable size is the page size, so usable >= end returns anyway",
    "tdescope.plugins.oracle.trace.xǁ_Parserǁhandle__mutmut_57":
        "v.get('e') without its default: a call without e= is Malformed before it gets here (CLOSE returns first)",
}


def wilson(killed: int, n: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a kill rate, in percent: (low, high); (0, 100) when ``n`` is 0.

    Unlike the normal approximation it stays inside [0, 100] and is not empty at 0 or n kills.
    """
    if n <= 0:
        return 0.0, 100.0
    p = killed / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5)
    low = 0.0 if killed <= 0 else 100.0 * max(0.0, centre - half)
    return low, 100.0 if killed >= n else 100.0 * min(1.0, centre + half)


def choose_seed(env: dict | None = None, given: int | None = None) -> int:
    """The sample's seed: ``given``, else ``MUTATE_SEED`` from ``env``, else the time (a new one each run)."""
    if given is not None:
        return given
    text = (os.environ if env is None else env).get("MUTATE_SEED", "").strip()
    if text:
        try:
            return int(text, 0)
        except ValueError:
            raise SystemExit(f"MUTATE_SEED={text!r} is not an integer") from None
    return time.time_ns() % 1_000_000_007


def draw_sample(names: list[str], size: int | None, seed: int) -> list[str]:
    """``size`` of ``names`` drawn with ``seed`` (all of them when ``size`` is None or not smaller), sorted.

    The draw depends on the set of names and the seed only, not on the order mutmut lists them in.
    """
    pool = sorted(set(names))
    if size is None or size >= len(pool):
        return pool
    return sorted(random.Random(seed).sample(pool, max(size, 0)))


def sample_size(target: Target, sample: int | None) -> int | None:
    """Mutants to run for ``target``: None (all) for a full run, else ``sample`` or its own, at least SAMPLE_MIN."""
    return None if sample is None else max(sample or target.sample, SAMPLE_MIN)


def select_targets(only: list[str] | None) -> list[Target]:
    """The targets named in ``only`` (a name, with ``_``/``-`` for spaces, or its first word); all when empty.

    Raises SystemExit (one line) for a name that matches none.
    """
    if not only:
        return list(TARGETS)
    chosen: list[Target] = []
    for want in only:
        key = re.sub(r"[\s_-]+", " ", want.strip().lower())
        hits = [t for t in TARGETS if t.name == key] or [t for t in TARGETS if t.name.split()[0] == key]
        if not hits:
            raise SystemExit(f"no mutation target {want!r}; known: {', '.join(t.name for t in TARGETS)}")
        chosen += [t for t in hits if t not in chosen]
    return chosen


@dataclass
class Outcome:
    """What mutmut said about one target's mutants (``sampled``: drawn with ``seed``)."""

    target: str
    total: int = 0
    statuses: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    error: str = ""
    sampled: bool = False
    seed: int | None = None
    timeouts: dict[str, int] = field(default_factory=dict)  # what the CPU-time check of timeouts found

    @property
    def counted(self) -> dict[str, str]:
        return {k: v for k, v in self.statuses.items() if k not in EQUIVALENT and v != "not checked"}

    @property
    def killed(self) -> int:
        return sum(1 for v in self.counted.values() if v in DETECTED)

    @property
    def rate(self) -> float | None:
        return 100.0 * self.killed / len(self.counted) if self.counted else None

    @property
    def interval(self) -> tuple[float, float]:
        return wilson(self.killed, len(self.counted))

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
    lines += ["use_git_change_detection = false", f"timeout_multiplier = {target.timeout[0]}",
              f"timeout_constant = {target.timeout[1]}"]
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


def widen_test_selection(stats: Path) -> int:
    """Give every function mutmut saw called all the tests it saw call any target function; returns how many.

    mutmut runs a mutant against the tests it recorded calling the mutated function in its clean run, and
    credits a call made while building a module- or session-scoped fixture to the first test that asked for
    it only: a decoder built once per module (the InnoDB layouts, the PostgreSQL cluster's pages) would be
    tested by one test instead of all of them, and the mutants that other tests kill would survive. The
    target's own tests are few and quick, so each mutant runs them all.
    """
    if not stats.exists():
        return 0
    data = json.loads(stats.read_text())
    by_function = data.get("tests_by_mangled_function_name", {})
    every = sorted(set().union(*by_function.values())) if by_function else []
    data["tests_by_mangled_function_name"] = {k: every for k in by_function}
    stats.write_text(json.dumps(data))
    return len(every)


def run_target(target: Target, base: Path, env: dict, sample: int | None, jobs: int, seed: int = 0) -> Outcome:
    """Generate ``target``'s mutants, run all or a ``seed``-drawn sample of them, and collect the statuses."""
    t0 = time.time()
    out = Outcome(target.name, sampled=sample is not None, seed=seed if sample is not None else None)
    work = _workdir(target, base)
    # mutants and the test-to-function map first (a filter matching nothing stops mutmut right after)
    try:
        _mutmut(work, env, "run", "--max-children", str(jobs), "nothing-matches-this", timeout=1200)
    except Stopped:
        out.error = "stopped before any mutant ran"
        return out
    widen_test_selection(work / "mutants" / "mutmut-stats.json")
    names = sorted(_statuses(work, env))
    out.total = len(names)
    if not names:
        out.error = "mutmut generated no mutants (did the clean test run fail?)"
        return out
    chosen = draw_sample(names, sample, seed)
    # in a seeded random order and in chunks, so that a run stopped early has run a random sample
    order = random.Random(seed).sample(chosen, len(chosen))
    try:
        for i in range(0, len(order), CHUNK):
            res = _mutmut(work, env, "run", "--max-children", str(jobs), *order[i:i + CHUNK], timeout=4 * 3600)
            if res.returncode not in (0, 1):
                out.error = (res.stdout + res.stderr).strip().splitlines()[-1:] or [f"exit {res.returncode}"]
                out.error = out.error[0]
    except Stopped:
        out.error = "stopped before the end"
    statuses = _statuses(work, env)
    out.statuses = {k: statuses.get(k, "not checked") for k in chosen}
    out.timeouts = recheck(work / "mutants", env, target.tests, out.statuses)
    if out.error == "stopped before the end":
        out.error = f"stopped: {sum(v != 'not checked' for v in out.statuses.values())} of {len(chosen)} mutants run"
    out.seconds = time.time() - t0
    return out


def _diff(work: Path, env: dict, name: str) -> str:
    return _mutmut(work, env, "show", name, timeout=60).stdout


def record(o: Outcome, survivors: dict[str, str], commit: str = "") -> dict:
    """One module's row in ``mutation.json``: seed, n, killed, rate, interval, time, survivors with diffs."""
    lo, hi = o.interval
    return {"mode": "sample" if o.sampled else "full", "seed": o.seed, "mutants": o.total,
            "run": sum(v != "not checked" for v in o.statuses.values()),
            "equivalent": sum(1 for k, v in o.statuses.items() if k in EQUIVALENT and v != "not checked"), "n": len(o.counted), "killed": o.killed,
            "rate": None if o.rate is None else round(o.rate, 1), "interval": [round(lo, 1), round(hi, 1)],
            "seconds": round(o.seconds), "date": time.strftime("%Y-%m-%d %H:%M", time.gmtime()), "commit": commit,
            "error": o.error, "statuses": dict(sorted(collections.Counter(o.counted.values()).items())),
            "timeouts_rechecked": o.timeouts, "survivors": survivors}


def _row(name: str, r: dict) -> str:
    rate = "n/a" if r["rate"] is None else f"{r['rate']:.1f} %"
    flag = "" if r["rate"] is None or r["rate"] >= GOAL else " (below 90 %)"
    lo, hi = r["interval"]
    seed = "all" if r["seed"] is None else str(r["seed"])
    if r["seed"] is None and r.get("run", r["mutants"]) < r["mutants"]:
        seed = f"{r['run']} run (stopped; random order)"
    return (f"| {name} | {r['mutants']} | {r['n']} | {r['equivalent']} | {r['killed']} | {rate}{flag} | "
            f"{lo:.1f}–{hi:.1f} % | {seed} | {_duration(r['seconds'])} | {r['date']} {r['commit']} |")


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def render(results: dict) -> str:
    """mutation.md from the kept results: the full-run table, the sample table, equivalents, survivors."""
    lines = ["# Mutation testing", "",
             "mutmut 3, each module against its own tests (`bench/bench_mutation.py`). `make mutate-full` runs every",
             "mutant and is what the 90 % goal is judged on; `make mutate` draws a new sample each run (the seed",
             "column; `MUTATE_SEED=N` repeats one). Interval: 95 % Wilson score interval of the rate. n: mutants",
             "counted (run, less the equivalent ones). `MUTATE_MODULES=postgres,innodb` runs some modules only;",
             "each module's row is from its latest run in that mode.", ""]
    header = ["| module | mutants | n | equivalent | killed | kill rate | 95 % interval | seed | time | run at |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for mode, title in (("full", "Every mutant (`make mutate-full`)"), ("sample", "Sampled (`make mutate`)")):
        rows = [(t.name, results[t.name][mode]) for t in TARGETS if mode in results.get(t.name, {})]
        lines += [f"## {title}", ""] + (header + [_row(n, r) for n, r in rows] if rows else ["not run"]) + [""]
    lines += ["## Notes", ""] + [f"- {n}" for n in NOTES] + [""]
    errors = [(n, m, r["error"]) for n, modes in results.items() for m, r in modes.items() if r.get("error")]
    if errors:
        lines += ["## Errors", ""] + [f"- {n} ({m}): {e}" for n, m, e in errors] + [""]
    lines += ["## Equivalent mutants (not counted)", ""]
    lines += [f"- `{k}`: {why}" for k, why in sorted(EQUIVALENT.items())] or ["- none listed"]
    lines += ["", "## Survivors (of the latest full run of each module, else of its latest sample)", ""]
    for t in TARGETS:
        modes = results.get(t.name, {})
        r = modes.get("full") or modes.get("sample")
        for name, diff in sorted((r or {}).get("survivors", {}).items()):
            lines += [f"### {name}", ""] + (["```diff", diff.strip(), "```", ""] if diff.strip() else [])
    return "\n".join(lines) + "\n"


def head_commit() -> str:
    """The short hash of HEAD: taken when a run starts (the tests it copies), not when it ends."""
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True).stdout.strip()


def write_report(outcomes: list[Outcome], base: Path, env: dict, commit: str) -> Path:
    """Fold ``outcomes`` into ``mutation.json`` (per module and mode) and rewrite ``mutation.md`` from it."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    store = RESULTS / "mutation.json"
    try:
        results = json.loads(store.read_text())
        if not all(isinstance(v, dict) and set(v) <= {"full", "sample"} for v in results.values()):
            results = {}  # (the older flat format)
    except (OSError, ValueError):
        results = {}
    for o in outcomes:
        work = base / re.sub(r"\W+", "-", o.target)
        # (``mutmut show`` takes a second or two: the diffs of the first DIFFS_SHOWN, the rest by name)
        survivors = {name: _diff(work, env, name) if i < DIFFS_SHOWN else "" for i, name in enumerate(o.survivors())}
        results.setdefault(o.target, {})["sample" if o.sampled else "full"] = record(o, survivors, commit)
    store.write_text(json.dumps(results, indent=1, ensure_ascii=False) + "\n")
    path = RESULTS / "mutation.md"
    path.write_text(render(results))
    return path


def _start_postgres():
    sys.path.insert(0, str(ROOT / "tests"))
    from pgcluster import PgCluster  # noqa: PLC0415 - the tests' own cluster

    return PgCluster().start()


def _summary(o: Outcome) -> str:
    if o.rate is None:
        return f"{o.target}: n/a{' ' + o.error if o.error else ''}"
    lo, hi = o.interval
    return (f"{o.target}: {o.killed}/{len(o.counted)} killed, {o.rate:.1f} % (95 % interval {lo:.1f}–{hi:.1f} %) "
            f"of {o.total} mutants, {o.seconds:.0f} s{' ' + o.error if o.error else ''}")


def mutate(sample: int | None, only: list[str] | None = None, jobs: int = 2, seed: int | None = None
           ) -> list[Outcome]:
    """Run every target (or those named in ``only``); returns their outcomes and writes the report.

    ``sample`` None runs every mutant; 0 each target's own sample size; otherwise that many (at least
    :data:`SAMPLE_MIN`). ``seed`` None draws one (:func:`choose_seed`).
    """
    targets = select_targets(only)
    seed = choose_seed(given=seed)  # (a full run's order too)
    if sample is not None:
        print(f"mutation sample seed {seed} (MUTATE_SEED={seed} repeats this sample)", flush=True)
    commit = head_commit()
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
                outcomes.append(Outcome(target.name, error=f"no {', '.join(missing)}", sampled=sample is not None,
                                        seed=seed))
                continue
            size = sample_size(target, sample)
            o = run_target(target, base, env, size, jobs, seed)
            print(_summary(o), flush=True)
            outcomes.append(o)
            if o.error.startswith("stopped"):
                break
        path = write_report(outcomes, base, env, commit)
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bench_mutation")
    parser.add_argument("--full", action="store_true", help="every mutant, not a sample")
    parser.add_argument("--sample", type=int, default=0, help=f"mutants per module in the sampled mode "
                        f"(at least {SAMPLE_MIN})")
    parser.add_argument("--seed", type=int, help="the sample's seed (default: MUTATE_SEED, else the time)")
    parser.add_argument("--only", nargs="*", help="target names (e.g. entropy 'postgres pages' innodb); "
                        "default: MUTATE_MODULES (comma-separated), else all")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args(argv)
    only = args.only or [m for m in os.environ.get("MUTATE_MODULES", "").split(",") if m.strip()]
    stop_on_signals()
    outcomes = mutate(None if args.full else args.sample, only, args.jobs, args.seed)
    for o in outcomes:
        print(_summary(o))
    return 0 if all(o.rate is not None and o.rate >= GOAL for o in outcomes) else 1


if __name__ == "__main__":
    raise SystemExit(main())
