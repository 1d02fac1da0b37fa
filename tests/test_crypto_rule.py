"""The one crypto rule, as a table, and its use by the report's hotspot bars."""

from __future__ import annotations

import re

import pytest

from tdescope.app.events import HotspotWindow
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.report.model import build_report
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta

RULE = [
    # (symbol, crypto?, why)
    ("shared_memory_init", False, "Oracle SGA setup: 'sha' as a substring is not SHA"),
    ("kgce_dec", True, "Oracle's crypto engine decrypting a TDE block"),
    ("kgce_set_key", True, "Oracle kgce family"),
    ("l9_aesRIJ128Decrypt", True, "Oracle Rijndael-128"),
    ("ztchsh1n", True, "Oracle hashing"),
    ("kcbz_encdec_tbsblk", False, "Oracle's wrapper in the I/O path, not the primitive"),
    ("aesni_cbc_encrypt", True, "AES-NI assembly"),
    ("_aesni_decrypt6", True, "internal AES-NI helper"),
    ("aesni_cbc_encrypt@plt", True, "PLT stub of the primitive"),
    ("AES_set_decrypt_key", True, "AES key schedule"),
    ("vpaes_encrypt", True, "vector-permute AES"),
    ("EVP_DecryptUpdate", True, "OpenSSL EVP front end"),
    ("EVP_CipherUpdate", True, "OpenSSL EVP front end"),
    ("EVP_DigestUpdate", True, "OpenSSL EVP digest"),
    ("ossl_cipher_generic_block_update", True, "OpenSSL 3 provider cipher"),
    ("HMAC_Update.part.0", True, "HMAC, compiler clone"),
    ("sha512_block_data_order_avx2", True, "SHA-512 assembly"),
    ("PKCS5_PBKDF2_HMAC", True, "key derivation"),
    ("gcm_ghash_avx", True, "GCM"),
    ("sqlcipher_page_cipher", False, "SQLCipher's page wrapper around the provider"),
    ("sqlite3Codec", False, "SQLCipher's pager hook"),
    ("sqlcipher_openssl_cipher", False, "SQLCipher's provider glue"),
    ("sqlite3VdbeExec", False, "the SQL engine"),
    ("encryption_scheme_decrypt", False, "MariaDB's wrapper"),
    ("OPENSSL_cleanse", False, "zeroing memory"),
    ("shadow_lookup", False, "'sha' prefix of another word"),
    ("memcpy", False, ""),
    ("[unknown]", False, ""),
    ("[libcrypto.so.3]", True, "unresolved code in OpenSSL's crypto library (21-38 % self on pgcrypto runs)"),
    ("[libgcrypt.so.20]", True, "unresolved code in libgcrypt"),
    ("[libc.so.6]", False, "unresolved libc is not crypto"),
    ("[libssl.so.3]", False, "TLS record layer: the ciphers it calls are in libcrypto"),
]


@pytest.mark.parametrize("symbol, expected, why", RULE)
def test_the_crypto_rule(symbol, expected, why):
    assert is_crypto(symbol) is expected, why


def test_the_report_marks_crypto_by_the_same_rule(tmp_path):
    path = tmp_path / "s.tds"
    stacks = {"main;kcbz_encdec_tbsblk;kgce_dec": 6, "main;shared_memory_init": 5, "main;sqlcipher_page_cipher": 4}
    with SessionRecorder(path, SessionMeta()) as rec:
        rec.record(HotspotWindow(ts=11.0, start=10.0, pid=1, stacks=stacks, dsos={}))
    with SessionReader(path) as reader:
        report = build_report(reader)
    svg = next(p.svg for p in report.plots if p.name == "hotspots")
    bars = dict(re.findall(r">([\w\[\]]+)</text><rect [^>]*fill=\"(#[0-9a-f]+)\"", svg))
    crypto = {sym for sym, colour in bars.items() if colour == "#d62728"}
    assert set(bars) == {"kgce_dec", "shared_memory_init", "sqlcipher_page_cipher"}
    assert crypto == {s for s in bars if is_crypto(s)} == {"kgce_dec"}
