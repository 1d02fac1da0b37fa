"""Recognise pgcrypto's PGP messages (RFC 4880) and read their cipher settings, without a key.

``pgp_sym_encrypt`` writes a symmetric-key encrypted session key packet (tag 3:
version, cipher algorithm, S2K specifier) followed by the data packet: tag 18
(SEIPD, with the MDC integrity check) or tag 9 (SED, ``disable-mdc=1``). That
is enough to say which columns hold PGP messages and with which settings.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["PgpSettings", "parse_pgp_message", "CIPHERS", "HASHES"]

CIPHERS = {1: "IDEA", 2: "3DES", 3: "CAST5", 4: "Blowfish", 7: "AES-128", 8: "AES-192", 9: "AES-256",
           10: "Twofish"}
HASHES = {1: "MD5", 2: "SHA-1", 3: "RIPEMD-160", 8: "SHA-256", 9: "SHA-384", 10: "SHA-512", 11: "SHA-224"}
_S2K = {0: "simple", 1: "salted", 3: "iterated+salted"}


@dataclass(frozen=True, slots=True)
class PgpSettings:
    """What the packet headers of one PGP message say."""

    cipher: str
    s2k: str
    s2k_hash: str
    integrity: str  # "MDC (SEIPD, tag 18)" or "none (SED, tag 9)"

    def describe(self) -> str:
        return f"{self.cipher}, S2K {self.s2k} {self.s2k_hash}, integrity {self.integrity}"


def _packet(data: bytes, pos: int) -> tuple[int, int, int] | None:
    """(tag, body start, body length or -1 for partial/indeterminate) of the packet at ``pos``."""
    if pos >= len(data) or not data[pos] & 0x80:
        return None
    first = data[pos]
    if first & 0x40:  # new format
        tag = first & 0x3F
        if pos + 1 >= len(data):
            return None
        b = data[pos + 1]
        if b < 192:
            return tag, pos + 2, b
        if b < 224:
            if pos + 2 >= len(data):
                return None
            return tag, pos + 3, ((b - 192) << 8) + data[pos + 2] + 192
        if b == 255:
            if pos + 6 > len(data):
                return None
            return tag, pos + 6, int.from_bytes(data[pos + 2:pos + 6], "big")
        return tag, pos + 2, -1  # partial body length
    tag, kind = (first >> 2) & 0x0F, first & 0x03
    size = {0: 1, 1: 2, 2: 4}.get(kind)
    if size is None:
        return tag, pos + 1, -1
    if pos + 1 + size > len(data):
        return None
    return tag, pos + 1 + size, int.from_bytes(data[pos + 1:pos + 1 + size], "big")


def parse_pgp_message(data: bytes) -> PgpSettings | None:
    """Settings of a symmetric pgcrypto message, or None when ``data`` is not one."""
    data = bytes(data)
    head = _packet(data, 0)
    if head is None or head[0] != 3 or head[2] < 4:
        return None
    _, body, length = head
    if body + 4 > len(data):
        return None  # a truncated buffer: the header announces more than is there
    version, algo, s2k_type = data[body], data[body + 1], data[body + 2]
    if version != 4 or algo not in CIPHERS or s2k_type not in _S2K:
        return None
    s2k_hash = HASHES.get(data[body + 3], f"hash {data[body + 3]}")
    nxt = _packet(data, body + length)
    if nxt is None or nxt[0] not in (9, 18):
        return None
    integrity = "MDC (SEIPD, tag 18)" if nxt[0] == 18 else "none (SED, tag 9)"
    return PgpSettings(CIPHERS[algo], _S2K[s2k_type], s2k_hash, integrity)
