"""Check mutmut's "timeout" verdicts by CPU time, so that a loaded machine cannot turn a survivor into a kill.

mutmut stops a mutant's test run after a wall-clock bound, ``(estimated time + timeout_constant) *
timeout_multiplier``, and counts the stop as a detection. A bound that is short enough to make a module's
full run affordable (a mutant that loops forever waits out the whole bound) is also short enough that a
survivor run at ``nice 19`` on a shared machine can reach it. So every timeout is run again, alone, with
the module's tests under a CPU-time limit (``RLIMIT_CPU``, which load does not stretch) of
:data:`CPU_FACTOR` times the CPU a clean run of the same tests takes: a run that reaches the limit is a
timeout, one that fails is killed, one that passes survived.
"""

from __future__ import annotations

import math
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

CPU_FACTOR = 4.0  # a timeout uses this many times a clean run's CPU time
CPU_FLOOR = 20  # seconds: the least CPU limit
WALL_FACTOR = 40  # the wall bound (a safety net only) is this many times the CPU limit
NO_MUTANT = "no.mutant.x_none__mutmut_0"  # a name no trampoline answers to: the original code runs


def run_tests(mutants: Path, env: dict, tests: tuple[str, ...], mutant: str, cpu_limit: int
              ) -> tuple[int | None, float]:
    """Run ``tests`` in mutmut's ``mutants`` directory against ``mutant``, under ``cpu_limit`` CPU seconds.

    Returns
    -------
    tuple
        (pytest's exit code, or -SIGXCPU/-SIGKILL when the CPU limit stopped it, or None when the wall
        bound did; the CPU seconds the run took).
    """
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_limit, cpu_limit + 1))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", *tests],
        cwd=mutants, env={**env, "MUTANT_UNDER_TEST": mutant}, stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=limit, start_new_session=True)
    try:
        code: int | None = proc.wait(timeout=cpu_limit * WALL_FACTOR)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        code = None
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return code, (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)


def verdict(code: int | None) -> str | None:
    """mutmut's word for an exit code of :func:`run_tests`; None when the wall bound decided nothing."""
    if code is None:
        return None
    if code in (-signal.SIGXCPU, -signal.SIGKILL):
        return "timeout"
    return "survived" if code == 0 else "killed"


def recheck(mutants: Path, env: dict, tests: tuple[str, ...], statuses: dict[str, str]) -> dict[str, int]:
    """Run every ``"timeout"`` of ``statuses`` again under a CPU limit and replace its status in place.

    A mutant the wall bound stopped again keeps mutmut's verdict. Returns counts: ``rechecked``,
    ``confirmed`` (still a timeout), ``killed``, ``survived``, ``undecided`` and the ``cpu_limit`` used.
    """
    timeouts = sorted(k for k, v in statuses.items() if v == "timeout")
    counts = {"rechecked": len(timeouts), "confirmed": 0, "killed": 0, "survived": 0, "undecided": 0,
              "cpu_limit": 0}
    if not timeouts:
        return counts
    code, cpu = run_tests(mutants, env, tests, NO_MUTANT, 3600)
    if code != 0:
        raise RuntimeError(f"the clean run for the timeout check failed (exit {code})")
    counts["cpu_limit"] = cpu_limit = max(CPU_FLOOR, math.ceil(CPU_FACTOR * cpu))
    for name in timeouts:
        word = verdict(run_tests(mutants, env, tests, name, cpu_limit)[0])
        if word is None:
            counts["undecided"] += 1
            continue
        statuses[name] = word
        counts["confirmed" if word == "timeout" else word] += 1
    return counts
