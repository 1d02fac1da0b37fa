"""Disassembly of one function from an ELF file, with sample heat per instruction.

Addresses, three kinds of them:

* **file address** — the ELF virtual address (``st_value`` of symbols, what
  ``objdump -d`` prints); all :class:`Insn` addresses are file addresses.
* **runtime address** — where the code sits in the live process:
  ``runtime = file_address + load_base`` with :func:`load_base`.
* what **perf prints**: in callchain output (``perf record -g``) user frames
  are DSO-relative (``ip - map_start + map_offset``), which equals the file
  address whenever the executable segment has ``p_vaddr == p_offset`` (all
  GNU ld output), so annotate those with ``load_base=0``; the leaf-only
  layout prints runtime IPs, which need :func:`load_base`. The most robust
  input is symbol offsets (``Sample.leaf.offset``): ``start + offset``.

When the file cannot be read (deleted after the process started, no
permission), :func:`function_bounds`, :func:`disassemble` and :func:`load_base`
raise :class:`~tdescope.app.errors.UserError`; falling back to the process's
live memory through gdb is the caller's decision, not done here.
"""

from __future__ import annotations

import functools
import os
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import capstone
from elftools.common.exceptions import ELFError
from elftools.elf.elffile import ELFFile
from elftools.elf.relocation import RelocationSection
from elftools.elf.sections import SymbolTableSection

from tdescope.app.errors import UserError

__all__ = [
    "code_file",
    "Insn",
    "HeatRow",
    "function_bounds",
    "disassemble",
    "annotate",
    "load_base",
    "is_crypto_insn",
]

_CRYPTO_MNEMONICS = frozenset(
    "aesenc aesenclast aesdec aesdeclast aeskeygenassist aesimc pclmulqdq "
    "sha1rnds4 sha1nexte sha1msg1 sha1msg2 sha256rnds2 sha256msg1 sha256msg2".split()
)
_IMM = re.compile(r"^0x[0-9a-f]+$")
_RIP = re.compile(r"\[rip ([+-]) (0x[0-9a-f]+|\d+)\]")


def is_crypto_insn(mnemonic: str) -> bool:
    """True for AES-NI, PCLMULQDQ (GCM) and SHA-NI instructions, VEX/EVEX forms too.

    Capstone spells carry-less multiplies with their immediate folded in
    (``pclmullqlqdq``), hence the prefix test.
    """
    m = mnemonic.lower()
    if m.startswith("v") and (m[1:].startswith("aes") or m[1:].startswith("pclmul")):
        return True
    return m in _CRYPTO_MNEMONICS or m.startswith("pclmul") or m.startswith("aes")


@dataclass(frozen=True, slots=True)
class Insn:
    """One instruction at a file address.

    ``target`` is the branch/call destination or the RIP-relative operand's
    address, ``target_name`` that address as ``symbol+0xoff`` when known.
    """

    address: int
    size: int
    bytes_hex: str
    mnemonic: str
    op_str: str
    target: int | None = None
    target_name: str = ""
    is_call: bool = False
    is_jump: bool = False
    is_crypto: bool = False


class HeatRow(NamedTuple):
    """An instruction with the samples that landed on it (% of the function's)."""

    insn: Insn
    samples: int
    pct: float


@dataclass(frozen=True)
class _ElfIndex:
    funcs: dict[str, tuple[int, int]]  # name -> (start, size), .symtab first
    starts: tuple[int, ...]  # sorted addresses of every named symbol
    names: tuple[tuple[str, int], ...]  # parallel: (name, size)
    loads: tuple[tuple[int, int, int, int], ...]  # (p_vaddr, p_offset, p_filesz, p_memsz)


def _open_elf(path: str):
    try:
        return open(path, "rb")
    except FileNotFoundError:
        raise UserError(f"{path}: file not found (deleted while the process runs?)") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied (run as root or the file's owner)") from None


@functools.lru_cache(maxsize=16)
def _index_cached(path: str, _stamp: tuple) -> _ElfIndex:
    funcs: dict[str, tuple[int, int]] = {}
    syms: dict[int, tuple[str, int]] = {}
    with _open_elf(path) as f:
        try:
            elf = ELFFile(f)
        except ELFError as err:
            raise UserError(f"{path}: not an ELF file ({err})") from None
        if elf["e_machine"] != "EM_X86_64":
            raise UserError(f"{path}: {elf['e_machine']} code; only x86-64 is disassembled")
        loads = tuple(
            (s["p_vaddr"], s["p_offset"], s["p_filesz"], s["p_memsz"])
            for s in elf.iter_segments() if s["p_type"] == "PT_LOAD"
        )
        for secname in (".symtab", ".dynsym"):
            sec = elf.get_section_by_name(secname)
            if not isinstance(sec, SymbolTableSection):
                continue
            for sym in sec.iter_symbols():
                kind, value = sym["st_info"]["type"], sym["st_value"]
                if not sym.name or value == 0 or kind not in ("STT_FUNC", "STT_OBJECT", "STT_GNU_IFUNC"):
                    continue
                name = sym.name.split("@")[0] if secname == ".dynsym" else sym.name
                if kind != "STT_OBJECT":
                    funcs.setdefault(name, (value, sym["st_size"]))
                # Prefer a sized global name for an address over local aliases.
                if value not in syms or (syms[value][1] == 0 and sym["st_size"]):
                    syms[value] = (name, sym["st_size"])
        _add_plt(elf, syms)
    starts = tuple(sorted(syms))
    return _ElfIndex(funcs, starts, tuple(syms[a] for a in starts), loads)


def _add_plt(elf: ELFFile, syms: dict[int, tuple[str, int]]) -> None:
    """Name PLT stubs ``func@plt`` (calls into shared libraries land there).

    Stub ``i`` follows relocation ``i`` of .rela.plt: at ``.plt.sec + 16*i``
    with IBT (GCC's default on Debian 12), else ``.plt + 16*(i+1)`` after the
    resolver stub.
    """
    rela = elf.get_section_by_name(".rela.plt")
    if not isinstance(rela, RelocationSection):
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
    for i, rel in enumerate(rela.iter_relocations()):
        idx = rel["r_info_sym"]
        if idx and isinstance(dynsym, SymbolTableSection):
            name = dynsym.get_symbol(idx).name
            syms.setdefault(base + 16 * (i + first), (f"{name}@plt", 16))


def code_file(path: str, pid: int | None = None) -> str:
    """A readable path to the code of ``path`` as process ``pid`` runs it.

    When the file on disk is gone or replaced (a package upgrade while the
    database runs: maps say "(deleted)") or unreadable, the process still maps
    it: ``/proc/PID/map_files/START-END`` opens that very file, with no ptrace
    and no stop of the target.
    """
    clean = path.replace(" (deleted)", "")
    if not path.endswith(" (deleted)") and os.access(clean, os.R_OK):
        return clean
    if pid is not None:
        try:
            with open(f"/proc/{pid}/maps") as fh:
                for line in fh:
                    parts = line.split(None, 5)
                    if len(parts) == 6 and parts[5].strip().replace(" (deleted)", "") == clean:
                        candidate = f"/proc/{pid}/map_files/{parts[0]}"
                        if os.access(candidate, os.R_OK):
                            return candidate
        except OSError:
            pass
    return clean


def _index(path: str) -> _ElfIndex:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UserError(f"{path}: file not found (deleted while the process runs?)") from None
    except PermissionError:
        raise UserError(f"{path}: permission denied (run as root or the file's owner)") from None
    # a /proc/PID/map_files link must be opened as is: its target may name a deleted file
    key = path if path.startswith("/proc/") else os.path.realpath(path)
    return _index_cached(key, (st.st_ino, st.st_size, st.st_mtime_ns))


def _name_at(index: _ElfIndex, addr: int) -> str:
    i = bisect_right(index.starts, addr) - 1
    if i < 0:
        return ""
    name, size = index.names[i]
    off = addr - index.starts[i]
    if size and off >= size:
        return ""
    return name if off == 0 else f"{name}+{off:#x}"


def _file_offset(index: _ElfIndex, vaddr: int) -> int | None:
    for p_vaddr, p_offset, p_filesz, _ in index.loads:
        if p_vaddr <= vaddr < p_vaddr + p_filesz:
            return vaddr - p_vaddr + p_offset
    return None


def function_bounds(elf_path: str, symbol: str) -> tuple[int, int]:
    """File address and size of function ``symbol`` (.symtab, then .dynsym).

    A symbol without a size (some hand-written assembly) extends to the next
    symbol.

    Raises
    ------
    UserError
        File unreadable or not x86-64 ELF, or no such function in it.
    """
    index = _index(elf_path)
    if symbol not in index.funcs:
        raise UserError(f"{symbol}: no such function in {elf_path} (stripped?)")
    start, size = index.funcs[symbol]
    if size == 0:
        i = bisect_right(index.starts, start)
        size = (index.starts[i] - start) if i < len(index.starts) else 0
    return start, size


def disassemble(elf_path: str, symbol: str) -> list[Insn]:
    """Disassemble function ``symbol`` of ``elf_path`` (x86-64, Intel syntax).

    Returns
    -------
    list of Insn
        In address order; branch, call and RIP-relative targets resolved to
        symbol names through an address index built once per file.
    """
    index = _index(elf_path)
    start, size = function_bounds(elf_path, symbol)
    off = _file_offset(index, start)
    if off is None or size <= 0:
        raise UserError(f"{symbol}: no code bytes in {elf_path}")
    with _open_elf(elf_path) as f:
        f.seek(off)
        code = f.read(size)
    md = capstone.Cs(capstone.CS_ARCH_X86, capstone.CS_MODE_64)
    out = []
    for ci in md.disasm(code, start):
        m, ops = ci.mnemonic, ci.op_str
        is_call = m.startswith("call")
        is_jump = m.startswith("j") or m.startswith("loop")
        target = None
        if (is_call or is_jump) and _IMM.match(ops):
            target = int(ops, 16)
        else:
            rm = _RIP.search(ops)
            if rm is not None:
                disp = int(rm.group(2), 0)
                target = ci.address + ci.size + (disp if rm.group(1) == "+" else -disp)
        out.append(Insn(
            address=ci.address, size=ci.size, bytes_hex=ci.bytes.hex(), mnemonic=m, op_str=ops,
            target=target, target_name=_name_at(index, target) if target is not None else "",
            is_call=is_call, is_jump=is_jump, is_crypto=is_crypto_insn(m),
        ))
    return out


def annotate(insns: list[Insn], sample_addrs: Counter[int], load_base: int = 0) -> list[HeatRow]:
    """Attach sample counts to instructions.

    Parameters
    ----------
    insns : list of Insn
        From :func:`disassemble` (file addresses).
    sample_addrs : Counter
        Sample address -> count; addresses outside the function are ignored.
    load_base : int
        Subtracted from each sample address to get a file address:
        :func:`load_base` for runtime IPs, 0 for perf's DSO-relative callchain
        addresses or for ``start + symbol offset``.

    Returns
    -------
    list of HeatRow
        One per instruction; ``pct`` is of the samples inside the function.
    """
    starts = [i.address for i in insns]
    counts = [0] * len(insns)
    for addr, n in sample_addrs.items():
        a = addr - load_base
        k = bisect_right(starts, a) - 1
        if k >= 0 and a < insns[k].address + insns[k].size:
            counts[k] += n
    total = sum(counts) or 1
    return [HeatRow(i, c, 100.0 * c / total) for i, c in zip(insns, counts)]


def load_base(pid: int, path: str) -> int:
    """How far ``path`` is shifted in process ``pid``: ``runtime = file_address + base``.

    From the mapping of ``path`` with file offset 0 in /proc/PID/maps (any
    mapping of the file when there is none) and the PT_LOAD segment holding
    that offset: ``base = map_start - map_offset + p_offset - p_vaddr``.
    0 for a non-PIE executable, the mapping start for PIE and shared objects
    linked at 0.

    Raises
    ------
    UserError
        The process or the file's mapping is not there, or the file is unreadable.
    """
    index = _index(path)
    try:
        st = os.stat(path)
        maps = open(f"/proc/{pid}/maps").read().splitlines()
    except FileNotFoundError:
        raise UserError(f"no process {pid}") from None
    except PermissionError:
        raise UserError(f"cannot read /proc/{pid}/maps: permission denied") from None
    real = os.path.realpath(path)
    found: list[tuple[int, int]] = []
    for line in maps:
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        # Match by inode first: the process may know the file under another name.
        same = int(parts[4]) == st.st_ino or parts[5].replace(" (deleted)", "") in (path, real)
        if same:
            found.append((int(parts[0].split("-")[0], 16), int(parts[2], 16)))
    if not found:
        raise UserError(f"{path} is not mapped in process {pid}")
    start, offset = min(found, key=lambda m: (m[1], m[0]))
    for p_vaddr, p_offset, p_filesz, _ in index.loads:
        if p_offset <= offset < p_offset + max(p_filesz, 1):
            return start - offset + p_offset - p_vaddr
    return start - offset
