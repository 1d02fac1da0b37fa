"""Whether a process may be probed at all, asked before anything attaches: the engines' deny-lists,
and whether it has the recipe's function (read from the ELF files it maps; nothing is stopped)."""

from __future__ import annotations

from tdescope.app.engines.api import ProbeRecipe
from tdescope.app.engines.registry import critical_rules, discover_engines
from tdescope.app.errors import UserError
from tdescope.app.probe.spec import at_entry
from tdescope.app.system.critical import refuse_critical
from tdescope.app.system.elf import resolve_in_process

__all__ = ["not_used", "refuse_critical_target", "refuse_unused_target"]


def refuse_critical_target(pid: int, allow: bool = False, stopping: bool = True) -> None:
    """UserError when ``pid`` is on any loaded engine's deny-list (postmaster, checkpointer, ora_pmon...);
    ``stopping``: the probe stops its target (gdb), so the rules that only matter then apply too."""
    engines, _ = discover_engines()
    refuse_critical(pid, critical_rules(engines.values()), allow, stopping)


def refuse_unused_target(pid: int, recipe: ProbeRecipe, engine: str) -> int | None:
    """The runtime address of ``recipe``'s function in ``pid``, read from the ELF files it maps
    (nothing is stopped), or UserError when the process does not have it.

    None when only attaching can tell: a DWARF-name recipe, or a library not loaded yet (armed pending)."""
    if not at_entry(recipe):
        return None
    resolved = _resolve(pid, recipe)
    if resolved is None and recipe.library is None:
        raise not_used(pid, recipe, engine)
    return resolved.address if resolved is not None else None


def not_used(pid: int, recipe: ProbeRecipe, engine: str) -> UserError:
    """The one line for a process that does not have the recipe's function."""
    names = " or ".join(recipe.symbols)
    return UserError(f"pid {pid} does not use {engine}: symbol {names} not found")


def _resolve(pid: int, recipe: ProbeRecipe):
    """:func:`resolve_in_process`, with a process we may not read or that is gone as one line."""
    try:
        return resolve_in_process(pid, recipe.symbols, recipe.library)
    except PermissionError:
        # /proc/PID/maps needs the same ptrace access that attaching does
        raise UserError(f"ptrace not permitted on pid {pid} (another user's process): run tdescope "
                        "as the process owner or as root") from None
    except (FileNotFoundError, ProcessLookupError):
        raise UserError(f"pid {pid} is gone (no such process)") from None
