"""A process's memory map (``/proc/PID/maps``), read one way for everyone who needs it.

The guard (code bytes against the files), symbol resolution before attaching,
load bases for disassembly heat and the ``map_files`` fallback for deleted
libraries all read the map through :func:`read_maps`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.slots import SLOTS

__all__ = ["Mapping", "parse_maps", "read_maps", "executable_mappings"]

_DELETED = " (deleted)"


@dataclass(frozen=True, **SLOTS)
class Mapping:
    """One line of ``/proc/PID/maps``.

    Attributes
    ----------
    start, end : int
        Runtime address range ``[start, end)``.
    perms : str
        ``rwxp``-style permissions, e.g. ``"r-xp"``.
    offset : int
        Offset in the mapped file of ``start``.
    inode : int
        Inode of the mapped file, 0 for anonymous memory.
    path : str
        The file (without the kernel's ``" (deleted)"`` mark), a pseudo name
        such as ``[heap]``, or ``""`` for anonymous memory.
    deleted : bool
        The file was deleted or replaced after it was mapped.
    """

    start: int
    end: int
    offset: int
    path: str
    perms: str = "r-xp"
    inode: int = 0
    deleted: bool = False

    @property
    def executable(self) -> bool:
        """The mapping holds code (``x`` permission)."""
        return "x" in self.perms

    @property
    def file_backed(self) -> bool:
        """The mapping is of a file (its path is absolute)."""
        return self.path.startswith("/")

    @property
    def address_range(self) -> str:
        """``start-end`` in hex as maps prints it: the name under ``/proc/PID/map_files/``."""
        return f"{self.start:x}-{self.end:x}"


def parse_maps(text: str) -> list[Mapping]:
    """Every mapping in the text of a ``/proc/PID/maps`` file; malformed lines are skipped."""
    out = []
    for line in text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 5:
            continue
        try:
            start, end = (int(x, 16) for x in parts[0].split("-"))
            offset, inode = int(parts[2], 16), int(parts[4])
        except ValueError:
            continue
        path = parts[5].strip() if len(parts) == 6 else ""
        deleted = path.endswith(_DELETED)
        out.append(Mapping(start, end, offset, path.removesuffix(_DELETED), parts[1], inode, deleted))
    return out


def read_maps(pid: int) -> list[Mapping]:
    """All mappings of process ``pid``.

    Raises
    ------
    OSError
        ``FileNotFoundError`` when there is no such process,
        ``PermissionError`` without ptrace access to it.
    """
    with open(f"/proc/{pid}/maps") as fh:
        return parse_maps(fh.read())


def executable_mappings(pid: int) -> list[Mapping]:
    """File-backed executable mappings of ``pid`` (code of the executable and its libraries)
    whose file is still there."""
    return [m for m in read_maps(pid) if m.executable and m.file_backed and not m.deleted]
