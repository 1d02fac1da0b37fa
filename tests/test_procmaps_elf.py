"""The one /proc/PID/maps reader and the one ELF index, on table text and on a real process."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import compile_client, wait_for
from tdescope.app.hotspots.disasm import function_bounds
from tdescope.app.system.elf import elf_index, find_symbol, load_base, resolve_in_process
from tdescope.app.system.procmaps import Mapping, parse_maps, read_maps

MAPS_LINES = [
    ("55d0c0a00000-55d0c0a01000 r--p 00000000 08:01 1311 /tmp/hot",
     Mapping(0x55D0C0A00000, 0x55D0C0A01000, 0, "/tmp/hot", "r--p", 1311, False)),
    ("55d0c0a01000-55d0c0a02000 r-xp 00001000 08:01 1311 /tmp/hot",
     Mapping(0x55D0C0A01000, 0x55D0C0A02000, 0x1000, "/tmp/hot", "r-xp", 1311, False)),
    ("7f0000000000-7f0000001000 r-xp 00002000 08:01 77 /usr/lib/libx.so (deleted)",
     Mapping(0x7F0000000000, 0x7F0000001000, 0x2000, "/usr/lib/libx.so", "r-xp", 77, True)),
    ("7f0000000000-7f0000001000 r-xp 00000000 08:01 78 /opt/my lib/liby.so",
     Mapping(0x7F0000000000, 0x7F0000001000, 0, "/opt/my lib/liby.so", "r-xp", 78, False)),
    ("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 [stack]",
     Mapping(0x7FFD1000, 0x7FFD2000, 0, "[stack]", "rw-p", 0, False)),
    ("7f1000000000-7f1000100000 rw-p 00000000 00:00 0",
     Mapping(0x7F1000000000, 0x7F1000100000, 0, "", "rw-p", 0, False)),
    ("garbage", None),
    ("zz-10 r-xp 0 08:01 1 /x", None),
]


@pytest.mark.parametrize("line, expected", MAPS_LINES)
def test_parse_maps_line(line, expected):
    assert parse_maps(line) == ([expected] if expected else [])


def test_mapping_kinds():
    code, deleted, stack, anon = (MAPS_LINES[i][1] for i in (1, 2, 4, 5))
    assert code.executable and code.file_backed and code.address_range == "55d0c0a01000-55d0c0a02000"
    assert deleted.deleted and deleted.executable
    assert not stack.file_backed and not stack.executable and not anon.file_backed


@pytest.fixture(scope="module")
def hot(tmp_path_factory) -> Path:
    return compile_client("hot.c", tmp_path_factory.mktemp("hot") / "hot", "-fno-omit-frame-pointer")


def test_resolution_and_load_base_agree_with_live_memory(hot):
    target = subprocess.Popen([str(hot), "5"])
    try:
        wait_for(lambda: str(hot) in open(f"/proc/{target.pid}/maps").read(), what="hot mapped")
        maps = read_maps(target.pid)
        assert any(m.path == str(hot) and m.executable for m in maps)
        start, size = function_bounds(str(hot), "hot_loop")
        assert find_symbol(str(hot), "hot_loop") == start and elf_index(str(hot)).name_at(start + 1) == "hot_loop+0x1"
        found = resolve_in_process(target.pid, ("no_such_function", "hot_loop"))
        assert found is not None and found.name == "hot_loop" and found.path == str(hot)
        assert found.address == load_base(target.pid, str(hot)) + start
        with open(f"/proc/{target.pid}/mem", "rb") as mem:
            mem.seek(found.address)
            live = mem.read(size)
        with open(str(hot), "rb") as fh:
            fh.seek(elf_index(str(hot)).file_offset(start))
            assert fh.read(size) == live
    finally:
        target.kill()
        target.wait()
