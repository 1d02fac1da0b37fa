"""Raw Oracle block decoding: byte-exact blocks built from the documented layout."""

from __future__ import annotations

import functools
import operator
import random
import struct

import pytest

from tdescope.plugins.oracle.blocks import OracleBlockDecoder, check_block, parse_cache_header, xor_checksum

SIZE = 8192


def _fix_checksum(buf: bytearray) -> None:
    buf[16:18] = b"\0\0"
    x = functools.reduce(operator.xor, struct.unpack(f"<{SIZE // 2}H", buf), 0)
    struct.pack_into("<H", buf, 16, x)


def make_block(*, type_=0x06, rdba=(5 << 22) | 156, scn_base=0x00E7A9A1, scn_wrap=0x0001, seq=0x02, flg=0x06,
               body: bytes | None = None) -> bytes:
    """An 8 KB block: cache header, a small table block body, tail, checksum so that the XOR is 0."""
    buf = bytearray(SIZE)
    struct.pack_into("<BBHIIHBBHH", buf, 0, type_, 0xA2, 0, rdba, scn_base, scn_wrap, seq, flg, 0, 0)
    if body is None:
        # ktbbh: typ 1 (DATA), seg/obj 0x1243e, csc 0x0001.00e7a99e, itc 2, flg 0x32, bdba 0x01400098
        buf[0x14] = 1
        struct.pack_into("<IIH", buf, 0x18, 0x1243E, 0x00E7A99E, 1)
        struct.pack_into("<HBBI", buf, 0x24, 2, 0x32, 0, 0x01400098)
        # ITL 1: xid 0x0009.01a.00000b7c uba 0x01000d2e.02a1.1c, --U- lck 2, scn 0x0001.00e7a9a1
        struct.pack_into("<HHIIHBxHHI", buf, 0x2C, 9, 0x1A, 0xB7C, 0x01000D2E, 0x2A1, 0x1C, 0x2002, 1, 0x00E7A9A1)
        kd = 0x64  # 0x2c + 2*24 + 8, as in the ASSM block of seed 003
        # rows: flag 0x2c (--H-FL--), lock 1, cc 2, then length-prefixed columns (0xff = NULL)
        rows = [bytes.fromhex("2c 01 02 02 c1 02 05") + b"alpha",  # 1, 'alpha'
                bytes.fromhex("2c 01 02 05 3d 64 4e 38 66 ff")]     # -123.45, NULL
        tsiz = SIZE - kd - 4
        offs, end = [], tsiz
        for r in rows:
            end -= len(r)
            offs.append(end)
            buf[kd + end:kd + end + len(r)] = r
        fsbo = 14 + 4 + 2 * len(rows)
        struct.pack_into("<BBHhHHHH", buf, kd, 0, 1, len(rows), -1, fsbo, offs[-1], offs[-1] - fsbo, offs[-1] - fsbo)
        struct.pack_into("<HH", buf, kd + 14, 0, len(rows))
        struct.pack_into(f"<{len(rows)}H", buf, kd + 18, *offs)
    else:
        buf[20:SIZE - 4] = body
    tail = ((scn_base & 0xFFFF) << 16) | (type_ << 8) | seq
    struct.pack_into("<I", buf, SIZE - 4, tail)
    _fix_checksum(buf)
    return bytes(buf)


# The decrypted block 5/907 exactly as seed 003 printed it with gdb (all other bytes are zero).
SEED_HEAD = bytes.fromhex(
    "06a200008b030000f49a4e0000000106dd46000001000000c37b0100ed9a4e0000000000020032008803000007001d00"
    "d0010000870900009003270001200000f49a4e0000000000000000000000000000000000000000000000000000000000"
    "0000000000010100ffff14008a1f761f761f000001008a1f")
SEED_TAIL = bytes.fromhex("2c01010a414141414141414141410106f49a")


def seed_block() -> bytes:
    buf = bytearray(SIZE)
    buf[:len(SEED_HEAD)] = SEED_HEAD
    buf[SIZE - len(SEED_TAIL):] = SEED_TAIL
    return bytes(buf)


@pytest.fixture(scope="module")
def page():
    return OracleBlockDecoder().decode(make_block(), 156)


@pytest.mark.parametrize("name, value", [
    ("type", "0x06=trans data"),
    ("frmt", "0xa2 (dumps print the low nibble: 0x02)"),
    ("rdba", "0x0140009c (5/156)"),
    ("scn", "0x0001.00e7a9a1"),
    ("seq", "0x02"),
    ("flg", "0x06 (delayed logging change, checksum set)"),
    ("seg/obj", "0x1243e"),
    ("csc", "0x0001.00e7a99e"),
    ("itc", "2"),
    ("fnx / bdba", "0x1400098"),
    ("xid", "0x0009.01a.00000b7c"),
    ("uba", "0x01000d2e.02a1.1c"),
    ("flag / lck", "--U- 2"),
    ("nrow", "2"),
    ("fsbo", "0x16"),
])
def test_fields(page, name, value):
    values = [f.value for top in page.fields for f in top.walk() if f.name == name]
    assert value in values


def test_header_spans_and_tail(page):
    spans = {f.name: (f.start, f.end) for f in page.fields}
    assert spans["cache header"] == (0, 20)
    assert spans["tail"] == (SIZE - 4, SIZE)
    assert spans["data header"] == (0x64, 0x72)
    tail = next(f for f in page.fields if f.name == "tail")
    assert tail.value == "0xa9a10602 (scn 0xa9a1, type 0x06, seq 0x02): consistent"


def test_rows(page):
    assert page.page_type == "table data"
    assert page.cells == 2
    # 3d 64 4e 38 66 is -123.45 and also the printable text '=dN8f': both are said
    assert page.records == (("1", "'alpha'"), ("'=dN8f' or NUMBER -123.45", "NULL"))
    assert page.problems == ("column types are not stored in the block: values are guessed (text, NUMBER or hex)",)
    row0 = next(f for f in page.fields if f.name.startswith("tab 0, row 0"))
    assert row0.end == SIZE - 4 and row0.value == "tl: 12 fb: --H-FL-- lb: 0x1 cc: 2"


def test_cache_header_dataclass():
    h = parse_cache_header(make_block())
    assert (h.type, h.frmt, h.rdba_file, h.rdba_block, h.scn, h.seq, h.flg) == (6, 0xA2, 5, 156, 0x1_00E7A9A1, 2, 6)
    assert parse_cache_header(b"short") is None


def test_checksum_xor_is_zero_and_detects_a_flipped_byte():
    good = make_block()
    assert xor_checksum(good) == 0 and check_block(good).checksum_ok
    bad = bytearray(good)
    bad[0x1000] ^= 0x40
    c = check_block(bytes(bad))
    assert c.checksum_ok is False and c.tail_verdict == "consistent"
    page = OracleBlockDecoder().decode(bytes(bad))
    assert any(p.startswith("checksum: XOR of all 16-bit words is 0x0040") for p in page.problems)


def test_no_checksum_when_flag_clear():
    blk = bytearray(make_block(flg=0x02))
    blk[16:18] = b"\0\0"
    assert check_block(bytes(blk)).checksum_ok is None


def test_torn_tail():
    blk = bytearray(make_block())
    blk[SIZE - 4:] = struct.pack("<I", 0x11110601)  # older SCN in the tail: half-written block
    c = check_block(bytes(blk))
    assert c.tail_verdict == "torn"
    page = OracleBlockDecoder().decode(bytes(blk))
    assert page.page_type == "table data"
    assert any("torn" in p for p in page.problems)


def test_encrypted_body_with_clear_header():
    body = random.Random(907).randbytes(SIZE - 24)
    blk = make_block(flg=0x16, body=body)  # TDE leaves header and tail in clear; flg 0x10 set on disk
    c = check_block(blk)
    assert c.tail_verdict == "consistent" and c.body_encrypted and c.body_entropy > 7.9
    page = OracleBlockDecoder().decode(blk)
    assert page.page_type == "encrypted"
    assert [f.name for f in page.fields] == ["cache header", "encrypted body", "tail"]
    assert "flg bit 0x10 (encrypted) is set" in page.problems[-1]


def test_everything_random_is_encrypted_looking():
    blk = random.Random(1).randbytes(SIZE)
    assert check_block(blk).tail_verdict == "encrypted-looking"
    assert OracleBlockDecoder().decode(blk).page_type == "encrypted"


def test_seed_003_block_907():
    """The real decrypted block from seed 003: layout, tail and checksum hold on real bytes."""
    blk = seed_block()
    assert xor_checksum(blk) == 0
    c = check_block(blk)
    assert c.tail == 0x9AF40601 and c.tail_verdict == "consistent" and c.checksum_ok
    page = OracleBlockDecoder().decode(blk, 907)
    values = {f.name: f.value for top in page.fields for f in top.walk()}
    assert values["rdba"] == "0x0000038b (1024/907)"  # as the block dump prints it
    assert values["seg/obj"] == "0x17bc3"
    assert values["csc"] == "0x0000.004e9aed"
    assert values["scn/fsc"] == "0x0000.00000000"  # ITL 2 (last one walked)
    assert "0x0007.01d.000001d0 0x00000987.0390.27 --U- 1 0x0000.004e9af4" in {
        f.value for f in page.fields if f.name == "ITL 0x01"}
    assert values["fseo"] == "0x1f8a" and values["avsp"] == "0x1f76"
    assert page.records == (("'AAAAAAAAAA'",),)


@pytest.mark.parametrize("data", [b"", b"\x06", bytes(23), bytes(100), b"\xff" * SIZE, bytes(SIZE)])
def test_never_raises(data):
    page = OracleBlockDecoder().decode(data)
    assert isinstance(page.page_type, str)


def test_glossary_names_the_seed_functions():
    import json
    from pathlib import Path

    import tdescope

    path = Path(tdescope.__file__).parent / "resources" / "glossary" / "oracle.json"
    glossary = json.loads(path.read_text())
    for name in ("kcbgtcr", "kcbz_table_scan_read", "kdstf*", "kdr4chk", "kdb4chk1", "ztchsh1*",
                 "y8_ExpandRijndaelKey", "qertbFetch", "evaopn2", "kcrfw_redo_gen_ext", "kcbchg1_main", "kgce_*",
                 "l9_EncryptCFB128_RIJ128_AES_NI", "kcbztek_trace_blk", "kcbz_encdec_tbsblk", "kgce_dec",
                 "kcbchk_ctx", "_intel_fast_memcpy", "kskthbwt", "kskthewt"):
        assert glossary[name].strip()
    assert all(isinstance(v, str) and v.endswith(".") for v in glossary.values())
