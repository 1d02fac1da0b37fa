"""Find a function's runtime address in a live process before attaching to it.

gdb's own lookup (``break *symbol``) needs the library's symbols loaded, which
happens while the target is stopped: for the sqlcipher3 wheel (21 MB of DWARF)
that is most of a second of a stopped database process. Resolving the address
here first, from the ELF files the process maps, lets gdb attach with
``auto-solib-add off`` and break at a bare address.

pyelftools parses the headers; the symbol search itself scans the raw symbol
table, because pyelftools' per-symbol objects take ~1.5 s on a large library.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from tdescope.app.system.procmaps import executable_mappings

__all__ = ["ResolvedSymbol", "find_symbol", "resolve_in_process"]

_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
_STT_FUNC = 2


@dataclass(frozen=True, slots=True)
class ResolvedSymbol:
    """A function found in a process: its runtime address and where it came from."""

    name: str
    address: int
    path: str
    file_value: int


def find_symbol(path: str, name: str) -> int | None:
    """The st_value of function ``name`` in ELF file ``path`` (.symtab, then .dynsym), or None."""
    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            if elf.elfclass != 64 or elf["e_machine"] != "EM_X86_64":
                return None
            for section_name in (".symtab", ".dynsym"):
                sec = elf.get_section_by_name(section_name)
                if sec is None:
                    continue
                strtab = elf.get_section(sec["sh_link"]).data()
                wanted = b"\0" + name.encode() + b"\0"
                offsets = set()
                at = strtab.find(wanted)
                while at != -1:
                    offsets.add(at + 1)
                    at = strtab.find(wanted, at + 1)
                if strtab.startswith(wanted[1:]):
                    offsets.add(0)
                if not offsets:
                    continue
                for st_name, info, _other, shndx, value, _size in _SYM.iter_unpack(sec.data()):
                    if st_name in offsets and info & 0xF == _STT_FUNC and shndx != 0 and value:
                        return value
    except (OSError, ELFError, struct.error, ValueError):
        return None
    return None


def _load_base(pid: int, path: str, mappings) -> int | None:
    """runtime = file value + base, from the file's PT_LOAD segments and the process's maps."""
    try:
        with open(path, "rb") as fh:
            elf = ELFFile(fh)
            loads = [(s["p_vaddr"], s["p_offset"], s["p_filesz"]) for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"]
    except (OSError, ELFError):
        return None
    for m in mappings:
        if m.path != path:
            continue
        for p_vaddr, p_offset, p_filesz in loads:
            if p_offset <= m.offset < p_offset + max(p_filesz, 1):
                return m.start - m.offset + p_offset - p_vaddr
    return None


def resolve_in_process(pid: int, names: tuple[str, ...], library: str | None = None) -> ResolvedSymbol | None:
    """The first of ``names`` defined by a file mapped executable in ``pid`` (optionally
    only files whose name contains ``library``), with its runtime address."""
    mappings = executable_mappings(pid)
    seen: set[str] = set()
    for m in mappings:
        if m.path in seen or (library and library not in m.path.rsplit("/", 1)[-1]):
            continue
        seen.add(m.path)
        for name in names:
            value = find_symbol(m.path, name)
            if value is None:
                continue
            base = _load_base(pid, m.path, mappings)
            if base is not None:
                return ResolvedSymbol(name, value + base, m.path, value)
    return None
