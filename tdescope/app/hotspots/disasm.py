"""Disassembly of one function from an ELF file, with sample heat per instruction.

Addresses, three kinds of them:

* **file address** — the ELF virtual address (``st_value`` of symbols, what
  ``objdump -d`` prints); all :class:`Insn` addresses are file addresses.
* **runtime address** — where the code sits in the live process:
  ``runtime = file_address + load_base`` with
  :func:`tdescope.app.system.elf.load_base` (the one ELF index, which also
  gives the symbols and segments used here).
* what **perf prints**: in callchain output (``perf record -g``) user frames
  are DSO-relative (``ip - map_start + map_offset``), which equals the file
  address whenever the executable segment has ``p_vaddr == p_offset`` (all
  GNU ld output), so annotate those with ``load_base=0``; the leaf-only
  layout prints runtime IPs, which need the load base. The most robust
  input is symbol offsets (``Sample.leaf.offset``): ``start + offset``.

When the file cannot be read (deleted after the process started, no
permission), :func:`function_bounds`, :func:`disassemble` and ``load_base``
raise :class:`~tdescope.app.errors.UserError`; falling back to the process's
live memory through gdb is the caller's decision, not done here.
"""

from __future__ import annotations

import os
import re
from bisect import bisect_right
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

import capstone

from tdescope.app.errors import UserError
from tdescope.app.system.elf import elf_index, open_elf
from tdescope.app.system.procmaps import read_maps

__all__ = [
    "code_file",
    "Insn",
    "HeatRow",
    "function_bounds",
    "disassemble",
    "disassemble_code",
    "annotate",
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
            mappings = read_maps(pid)
        except OSError:
            mappings = []
        for m in mappings:
            if m.path == clean:
                candidate = f"/proc/{pid}/map_files/{m.address_range}"
                if os.access(candidate, os.R_OK):
                    return candidate
    return clean


def function_bounds(elf_path: str, symbol: str) -> tuple[int, int]:
    """File address and size of function ``symbol`` (.symtab, then .dynsym).

    A symbol without a size (some hand-written assembly) extends to the next
    symbol.

    Raises
    ------
    UserError
        File unreadable or not x86-64 ELF, or no such function in it.
    """
    index = elf_index(elf_path)
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
    index = elf_index(elf_path)
    start, size = function_bounds(elf_path, symbol)
    off = index.file_offset(start)
    if off is None or size <= 0:
        raise UserError(f"{symbol}: no code bytes in {elf_path}")
    with open_elf(elf_path) as f:
        f.seek(off)
        code = f.read(size)
    return disassemble_code(code, start, index.name_at)


def disassemble_code(code: bytes, start: int, name_at=lambda _addr: "") -> list[Insn]:
    """Disassemble ``code`` found at file address ``start`` (x86-64, Intel syntax): the bytes of a
    function read here or by ``tdescope agent`` on a database host (``AgentClient.read_function``);
    ``name_at(address)`` names branch and RIP-relative targets ("" where nothing can tell)."""
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
            target=target, target_name=name_at(target) if target is not None else "",
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
        ``tdescope.app.system.elf.load_base`` for runtime IPs, 0 for perf's DSO-relative callchain
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
