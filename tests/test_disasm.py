"""Disassembly with capstone from real ELF files, and sample heat from real perf."""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from conftest import compile_client, wait_for
from tdescope.app.hotspots.disasm import (
    annotate,
    disassemble,
    function_bounds,
    is_crypto_insn,
)
from tdescope.app.errors import UserError
from tdescope.app.system.elf import load_base
from tdescope.app.hotspots.profile import HotspotSampler, check_perf
from tdescope.app.observe.sampling import leaves_of




@pytest.fixture(scope="module")
def hot(tmp_path_factory) -> Path:
    return compile_client("hot.c", tmp_path_factory.mktemp("hot") / "hot", "-fno-omit-frame-pointer")


def test_function_bounds_and_disassembly(hot):
    start, size = function_bounds(str(hot), "hot_loop")
    assert start > 0 and 16 < size < 200
    insns = disassemble(str(hot), "hot_loop")
    assert insns[0].address == start
    assert insns[-1].address + insns[-1].size == start + size
    mnemonics = [i.mnemonic for i in insns]
    assert "imul" in mnemonics and "ret" in mnemonics  # the multiply of the LCG is there
    # cross-check with objdump when present: same addresses, same bytes
    if shutil.which("objdump"):
        out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(hot)],
                             capture_output=True, text=True, check=True).stdout
        section = out.split("<hot_loop>:")[1].split("\n\n")[0]
        addrs = [int(line.split(":")[0], 16) for line in section.strip().splitlines()]
        assert addrs == [i.address for i in insns]
    # the backward branch of the loop targets hot_loop itself, resolved by name
    loop = [i for i in insns if i.is_jump and i.target_name.startswith("hot_loop+")]
    assert loop and start <= loop[-1].target < start + size
    assert not any(i.is_crypto for i in insns)
    main = disassemble(str(hot), "main")
    calls = {i.target_name for i in main if i.is_call}
    assert {"hot_loop", "cold_loop", "clock_gettime@plt"} <= calls
    assert any(i.target_name == "sink" for i in main)  # RIP-relative data reference


def test_unreadable_or_unknown_raise_user_error(hot, tmp_path):
    with pytest.raises(UserError, match="not found"):
        disassemble(str(tmp_path / "gone"), "f")
    with pytest.raises(UserError, match="no such function"):
        function_bounds(str(hot), "no_such_function")
    text = tmp_path / "x.txt"
    text.write_text("not elf")
    with pytest.raises(UserError, match="not an ELF"):
        function_bounds(str(text), "f")


def test_aesni_instructions_are_flagged(tmp_path):
    exe = compile_client("aes.c", tmp_path / "aes", "-maes", "-fno-omit-frame-pointer")
    insns = disassemble(str(exe), "aes_rounds")
    flagged = {i.mnemonic for i in insns if i.is_crypto}
    assert {"aesenc", "aesenclast", "aesdec", "aesimc"} <= flagged
    assert all(not i.is_crypto for i in insns if not i.mnemonic.startswith("aes"))


@pytest.mark.parametrize("mnemonic, expected", [
    ("aesenc", True), ("aesdeclast", True), ("aeskeygenassist", True), ("aesimc", True),
    ("vaesenc", True), ("vaesdeclast", True), ("pclmulqdq", True), ("vpclmulqdq", True),
    ("pclmullqlqdq", True), ("sha256rnds2", True), ("mov", False), ("vpxor", False),
    ("xor", False), ("pshufb", False),
])
def test_is_crypto_insn(mnemonic, expected):
    assert is_crypto_insn(mnemonic) is expected


def test_annotate_maps_addresses():
    from tdescope.app.hotspots.disasm import Insn
    insns = [Insn(0x100, 4, "", "a", ""), Insn(0x104, 2, "", "b", ""), Insn(0x106, 1, "", "c", "")]
    rows = annotate(insns, Counter({0x5000 + 0x104: 3, 0x5000 + 0x105: 1, 0x5000 + 0x100: 4,
                                    0x5000 + 0x200: 9}), load_base=0x5000)
    assert [r.samples for r in rows] == [4, 4, 0]  # 0x105 is inside b; 0x200 is outside
    assert rows[0].pct == 50.0 and rows[0].insn is insns[0]


def test_load_base_matches_live_memory(hot):
    target = subprocess.Popen([str(hot), "5"])
    try:
        wait_for(lambda: str(hot) in open(f"/proc/{target.pid}/maps").read(), what="hot mapped")
        base = load_base(target.pid, str(hot))
        start, size = function_bounds(str(hot), "hot_loop")
        with open(f"/proc/{target.pid}/mem", "rb") as mem:
            mem.seek(base + start)
            live = mem.read(size)
        assert live.hex() == "".join(i.bytes_hex for i in disassemble(str(hot), "hot_loop"))
        assert base % 4096 == 0 and base != 0  # PIE: placed somewhere by the loader
        with pytest.raises(UserError, match="not mapped"):
            load_base(target.pid, "/bin/sh")
    finally:
        target.kill()
        target.wait()


@pytest.mark.perf
def test_heat_from_real_samples(hot):
    problem = check_perf()
    if problem is not None:
        pytest.skip(problem)
    target = subprocess.Popen([str(hot), "20"])
    samples = []
    try:
        with HotspotSampler(target.pid, frequency=499, window_s=0.5, on_samples=samples.extend):
            # wait for samples in hot_loop, not for a time: a loaded machine delivers windows late
            wait_for(lambda: sum(s.leaf.symbol == "hot_loop" for s in list(samples)) >= 50, timeout=60, interval=0.1,
                     what="50 samples in hot_loop")
    finally:
        target.kill()
        target.wait()
    insns = disassemble(str(hot), "hot_loop")
    start, size = function_bounds(str(hot), "hot_loop")
    # 1) from symbol offsets
    offs = leaves_of(samples, target.pid).offsets["hot_loop"]
    rows = annotate(insns, Counter({start + o: n for o, n in offs.items()}))
    assert sum(r.samples for r in rows) == sum(offs.values()) > 0
    hottest = max(rows, key=lambda r: r.samples)
    assert start <= hottest.insn.address < start + size
    assert sum(r.pct for r in rows) == pytest.approx(100.0)
    # 2) from perf's callchain leaf addresses, which are DSO-relative (load_base 0)
    leaf_addrs = Counter(s.ip for s in samples if s.leaf.symbol == "hot_loop")
    rows2 = annotate(insns, leaf_addrs, load_base=0)
    assert [r.samples for r in rows2] == [r.samples for r in rows]


def test_code_of_a_deleted_binary_is_read_through_map_files(tmp_path):
    """A binary replaced on disk while it runs (a package upgrade) is still disassembled."""
    import shutil
    import subprocess

    from tdescope.app.hotspots.disasm import code_file, disassemble

    src = tmp_path / "spin.c"
    src.write_text("__attribute__((noinline)) int spin(int n){int s=0;for(int i=0;i<n;i++)s+=i*i;return s;}\n"
                   "int main(void){volatile int r=0;for(;;)r+=spin(1000);}\n")
    exe = tmp_path / "spin"
    subprocess.run(["cc", "-O1", "-o", str(exe), str(src)], check=True)
    copy = tmp_path / "spin-running"
    shutil.copy(exe, copy)
    proc = subprocess.Popen([str(copy)])
    try:
        wait_for(lambda: str(copy) in open(f"/proc/{proc.pid}/maps").read(), what="spin-running mapped")
        copy.unlink()  # deleted while the process runs
        path = code_file(str(copy) + " (deleted)", proc.pid)
        assert path.startswith(f"/proc/{proc.pid}/map_files/")
        insns = disassemble(path, "spin")
        assert any(i.mnemonic == "imul" for i in insns)  # the loop body s += i*i
        with pytest.raises(UserError):
            disassemble(code_file(str(copy) + " (deleted)"), "spin")  # no pid: nothing to read
    finally:
        proc.kill()
        proc.wait()
