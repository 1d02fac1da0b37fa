"""What the agent reads on the host for the workbench: the process list and a function's bytes.

Reads only: ``/proc`` and ELF files. A function's bytes come from a file that is
an ELF object (its magic checked), bounded in size, so the laptop can
disassemble without the server's binaries and the agent is no file reader.
"""

from __future__ import annotations

import os

from tdescope.app.errors import UserError
from tdescope.app.system.critical import critical_role
from tdescope.app.system.elf import elf_index, resolve_in_process
from tdescope.app.system.process_table import read_proc

__all__ = ["MAX_FUNCTION", "MAX_PIDS", "follower_pids", "list_processes", "process_rows", "read_function"]

#: The most bytes one function read returns.
MAX_FUNCTION = 256 * 1024
#: The most pids one process-table request may name.
MAX_PIDS = 4096


def _read(path: str) -> str:
    try:
        with open(path, "rb") as fh:
            return fh.read(4096).replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return ""


def list_processes(rules, symbols: tuple = (), library: str | None = None) -> list[dict]:
    """Every process: pid, comm, command line, its deny-list role (None: none) and, when
    ``symbols`` are given, whether it maps one of them (``maps``)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        pid = int(name)
        comm = _read(f"/proc/{pid}/comm")
        if not comm:
            continue  # gone meanwhile
        entry = {"pid": pid, "comm": comm, "cmdline": _read(f"/proc/{pid}/cmdline"),
                 "critical": critical_role(pid, rules), "maps": None}
        if symbols:
            try:
                entry["maps"] = resolve_in_process(pid, tuple(symbols), library) is not None
            except (OSError, UserError, ValueError):
                entry["maps"] = False
        out.append(entry)
    return out


def process_rows(pids) -> list[list]:
    """``[pid, ppid, title]`` of each of ``pids`` that exists (every process when None): what an engine
    plugin checks its server's processes against (:mod:`tdescope.app.system.process_table`)."""
    if pids is not None:
        if not isinstance(pids, list) or len(pids) > MAX_PIDS or \
                not all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in pids):
            raise UserError(f"pids must be a list of at most {MAX_PIDS} process ids")
    return [[r.pid, r.ppid, r.title[:4096]] for r in read_proc(pids=pids)]


def follower_pids(value) -> tuple[int, ...]:
    """The ``followers`` of an ``ARM`` request (PostgreSQL 18's I/O workers): at most 64 process ids."""
    if not value:
        return ()
    if not isinstance(value, list) or len(value) > 64 or \
            not all(isinstance(p, int) and not isinstance(p, bool) and p > 0 for p in value):
        raise UserError("followers must be a list of at most 64 process ids")
    return tuple(value)


def read_function(path: str, symbol: str) -> tuple[dict, bytes]:
    """``({symbol, address, size, path}, bytes)`` of ``symbol`` in the ELF file ``path``; UserError otherwise."""
    if not os.path.isabs(path):
        raise UserError(f"not an absolute path: {path!r}")
    try:
        with open(path, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                raise UserError(f"{path} is not an ELF file")
    except OSError as exc:
        raise UserError(f"cannot read {path}: {exc.strerror}") from None
    index = elf_index(path)
    found = index.funcs.get(symbol)
    if found is None:
        raise UserError(f"{path} has no function {symbol}")
    address, size = found
    offset = index.file_offset(address)
    if offset is None or size <= 0:
        raise UserError(f"{symbol} in {path} has no bytes in the file")
    with open(path, "rb") as fh:
        fh.seek(offset)
        code = fh.read(min(size, MAX_FUNCTION))
    return {"symbol": symbol, "address": address, "size": size, "path": path}, code
