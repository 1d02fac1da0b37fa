"""The one crypto rule: which functions of a profile are encryption.

Hotspot tables, flame graph colours, the timeline's crypto share, the report's
hotspot bars and ``tdescope top`` all ask :func:`is_crypto`.
"""

from __future__ import annotations

import re

from tdescope.app.hotspots.glossary import base_symbol

__all__ = ["is_crypto"]

# Patterns over the base symbol (versions and clone suffixes stripped). They
# cover OpenSSL (1.1 and 3.x, as bundled in the sqlcipher3 wheel and as
# Debian's libcrypto), LibreSSL/BoringSSL names, and Oracle's crypto layer.
_CRYPTO_PATTERNS = [
    # AES, including the AES-NI assembly and key schedules
    r"aesni_.*", r"AES_.*", r"aes_.*", r".*_aes_.*", r".*_aes", r"vpaes_.*", r"bsaes_.*",
    r".*ExpandRijndaelKey.*", r"Rijndael.*", r"rijndael.*",
    # SHA / HMAC / PBKDF2
    r"sha1_block.*", r"sha256_block.*", r"sha512_block.*", r"SHA\d*_.*", r"ossl_sha\d*_.*",
    r"HMAC.*", r"ossl_hmac.*", r"hmac_.*", r"PKCS5_PBKDF2_HMAC.*", r"pbkdf2.*", r"kdf_pbkdf2.*",
    r"ossl_pbkdf2.*",
    # EVP cipher / digest / MAC front ends
    r"EVP_(Encrypt|Decrypt|Cipher|CIPHER|Digest|MD|MAC|KDF|PBE|BytesTo).*",
    r"ossl_cipher_.*", r"cipher_hw_.*", r"ossl_prov_cipher.*", r"ossl_digest_.*",
    # GCM / ChaCha20-Poly1305
    r"gcm_.*", r"ghash_.*", r"CRYPTO_gcm128_.*", r"ChaCha20_.*", r"chacha20_.*", r"Poly1305_.*",
    r"poly1305_.*",
    # Oracle: Rijndael-128 in l9 library, ztch* hashing, kgce crypto engine
    r"l9_.*RIJ128.*", r"ztchsh.*", r"kgce_.*",
]
_CRYPTO_RE = re.compile("|".join(f"(?:{p})" for p in _CRYPTO_PATTERNS))


def is_crypto(symbol: str) -> bool:
    """True when ``symbol`` is a cipher, digest, MAC or KDF primitive: the one crypto rule.

    The rule: after :func:`~tdescope.app.hotspots.glossary.base_symbol` strips
    versions, ``@plt`` and clone suffixes (and leading underscores), the name
    fully matches one of the patterns of this module: AES and Rijndael
    (AES-NI and vector-permute assembly, key schedules), SHA/HMAC/PBKDF2,
    OpenSSL's EVP front ends and provider ciphers and digests, GCM/GHASH,
    ChaCha20-Poly1305, and Oracle's crypto layer (``l9_*RIJ128*``,
    ``ztchsh*``, the ``kgce_*`` engine that decrypts TDE blocks).
    Substrings do not count: ``shared_memory_init`` is not SHA. A database's
    own wrapper around the cipher (``sqlcipher_page_cipher``, ``sqlite3Codec``,
    ``kcbz_encdec_tbsblk``) is not crypto either: its self time is page
    bookkeeping, and the primitives it calls are counted where the CPU is.
    A frame perf could not name is shown as its library (``[libcrypto.so.3]``):
    inside a crypto library it counts as crypto.

    Examples
    --------
    >>> is_crypto("aesni_cbc_encrypt"), is_crypto("sha512_block_data_order_avx2")
    (True, True)
    >>> is_crypto("sqlite3VdbeExec")
    False
    """
    if _CRYPTO_LIBRARY_RE.fullmatch(symbol):
        return True  # a frame perf could not name, inside a crypto library: its time is the cipher's
    # Leading underscores mark internal helpers (_aesni_decrypt6), same family.
    return _CRYPTO_RE.fullmatch(base_symbol(symbol).lstrip("_")) is not None


#: An unresolved frame shown as its library (``[libcrypto.so.3]``), when that library is a crypto library.
_CRYPTO_LIBRARY_RE = re.compile(r"\[(?:lib)?(?:crypto|gcrypt|nettle|mbedcrypto|wolfssl)[\w.+-]*\]")
