"""Interleaved A/B rounds: each side timed on its own, in ABBA order, after a warm-up.

A single encrypted-then-plain run gives a ratio that moves by ±40 % from run to
run on a shared machine. The runner does what hyperfine and repeated pgbench
runs do: a warm-up round that is not counted, then ``rounds`` rounds that
alternate which side goes first (encrypted/plain, plain/encrypted, …) so drift
and cache warmth fall on both sides alike, then per phase the median of the
paired per-round ratios with its interval (:mod:`tdescope.app.ab.stats`). The
server's CPU time is read around every side, the machine's around the timed
rounds, so a busy machine is said, not hidden.

The runner never arms a probe: captures happen in a separate round
(:class:`~tdescope.app.experiment.Experiment`), so no probe cost lands in a timed round.
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Mapping
from typing import Any

from tdescope.app.ab.stats import INTERVAL_METHOD, median_interval
from tdescope.app.engines.api import Workload, WorkloadControl
from tdescope.app.errors import UserError
from tdescope.app.events import (AB_SIDES, ABResult, Event, PhaseName, PhaseRatio, RoundTime, Side, WorkloadProgress,
                                 WorkloadResult, is_ab)
from tdescope.app.system.procstat import cpu_seconds, machine_cpu_seconds

__all__ = ["ABRunner", "round_order", "summarize"]


def round_order(n: int) -> tuple[Side, Side]:
    """Which side goes first in round ``n`` (0 = warm-up): encrypted first on even rounds and the
    warm-up, plain first on odd ones (ABBA…)."""
    return AB_SIDES if n % 2 == 0 else AB_SIDES[::-1]


def summarize(times: list[RoundTime] | tuple[RoundTime, ...]) -> tuple[PhaseRatio, ...]:
    """Per phase (``"total"`` first): side medians and the median paired ratio with its interval.

    Only timed rounds (``round > 0``) that ran both sides count.
    """
    by_round: dict[int, dict[str, RoundTime]] = {}
    for t in times:
        if t.round > 0:
            by_round.setdefault(t.round, {})[t.side] = t
    pairs = [(r[Side.ENCRYPTED], r[Side.PLAIN]) for _, r in sorted(by_round.items()) if is_ab(r)]
    if not pairs:
        return ()
    phases = [PhaseName.TOTAL] + [p for p in pairs[0][0].phases if p != PhaseName.TOTAL]
    out = []
    for phase in phases:
        enc = [e.phases.get(phase) for e, _ in pairs]
        plain = [p.phases.get(phase) for _, p in pairs]
        ratios = tuple(round(a / b, 6) for a, b in zip(enc, plain) if a is not None and b)
        if not ratios:
            continue
        med, low, high = median_interval(ratios)
        enc_med = median_interval([v for v in enc if v is not None])[0]
        plain_med = median_interval([v for v in plain if v is not None])[0]
        out.append(PhaseRatio(phase, enc_med, plain_med, med, low, high, ratios))
    return tuple(out)


class _RoundControl(WorkloadControl):
    """The control one side of one round runs under: cancelled with the run, its progress
    reported as the whole run's."""

    def __init__(self, outer: WorkloadControl, report: Callable[[WorkloadProgress], None]) -> None:
        super().__init__(None)
        self._outer = outer
        self._report = report

    @property
    def cancelled(self) -> bool:
        return self._outer.cancelled

    def cancel(self) -> None:
        self._outer.cancel()

    def emit(self, event: Event) -> None:
        if isinstance(event, WorkloadProgress):
            self._report(event)


class ABRunner:
    """Run ``workload`` for ``warmup`` + ``rounds`` interleaved rounds and summarize.

    Parameters
    ----------
    workload : Workload
        An A/B workload (its ``sides`` holds ``encrypted`` and ``plain``).
    params : mapping
        Its parameters; every round runs with the same.
    server_pid : int or None
        The process whose CPU time is read around each side (None: not read).
    rounds : int
        Timed rounds, at least 1 (5 by default; 3 is the least that gives an interval).
    warmup : int
        Untimed rounds first.
    """

    def __init__(self, workload: Workload, params: Mapping[str, Any], server_pid: int | None,
                 rounds: int = 5, warmup: int = 1, capture: str = "off") -> None:
        if not is_ab(workload.sides):
            raise UserError(f"{workload.label} is not an encrypted/plain comparison; "
                            f"A/B rounds run on: ab_dml and the other A/B workloads of the engine")
        if rounds < 1 or warmup < 0:
            raise UserError("rounds must be at least 1 and warm-up rounds at least 0")
        self.workload = workload
        self.params = {k: v for k, v in params.items() if k != "sides"}
        self.server_pid = server_pid
        self.rounds = rounds
        self.warmup = warmup
        self.capture = capture

    def plan(self) -> list[tuple[int, str]]:
        """Every (round, side) in the order they run; warm-up rounds are round 0."""
        steps = [(0, side) for _ in range(self.warmup) for side in round_order(0)]
        return steps + [(n, side) for n in range(1, self.rounds + 1) for side in round_order(n)]

    def run(self, control: WorkloadControl) -> ABResult:
        """Run every round (blocking); progress and the result go to ``control``'s sink."""
        steps = self.plan()
        times: list[RoundTime] = []
        busy0 = own0 = server0 = None
        cancelled = False
        for index, (n, side) in enumerate(steps):
            if control.cancelled:
                cancelled = True
                break
            if n > 0 and busy0 is None:  # the timed rounds start: the machine's clock starts
                busy0, own0, server0 = machine_cpu_seconds(), cpu_seconds(os.getpid()), self._server_cpu()
            label = "warm-up" if n == 0 else f"round {n}/{self.rounds}"

            def report(ev: WorkloadProgress, index=index, label=label) -> None:
                frac = (index + min(ev.done / max(ev.total, 1), 1.0)) / len(steps)
                control.emit(dataclasses.replace(ev, message=f"{label} · {ev.message or ev.side}",
                                                 run_fraction=round(frac, 4)))

            cpu0 = self._server_cpu()
            result = self.workload.run({**self.params, "sides": side}, _RoundControl(control, report))
            cpu1 = self._server_cpu()
            if not isinstance(result, WorkloadResult) or result.cancelled:
                cancelled = True
                break
            phases = {t.phase: t.elapsed_s for t in result.timings if t.side == side}
            if PhaseName.TOTAL not in phases:
                raise UserError(f"{self.workload.label} returned no total for the {side} side")
            used = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
            times.append(RoundTime(n, side, phases, used))
        return self._result(times, cancelled, busy0, own0, server0)

    def _server_cpu(self) -> float | None:
        return cpu_seconds(self.server_pid) if self.server_pid else None

    def _result(self, times, cancelled, busy0, own0, server0) -> ABResult:
        machine_busy = other_busy = None
        if busy0 is not None:
            busy1 = machine_cpu_seconds()
            wall = busy1[1] - busy0[1]
            if wall > 0:
                busy = busy1[0] - busy0[0]
                ours = (cpu_seconds(os.getpid()) or 0.0) - (own0 or 0.0)
                server1 = self._server_cpu()
                theirs = server1 - server0 if server0 is not None and server1 is not None else 0.0
                # fractions of the machine: the seconds are ticks / CLK_TCK, and their float
                # differences can round a fully busy machine to 1.0000000000002
                machine_busy = _fraction(busy / wall)
                other_busy = min(_fraction((busy - ours - theirs) / wall), machine_busy)
        load1 = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
        return ABResult(time.time(), self.workload.name, self.workload.label, dict(self.params), self.rounds,
                        self.warmup, tuple(times), summarize(times), INTERVAL_METHOD, self.capture,
                        machine_busy, other_busy, load1, cancelled)


def _fraction(value: float) -> float:
    """``value`` clamped to [0, 1]."""
    return min(1.0, max(0.0, value))
