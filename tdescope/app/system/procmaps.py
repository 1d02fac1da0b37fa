"""A process's memory map (``/proc/PID/maps``), read one way for everyone who needs it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Mapping", "executable_mappings"]


@dataclass(frozen=True, slots=True)
class Mapping:
    """One file-backed executable mapping of a process."""

    start: int
    end: int
    offset: int
    path: str


def executable_mappings(pid: int) -> list[Mapping]:
    """File-backed ``r-x`` mappings of ``pid`` (code of the executable and its libraries)."""
    out = []
    with open(f"/proc/{pid}/maps") as fh:
        for line in fh:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or "x" not in parts[1] or not parts[5].startswith("/"):
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip()
            if path.endswith(" (deleted)"):
                continue
            out.append(Mapping(start, end, int(parts[2], 16), path))
    return out
