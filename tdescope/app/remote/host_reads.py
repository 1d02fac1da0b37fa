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

__all__ = ["MAX_FUNCTION", "list_processes", "read_function"]

#: The most bytes one function read returns.
MAX_FUNCTION = 256 * 1024


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
