"""The deny-list: processes a probe must never stop unless the user insists.

A probe stops its target at every hit. Stopping a client backend slows one
connection; stopping the postmaster, a checkpointer or Oracle's LGWR stalls the
whole server, and an ``int3`` left behind in one of them takes the instance
down. Each engine states its critical processes as data (``critical_processes``
on the engine object: a tuple of :class:`CriticalProcess`, the
``Ability.CRITICAL_PROCESSES`` ability, collected by
``tdescope.app.engines.registry.critical_rules``), matched here against
what the kernel says about a pid (``/proc/PID/cmdline`` and ``comm``), so the
check works for a bare ``--pid`` with no database connection at all, and a
PostgreSQL background process is refused even when the user picked another
engine.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tdescope.app.errors import UserError
from tdescope.app.slots import SLOTS

__all__ = ["CriticalProcess", "ProcessTitle", "critical_role", "process_title", "refuse_critical"]


@dataclass(frozen=True, **SLOTS)
class CriticalProcess:
    """One rule: a regular expression over a process's title, and what a match means.

    Attributes
    ----------
    engine : str
        Engine that owns the rule (``"postgres"``).
    pattern : str
        Searched (``re.search``) in the command line as ``ps`` shows it (NULs as
        spaces) and, when ``comm`` is set, in ``/proc/PID/comm``.
    what : str
        What the process is, for the refusal; ``{0}`` is the pattern's first group.
    comm : bool
        Also match the 15-character ``comm`` (Oracle renames its background
        processes there too).
    ignore_case : bool
        Match without regard to case.
    stopping_only : bool
        The rule matters only to a probe that stops its target (gdb): an eBPF probe runs
        beside the process without stopping it (MariaDB's one server process).
    """

    engine: str
    pattern: str
    what: str
    comm: bool = False
    ignore_case: bool = False
    stopping_only: bool = False

    def match(self, title: "ProcessTitle") -> str | None:
        """What the process is when this rule applies to ``title``, else None."""
        flags = re.IGNORECASE if self.ignore_case else 0
        texts = (title.cmdline, title.comm) if self.comm else (title.cmdline,)
        for text in texts:
            m = re.search(self.pattern, text, flags) if text else None
            if m is not None:
                group = m.group(1) if m.groups() else m.group(0)
                return self.what.format(group)
        return None


@dataclass(frozen=True, **SLOTS)
class ProcessTitle:
    """What the kernel says a process is: its command line (as ``ps`` shows it) and its ``comm``."""

    pid: int
    cmdline: str
    comm: str


def process_title(pid: int) -> ProcessTitle | None:
    """The title of ``pid``, or None when it is gone or unreadable."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        with open(f"/proc/{pid}/comm", "rb") as fh:
            comm = fh.read().decode(errors="replace").strip()
    except OSError:
        return None
    return ProcessTitle(int(pid), cmdline, comm)


def _matching(pid: int, rules: Iterable[CriticalProcess]) -> tuple[str, CriticalProcess] | None:
    title = process_title(pid)
    if title is None:
        return None
    for rule in rules:
        what = rule.match(title)
        if what is not None:
            return what, rule
    return None


def critical_role(pid: int, rules: Iterable[CriticalProcess]) -> str | None:
    """What critical process ``pid`` is (``"the PostgreSQL checkpointer"``), or None."""
    found = _matching(pid, rules)
    return found[0] if found else None


def refuse_critical(pid: int, rules: Iterable[CriticalProcess], allow: bool = False, stopping: bool = True) -> None:
    """Raise UserError when ``pid`` is a critical process and ``allow`` is not set.

    ``stopping``: the probe stops its target (gdb); rules that only matter then are skipped otherwise."""
    found = None if allow else _matching(pid, [r for r in rules if stopping or not r.stopping_only])
    if found is not None:
        what, rule = found
        hint = "; --backend ebpf probes it without stopping it" if rule.stopping_only else ""
        raise UserError(f"pid {pid} is {what}: stopping it in a debugger stalls the whole server "
                        f"(--allow-critical overrides{hint})")
