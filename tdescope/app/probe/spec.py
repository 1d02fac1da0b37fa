"""What a probe arms from: a recipe and a window's limits, as one serialisable record.

:class:`ProbeSpec` is the typed form of the JSON file the gdb-side helper reads
(``_tdescope_probe.arm("/abs/spec.json")``); an eBPF backend fills its BPF
program's config from the same record.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from tdescope.app.engines.api import ArgRef, ProbeRecipe
from tdescope.app.engines.argref import Read, ref_fields
from tdescope.app.slots import SLOTS

__all__ = ["STOP_OVERHEAD_S", "ProbeSpec", "at_entry"]

#: Cost of one breakpoint stop and resume through ptrace, measured on these machines
#: (DESIGN.md: ~0.25 ms); gdb's Python callback time is measured and added per hit.
STOP_OVERHEAD_S = 0.00025


def at_entry(recipe: ProbeRecipe) -> bool:
    """True when the recipe reads registers and stack only: it breaks at the first instruction."""
    refs = (recipe.before, recipe.after, recipe.length, recipe.pgno, recipe.context, recipe.condition[0] if recipe.condition else None)
    return all(not isinstance(r, Read) or r.at_entry for r in refs)


@dataclass(frozen=True, **SLOTS)
class ProbeSpec:
    """Everything a backend arms a probe from.

    Attributes
    ----------
    symbols : tuple of str
        The function to probe, with fallbacks tried in order.
    at_entry : bool
        Break at the first instruction: the recipe reads registers and stack only
        (registers hold the ABI arguments only there).
    address : int or None
        The function's address in the target, when the workbench resolved it from
        the ELF files before attaching; None lets the backend look the symbols up.
    before, after, length, pgno : ArgRef or None
        Where the input buffer, output buffer, length and page number are.
    context : ArgRef or None
        What the call belongs to, as a number (:attr:`~tdescope.app.engines.api.ProbeRecipe.context`).
    condition : tuple of (ArgRef, int) or None
        Capture only when this argument equals the value.
    max_length : int
        Bytes copied per side at most.
    max_captures, max_seconds : int, float
        The window's limits, enforced on the probe's side too.
    duty, burst_s : float
        The stop budget: a duty cycle and the burst it may spend at once.
    max_hits_per_s : int
        The hit-rate cap.
    stop_overhead_s : float
        Stop cost charged per hit on top of the measured copy time.
    allow_pending : bool
        The symbol lives in a library that may load later.
    followers : tuple of int
        More processes to probe beside the target, with the same program (eBPF only): PostgreSQL 18's
        I/O workers, where page reads and their decrypt run unless ``io_method=sync``.
    spool : str or None
        Path of the spool file the frames go to (set by the gdb backend).
    """

    symbols: tuple[str, ...]
    at_entry: bool
    before: ArgRef | None
    length: ArgRef | None
    after: ArgRef | None = None
    pgno: ArgRef | None = None
    context: ArgRef | None = None
    condition: tuple[ArgRef, int] | None = None
    max_length: int = 65536
    max_captures: int = 200
    max_seconds: float = 30.0
    duty: float = 0.01
    burst_s: float = 0.025
    max_hits_per_s: int = 1000
    stop_overhead_s: float = STOP_OVERHEAD_S
    allow_pending: bool = False
    address: int | None = None
    spool: str | None = None
    followers: tuple[int, ...] = ()

    @classmethod
    def of(cls, recipe: ProbeRecipe, limits, address: int | None = None,
           followers: tuple[int, ...] = ()) -> "ProbeSpec":
        """The spec for ``recipe`` within ``limits`` (a :class:`~tdescope.app.probe.window.CaptureLimits`)."""
        return cls(
            symbols=tuple(recipe.symbols), at_entry=at_entry(recipe), before=recipe.before, length=recipe.length,
            after=recipe.after, pgno=recipe.pgno, context=recipe.context, condition=recipe.condition, max_length=recipe.max_length,
            max_captures=limits.max_captures, max_seconds=limits.max_seconds, duty=limits.stops.max_busy_fraction,
            burst_s=limits.stops.max_burst_s, max_hits_per_s=limits.max_hits_per_s,
            allow_pending=recipe.library is not None, address=address, followers=tuple(followers),
        )

    def to_json(self) -> dict:
        """The JSON object the gdb-side helper reads: ArgRefs in their flat form (:func:`~tdescope.app.engines.argref.
        ref_fields`), the condition as ``[ref, value]``."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        for key in ("before", "after", "length", "pgno", "context"):
            out[key] = _ref(out[key])
        out["symbols"] = list(self.symbols)
        out["followers"] = list(self.followers)
        out["condition"] = [_ref(self.condition[0]), self.condition[1]] if self.condition else None
        return out

    def write(self, path: str) -> None:
        """Write :meth:`to_json` to ``path``."""
        with open(path, "w") as fh:
            json.dump(self.to_json(), fh)


def _ref(ref: ArgRef | None) -> dict | None:
    return None if ref is None else ref_fields(ref)
