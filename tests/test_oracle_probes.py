"""The Oracle probe recipes, proven with real gdb and real eBPF on a C stand-in for an Oracle server process.

tests/clients/oracle_like.c exports kcbzvb, kcbztek_trace_blk, kcbz_encdec_tbsblk, kgce_dec,
kcbchk_ctx, _intel_fast_memcpy, kskthbwt and kskthewt, taking the arguments seed 003 shows in the
registers it shows, called in the order of Hoogland's debugtrace; it is built without -g, like
the oracle binary, so every recipe must work from registers at the exact function entry.
"""

import shutil
import subprocess

import pytest

from tdescope.app.probe.window import CaptureLimits, CaptureWindow
from tdescope.app.probe.capture_record import describe_capture
from tdescope.plugins.oracle.blocks import OracleBlockDecoder, check_block, parse_cache_header
from tdescope.plugins.oracle.recipes import oracle_recipes

from conftest import CLIENTS, probe_backend

pytestmark = pytest.mark.gdb

RECIPES = {r.key: r for r in oracle_recipes()}


def keystream(n):
    return bytes(((i * 167 + 13) & 0xFF) ^ 0x5A for i in range(n))


@pytest.fixture(scope="module")
def oracle_like(tmp_path_factory):
    cc = shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    exe = tmp_path_factory.mktemp("oracle_like") / "oracle_like"
    subprocess.run([cc, "-O1", "-o", str(exe), str(CLIENTS / "oracle_like.c")], check=True)
    syms = subprocess.run(["nm", str(exe)], capture_output=True, text=True, check=True).stdout
    assert ".debug" not in subprocess.run(["objdump", "-h", str(exe)], capture_output=True, text=True).stdout
    for name in ("kcbchk_ctx", "kgce_dec", "kskthbwt", "_intel_fast_memcpy"):
        assert f" T {name}\n" in syms
    proc = subprocess.Popen([str(exe), "60", "2000"], stdout=subprocess.PIPE, text=True, start_new_session=True)
    pid = int(proc.stdout.readline())
    yield pid
    proc.kill()
    proc.wait()


@pytest.fixture(params=["gdb", "ebpf"])
def backend(request):
    """Every recipe runs on both probe backends."""
    return request.param


def capture(pid, key, backend, count=2):
    got = []
    window = CaptureWindow(pid, RECIPES[key], CaptureLimits(max_captures=count, max_seconds=15, first_hit_timeout=10),
                           "oracle", got.append, backend=probe_backend(backend))
    summary = window.run()
    assert summary.error is None, summary.error
    assert len(got) == count
    return got, summary


def test_kcbchk_ctx_captures_the_decrypted_block_which_decodes(oracle_like, backend):
    caps, summary = capture(oracle_like, "oracle.block_decrypted", backend)
    assert summary.armed_symbol == "kcbchk_ctx"
    block = caps[0].before
    assert len(block) == 8192 and caps[0].after == b""
    head = parse_cache_header(block)
    assert (head.type, head.frmt, head.flg, head.seq) == (6, 0xA2, 0x06, 1)
    assert (head.rdba_file, head.rdba_block, head.scn) == (5, 907, 0x4E9AF4)
    check = check_block(block)
    assert check.tail_verdict == "consistent" and check.checksum_ok is True and not check.body_encrypted
    page = OracleBlockDecoder().decode(block)
    assert page.page_type == "trans data"
    assert b"row AAAAAAAAAA" in block
    _, shown = describe_capture(caps[0], OracleBlockDecoder())  # what the captures view decodes
    assert shown.page_type == "trans data"


def test_kcbzvb_captures_the_same_block_still_encrypted(oracle_like, backend):
    caps, _ = capture(oracle_like, "oracle.block_encrypted", backend)
    block = caps[0].before
    head = parse_cache_header(block)
    assert (head.rdba_block, head.flg) == (907, 0x16)
    check = check_block(block)
    assert check.body_encrypted and check.tail_verdict == "consistent"
    assert OracleBlockDecoder().decode(block).page_type == "encrypted"


def test_memcpy_recipe_takes_only_8k_block_copies_with_both_sides(oracle_like, backend):
    caps, _ = capture(oracle_like, "oracle.block_copy", backend)
    for c in caps:  # the 8168-byte copy after kgce_dec fails the size condition
        assert len(c.before) == len(c.after) == 8192
        assert c.before == c.after  # dest (rdi) at return holds what src (rsi) held at entry
        assert parse_cache_header(c.before).flg == 0x16


def test_kgce_dec_out_buffer_holds_the_decrypted_body_at_return(oracle_like, backend):
    caps, _ = capture(oracle_like, "oracle.kgce_dec", backend)
    c = caps[0]
    assert len(c.before) == len(c.after) == 8168
    assert bytes(a ^ b for a, b in zip(c.before, keystream(8168))) == c.after
    assert c.after.endswith(b"row AAAAAAAAAA 0123 ")


@pytest.mark.parametrize("key,pgno", [("oracle.wait_begin", 524), ("oracle.wait_end", 524),
                                      ("oracle.tbsblk_decrypt_call", 907), ("oracle.encryption_check", -1)])
def test_marker_recipes_carry_the_register_value(oracle_like, backend, key, pgno):
    caps, summary = capture(oracle_like, key, backend)
    assert [c.pgno for c in caps] == [pgno, pgno]
    assert all(c.before == b"" for c in caps)
    assert summary.armed_symbol == RECIPES[key].symbols[0]
