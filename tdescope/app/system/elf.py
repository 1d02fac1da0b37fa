"""ELF symbols and load bases: where a function is in a file, and where that file sits in a process.

One index per file (:func:`elf_index`, cached by path, inode, size and
mtime) answers every question the workbench asks of an ELF file: a function's
file address and size, the symbol at an address, the file offset of an
address (PT_LOAD segments), and with the process's map (:mod:`procmaps
<tdescope.app.system.procmaps>`) the load base that turns file addresses into
runtime ones. Probe resolution, the disassembly and the hotspot heat all use
it.

Why resolve here rather than let gdb do it: gdb's own lookup (``break
*symbol``) needs the library's symbols loaded, which happens while the target
is stopped; for the sqlcipher3 wheel (21 MB of DWARF) that is most of a
second of a stopped database process. Resolving the address from the ELF
files the process maps lets gdb attach with ``auto-solib-add off`` and break
at a bare address.

pyelftools parses the headers; the symbol tables are read raw with
:mod:`struct`, because pyelftools' per-symbol objects take ~1.5 s on a large
library.
"""

from __future__ import annotations

import functools
import os
import struct
from bisect import bisect_right
from dataclasses import dataclass

from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile

from tdescope.app.errors import UserError
from tdescope.app.slots import SLOTS
from tdescope.app.system.procmaps import Mapping, executable_mappings, read_maps

__all__ = [
    "ElfIndex",
    "LoadSegment",
    "ResolvedSymbol",
    "elf_index",
    "find_symbol",
    "load_base",
    "open_elf",
    "resolve_in_process",
]

_SYM = struct.Struct("<IBBHQQ")  # Elf64_Sym: name, info, other, shndx, value, size
_RELA = struct.Struct("<QQq")  # Elf64_Rela: offset, info, addend
_STT_OBJECT, _STT_FUNC, _STT_GNU_IFUNC = 1, 2, 10


@dataclass(frozen=True, **SLOTS)
class LoadSegment:
    """One PT_LOAD program header: file bytes ``[offset, offset+filesz)`` at ``vaddr``."""

    vaddr: int
    offset: int
    filesz: int
    memsz: int


@dataclass(frozen=True, **SLOTS)
class ResolvedSymbol:
    """A function found in a process: its runtime address and where it came from."""

    name: str
    address: int
    path: str
    file_value: int


@dataclass(frozen=True)
class ElfIndex:
    """The symbols and loadable segments of one x86-64 ELF file.

    Attributes
    ----------
    path : str
    funcs : dict
        Function name -> ``(file address, size)``; ``.symtab`` wins over
        ``.dynsym``, symbol versions are stripped from ``.dynsym`` names.
    starts : tuple of int
        Sorted addresses of every named function, object and PLT stub.
    names : tuple of (str, int)
        Parallel to ``starts``: ``(name, size)``.
    loads : tuple of LoadSegment
    """

    path: str
    funcs: dict[str, tuple[int, int]]
    starts: tuple[int, ...]
    names: tuple[tuple[str, int], ...]
    loads: tuple[LoadSegment, ...]

    def name_at(self, addr: int) -> str:
        """``symbol`` or ``symbol+0xoff`` for file address ``addr``; ``""`` outside any symbol."""
        i = bisect_right(self.starts, addr) - 1
        if i < 0:
            return ""
        name, size = self.names[i]
        off = addr - self.starts[i]
        if size and off >= size:
            return ""
        return name if off == 0 else f"{name}+{off:#x}"

    def file_offset(self, vaddr: int) -> int | None:
        """Where file address ``vaddr`` is in the file, or None when no segment holds it."""
        for seg in self.loads:
            if seg.vaddr <= vaddr < seg.vaddr + seg.filesz:
                return vaddr - seg.vaddr + seg.offset
        return None

    def base_of(self, mapping: Mapping) -> int:
        """``runtime = file address + base`` for the file mapped by ``mapping``.

        ``base = map_start - map_offset + p_offset - p_vaddr`` with the PT_LOAD
        segment holding the mapping's offset.
        """
        for seg in self.loads:
            if seg.offset <= mapping.offset < seg.offset + max(seg.filesz, 1):
                return mapping.start - mapping.offset + seg.offset - seg.vaddr
        return mapping.start - mapping.offset


def open_elf(path: str):
    """``open(path, "rb")`` with a missing or unreadable file as one UserError line."""
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found (deleted while the process runs?)") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied (run as root or the file's owner)") from None


def elf_index(path: str) -> ElfIndex:
    """The index of ELF file ``path``, built once per version of the file.

    Raises
    ------
    UserError
        File missing or unreadable, not an ELF file, or not x86-64.
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: file not found (deleted while the process runs?)") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied (run as root or the file's owner)") from None
    # a /proc/PID/map_files link must be opened as is: its target may name a deleted file
    key = path if path.startswith("/proc/") else os.path.realpath(path)
    return _index_cached(key, (st.st_ino, st.st_size, st.st_mtime_ns))


@functools.lru_cache(maxsize=32)
def _index_cached(path: str, _stamp: tuple) -> ElfIndex:
    funcs: dict[str, tuple[int, int]] = {}
    syms: dict[int, tuple[str, int]] = {}
    with open_elf(path) as f:
        try:
            elf = ELFFile(f)
            if elf.elfclass != 64 or elf["e_machine"] != "EM_X86_64":
                raise UserError(f"{path}: {elf['e_machine']} code; only x86-64 ELF is read")
            loads = tuple(
                LoadSegment(s["p_vaddr"], s["p_offset"], s["p_filesz"], s["p_memsz"])
                for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"
            )
            for secname in (".symtab", ".dynsym"):
                sec = elf.get_section_by_name(secname)
                if sec is None or sec["sh_type"] not in ("SHT_SYMTAB", "SHT_DYNSYM"):
                    continue
                strtab = elf.get_section(sec["sh_link"]).data()
                for name, kind, value, size in _raw_symbols(sec.data(), strtab):
                    if secname == ".dynsym":
                        name = name.split("@")[0]
                    if kind != _STT_OBJECT:
                        funcs.setdefault(name, (value, size))
                    # Prefer a sized name for an address over local aliases.
                    if value not in syms or (syms[value][1] == 0 and size):
                        syms[value] = (name, size)
            _add_plt(elf, syms)
        except (ELFError, struct.error, ValueError) as err:
            raise UserError(f"{path}: not an ELF file ({err})") from None
    starts = tuple(sorted(syms))
    return ElfIndex(path, funcs, starts, tuple(syms[a] for a in starts), loads)


def _raw_symbols(table: bytes, strtab: bytes):
    """``(name, type, value, size)`` of the defined, named functions and objects of a symbol table."""
    for st_name, info, _other, shndx, value, size in _SYM.iter_unpack(table[: len(table) // 24 * 24]):
        kind = info & 0xF
        if not st_name or not value or shndx == 0 or kind not in (_STT_FUNC, _STT_OBJECT, _STT_GNU_IFUNC):
            continue
        end = strtab.find(b"\0", st_name)
        name = strtab[st_name:end if end >= 0 else len(strtab)].decode("utf-8", "replace")
        if name:
            yield name, kind, value, size


def _add_plt(elf: ELFFile, syms: dict[int, tuple[str, int]]) -> None:
    """Name PLT stubs ``func@plt`` (calls into shared libraries land there).

    Stub ``i`` follows relocation ``i`` of .rela.plt: at ``.plt.sec + 16*i``
    with IBT (GCC's default on Debian 12), else ``.plt + 16*(i+1)`` after the
    resolver stub. Relocations are read raw too (thousands in a large library).
    """
    rela = elf.get_section_by_name(".rela.plt")
    if rela is None or rela["sh_type"] != "SHT_RELA":
        return
    dynsym = elf.get_section(rela["sh_link"])
    plt_sec = elf.get_section_by_name(".plt.sec")
    plt = elf.get_section_by_name(".plt")
    if plt_sec is not None:
        base, first = plt_sec["sh_addr"], 0
    elif plt is not None:
        base, first = plt["sh_addr"], 1
    else:
        return
    table = dynsym.data()
    strtab = elf.get_section(dynsym["sh_link"]).data()
    data = rela.data()
    for i, (_offset, info, _addend) in enumerate(_RELA.iter_unpack(data[: len(data) // 24 * 24])):
        idx = info >> 32
        if not idx or (idx + 1) * 24 > len(table):
            continue
        st_name = _SYM.unpack_from(table, idx * 24)[0]
        end = strtab.find(b"\0", st_name)
        name = strtab[st_name:end if end >= 0 else len(strtab)].decode("utf-8", "replace")
        if name:
            syms.setdefault(base + 16 * (i + first), (f"{name}@plt", 16))


def find_symbol(path: str, name: str) -> int | None:
    """The file address of function ``name`` in ELF file ``path`` (.symtab, then .dynsym), or None
    when the file has no such function or cannot be read as x86-64 ELF."""
    try:
        found = elf_index(path).funcs.get(name)
    except UserError:
        return None
    return found[0] if found else None


def load_base(pid: int, path: str, mappings: list[Mapping] | None = None) -> int:
    """How far ``path`` is shifted in process ``pid``: ``runtime = file_address + base``.

    From the mapping of ``path`` with the lowest file offset in /proc/PID/maps
    (matched by inode first: the process may know the file under another
    name) and the PT_LOAD segment holding that offset. 0 for a non-PIE
    executable, the mapping start for PIE and shared objects linked at 0.

    Parameters
    ----------
    mappings : list of Mapping, optional
        The process's map when the caller has read it already.

    Raises
    ------
    UserError
        The process or the file's mapping is not there, or the file is unreadable.
    """
    index = elf_index(path)
    if mappings is None:
        try:
            mappings = read_maps(pid)
        except FileNotFoundError:
            raise UserError(f"no process {pid}") from None
        except PermissionError:
            raise UserError(f"cannot read /proc/{pid}/maps: permission denied") from None
    try:
        inode = os.stat(path).st_ino
    except OSError:
        inode = 0
    names = {path, os.path.realpath(path)}
    found = [m for m in mappings if (inode and m.inode == inode) or m.path in names]
    if not found:
        raise UserError(f"{path} is not mapped in process {pid}")
    return index.base_of(min(found, key=lambda m: (m.offset, m.start)))


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
            try:
                base = load_base(pid, m.path, mappings)
            except UserError:
                continue
            return ResolvedSymbol(name, value + base, m.path, value)
    return None
