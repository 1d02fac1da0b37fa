"""Raw Oracle data blocks (as captured from memory) decoded into fields with byte spans.

Every Oracle block starts with a 20-byte cache header and ends with a 4-byte
tail; on Linux x86-64 all multi-byte fields are little-endian::

    0  type   u8      4  rdba  u32    8  scn base u32   12 scn wrap u16
    1  frmt   u8                                        14 seq u8  15 flg u8
    2  spare  u16                                       16 chkval u16  18 spare u16
    size-4  tail u32 = (scn_base & 0xffff) << 16 | type << 8 | seq

The layout, the tail formula and the checksum rule (the XOR of all 16-bit
words of a block whose ``flg`` has bit 0x04 is zero) were checked against the
decrypted 8 KB block 5/907 that Frits Hoogland printed with gdb (seed 003):
its tail bytes ``01 06 f4 9a`` and its words XOR to 0. The same seed shows
what tablespace encryption (TDE) leaves in clear: the cache header and the
tail; the 8168 bytes in between are ciphertext on disk and in the read
buffer, and ``flg`` carries 0x10 there (0x16 on disk, 0x06 once decrypted in
the buffer cache).
"""

from __future__ import annotations

import functools
import math
import operator
import struct
from collections import Counter
from dataclasses import dataclass

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.plugins.oracle import _kdb

__all__ = [
    "BLOCK_TYPES",
    "CACHE_HEADER_SIZE",
    "BlockCheck",
    "CacheHeader",
    "OracleBlockDecoder",
    "check_block",
    "parse_cache_header",
    "xor_checksum",
]

CACHE_HEADER_SIZE = 20
TAIL_SIZE = 4

#: Cache-header block types tdescope names (kcbh type byte), as block dumps print them.
BLOCK_TYPES = {
    0x02: "KTU UNDO BLOCK",
    0x06: "trans data",
    0x10: "DATA SEGMENT HEADER - UNLIMITED",
    0x1D: "KTFB Bitmapped File Space Header",
    0x1E: "KTFB Bitmapped File Space Bitmap",
    0x20: "FIRST LEVEL BITMAP BLOCK",
    0x21: "SECOND LEVEL BITMAP BLOCK",
    0x22: "THIRD LEVEL BITMAP BLOCK",
    0x23: "PAGETABLE SEGMENT HEADER",
}

#: Cache-header flg bits. 0x01-0x08 as publicly described for kcbh; 0x10 as seen in seed 003.
FLAG_BITS = {
    0x01: "new block",
    0x02: "delayed logging change",
    0x04: "checksum set",
    0x08: "temporary block",
    0x10: "encrypted (TDE)",
}
_CHECKSUM_FLAG = 0x04

#: Bits per byte above which a block body is taken for ciphertext.
ENCRYPTED_ENTROPY = 7.5


@dataclass(frozen=True, slots=True)
class CacheHeader:
    """The first 20 bytes of every block (kcbh)."""

    type: int
    frmt: int
    spare1: int
    rdba: int
    scn_base: int
    scn_wrap: int
    seq: int
    flg: int
    chkval: int
    spare2: int

    @property
    def rdba_file(self) -> int:
        """Relative file number: the top 10 bits of the rdba."""
        return self.rdba >> 22

    @property
    def rdba_block(self) -> int:
        """Block number: the low 22 bits of the rdba (bigfile tablespaces use all 32)."""
        return self.rdba & 0x3FFFFF

    @property
    def scn(self) -> int:
        return (self.scn_wrap << 32) | self.scn_base

    @property
    def expected_tail(self) -> int:
        return ((self.scn_base & 0xFFFF) << 16) | (self.type << 8) | self.seq

    def rdba_text(self) -> str:
        """As dumps print it: ``0x0000038b (1024/907)``; file 0 shows as 1024."""
        rfile = self.rdba_file or 1024
        return f"0x{self.rdba:08x} ({rfile}/{self.rdba_block})"

    def type_text(self) -> str:
        return f"0x{self.type:02x}={BLOCK_TYPES.get(self.type, 'not in tdescope table')}"

    def flag_text(self) -> str:
        names = [n for bit, n in FLAG_BITS.items() if self.flg & bit]
        unknown = self.flg & ~sum(FLAG_BITS)
        if unknown:
            names.append(f"unknown 0x{unknown:02x}")
        return f"0x{self.flg:02x}" + (f" ({', '.join(names)})" if names else "")


@dataclass(frozen=True, slots=True)
class BlockCheck:
    """What the cache header, tail and checksum say about a block.

    ``tail_verdict`` is ``"consistent"`` (tail matches the header),
    ``"torn"`` (it does not: a fractured or partly written block) or
    ``"encrypted-looking"`` (it does not, and the whole block looks random).
    ``checksum_ok`` is None when flg bit 0x04 says no checksum was set.
    """

    tail: int
    expected_tail: int
    tail_verdict: str
    checksum_present: bool
    checksum_ok: bool | None
    body_entropy: float
    body_encrypted: bool


def parse_cache_header(data: bytes, byteorder: str = "little") -> CacheHeader | None:
    """The cache header of ``data``, or None when fewer than 20 bytes are given."""
    if len(data) < CACHE_HEADER_SIZE:
        return None
    e = "<" if byteorder == "little" else ">"
    return CacheHeader(*struct.unpack_from(e + "BBHIIHBBHH", data, 0))


def xor_checksum(data: bytes, byteorder: str = "little") -> int:
    """XOR of all 16-bit words of ``data``: 0 for a block whose chkval is right."""
    n = len(data) // 2
    words = struct.unpack_from(("<" if byteorder == "little" else ">") + f"{n}H", data, 0)
    return functools.reduce(operator.xor, words, 0)


def byte_entropy(data: bytes) -> float:
    """Shannon entropy in bits per byte (0..8).

    A local copy until the shared one lands in ``tdescope.app``.
    """
    if not data:
        return 0.0
    n = len(data)
    return -sum(c / n * math.log2(c / n) for c in Counter(data).values())


def check_block(data: bytes, byteorder: str = "little") -> BlockCheck | None:
    """Tail, checksum and encryption verdicts for one whole block; None if too short."""
    hdr = parse_cache_header(data, byteorder)
    if hdr is None or len(data) < CACHE_HEADER_SIZE + TAIL_SIZE:
        return None
    (tail,) = struct.unpack_from("<I" if byteorder == "little" else ">I", data, len(data) - TAIL_SIZE)
    body_entropy = byte_entropy(data[CACHE_HEADER_SIZE:-TAIL_SIZE])
    if tail == hdr.expected_tail:
        verdict = "consistent"
    elif byte_entropy(data) > ENCRYPTED_ENTROPY:
        verdict = "encrypted-looking"
    else:
        verdict = "torn"
    present = bool(hdr.flg & _CHECKSUM_FLAG)
    ok = (xor_checksum(data, byteorder) == 0) if present else None
    return BlockCheck(tail, hdr.expected_tail, verdict, present, ok, body_entropy,
                      body_entropy > ENCRYPTED_ENTROPY)


def _cache_header_field(h: CacheHeader) -> DecodedField:
    return DecodedField("cache header", 0, CACHE_HEADER_SIZE, h.type_text(), (
        DecodedField("type", 0, 1, h.type_text()),
        DecodedField("frmt", 1, 2, f"0x{h.frmt:02x} (dumps print the low nibble: 0x{h.frmt & 0x0F:02x})"),
        DecodedField("spare", 2, 4, f"0x{h.spare1:04x}"),
        DecodedField("rdba", 4, 8, h.rdba_text()),
        DecodedField("scn", 8, 14, f"0x{h.scn_wrap:04x}.{h.scn_base:08x}", (
            DecodedField("scn base", 8, 12, f"0x{h.scn_base:08x}"),
            DecodedField("scn wrap", 12, 14, f"0x{h.scn_wrap:04x}"),
        )),
        DecodedField("seq", 14, 15, f"0x{h.seq:02x}"),
        DecodedField("flg", 15, 16, h.flag_text()),
        DecodedField("chkval", 16, 18, f"0x{h.chkval:04x}"),
        DecodedField("spare", 18, 20, f"0x{h.spare2:04x}"),
    ))


def _tail_field(size: int, c: BlockCheck) -> DecodedField:
    t = c.tail
    return DecodedField("tail", size - TAIL_SIZE, size,
                        f"0x{t:08x} (scn 0x{t >> 16:04x}, type 0x{(t >> 8) & 0xFF:02x}, seq 0x{t & 0xFF:02x}): "
                        f"{c.tail_verdict}" + ("" if c.tail_verdict == "consistent"
                                               else f", header expects 0x{c.expected_tail:08x}"))


class OracleBlockDecoder:
    """:class:`~tdescope.app.engines.api.PageDecoder` for raw Oracle blocks.

    Parameters
    ----------
    byteorder : str
        ``"little"`` for Linux x86-64 (the default) and other little-endian
        platforms; ``"big"`` for e.g. AIX or Solaris SPARC datafiles.
    """

    def __init__(self, byteorder: str = "little") -> None:
        self.byteorder = byteorder

    def decode(self, data: bytes, pgno: int = -1, context=None) -> DecodedPage:
        """Decode one block; never raises, reports what did not decode in ``problems``."""
        try:
            return self._decode(bytes(data), pgno)
        except Exception as exc:  # a decoder must not take the view down
            return DecodedPage("unknown", problems=(f"decoder error: {type(exc).__name__}: {exc}",))

    def _decode(self, data: bytes, pgno: int) -> DecodedPage:
        size = len(data)
        check = check_block(data, self.byteorder)
        hdr = parse_cache_header(data, self.byteorder)
        if check is None or hdr is None:
            return DecodedPage("unknown", problems=(f"{size} bytes: too short for a cache header and tail",))
        problems: list[str] = []
        fields = [_cache_header_field(hdr)]
        if pgno >= 0 and pgno != hdr.rdba_block:
            problems.append(f"rdba says block {hdr.rdba_block}, captured as block {pgno}")
        if check.checksum_ok is False:
            problems.append(f"checksum: XOR of all 16-bit words is 0x{xor_checksum(data, self.byteorder):04x}, "
                            "not 0 (flg bit 0x04 says chkval is set)")
        if check.tail_verdict != "consistent":
            problems.append(f"tail 0x{check.tail:08x} does not match the header "
                            f"(expected 0x{check.expected_tail:08x}): {check.tail_verdict}")
        body = (CACHE_HEADER_SIZE, size - TAIL_SIZE)
        page_type = BLOCK_TYPES.get(hdr.type, "unknown")
        records: tuple[tuple, ...] = ()
        cells = 0
        if check.body_encrypted:
            page_type = "encrypted"
            problems.append(
                f"body looks encrypted ({check.body_entropy:.2f} bits/byte over bytes {body[0]}..{body[1]}): "
                "TDE leaves only the cache header and the tail in clear"
                + ("; flg bit 0x10 (encrypted) is set" if hdr.flg & 0x10 else ""))
            fields.append(DecodedField("encrypted body", body[0], body[1],
                                       f"{body[1] - body[0]} bytes, {check.body_entropy:.2f} bits/byte"))
        elif hdr.type == 0x06:
            layer = _kdb.decode_trans_block(data, self.byteorder)
            fields += layer.fields
            problems += layer.problems
            records, cells = layer.records, layer.cells
            page_type = layer.page_type or page_type
        else:
            fields.append(DecodedField("body", body[0], body[1],
                                       f"{hdr.type_text()}: body layout not decoded by tdescope"))
        fields.append(_tail_field(size, check))
        return DecodedPage(page_type, tuple(fields), cells, records, tuple(problems))
