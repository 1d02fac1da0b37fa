"""Glossaries: loading, lookup rules, and that the names are real."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from tdescope.app.errors import UserError
from tdescope.app.hotspots.glossary import base_symbol, describe, load_glossary

NAMES = ("sqlite", "openssl")


@pytest.mark.parametrize("name", NAMES)
def test_glossary_files_are_one_sentence_each(name):
    text = resources.files("tdescope.resources").joinpath("glossary", f"{name}.json").read_text()
    data = json.loads(text)
    assert len(data) >= 30
    for key, sentence in data.items():
        assert key and " " not in key, key
        assert sentence.endswith("."), key
        assert sentence[0].isupper() or sentence.split()[0].endswith("'s"), key
        assert sentence.count(". ") == 0, key  # one sentence
        assert len(sentence) < 200, key


def test_load_merges_and_rejects_unknown():
    g = load_glossary(*NAMES)
    assert "sqlite3VdbeExec" in g and "aesni_cbc_encrypt" in g
    with pytest.raises(UserError, match="no glossary named 'nope'"):
        load_glossary("nope")


@pytest.mark.parametrize("symbol, base", [
    ("clock_gettime@@GLIBC_2.17", "clock_gettime"),
    ("pthread_mutex_lock@GLIBC_2.2.5", "pthread_mutex_lock"),
    ("memcpy@plt", "memcpy"),
    ("balance_nonroot.isra.0", "balance_nonroot"),
    ("sqlcipher_codec_ctx_integrity_check.constprop.0.isra.0",
     "sqlcipher_codec_ctx_integrity_check"),
    ("sqlcipher_codec_ctx_set_kdf_iter.part.0", "sqlcipher_codec_ctx_set_kdf_iter"),
    ("foo.cold", "foo"),
    ("sqlite3VdbeExec", "sqlite3VdbeExec"),
])
def test_base_symbol(symbol, base):
    assert base_symbol(symbol) == base


def test_describe_order():
    g = {"f": "exact.", "g": "base.", "pre_*": "short prefix.", "pre_long_*": "long prefix."}
    assert describe("f", g) == "exact."
    assert describe("g.isra.0", g) == "base."
    assert describe("g@plt", g) == "base."
    assert describe("pre_long_x", g) == "long prefix."
    assert describe("pre_x.part.1", g) == "short prefix."
    assert describe("other", g) == ""
    real = load_glossary(*NAMES)
    assert "AVX2" in describe("sha512_block_data_order_avx2", real)
    assert describe("sha256_block_data_order_shaext", real).startswith("A CPU-specific variant")
    assert describe("sqlcipher_openssl_get_iv_sz", real)
    assert describe("memcpy@plt", real)


def test_names_exist_in_sqlcipher_wheel():
    """Every non-pattern SQLite/SQLCipher/OpenSSL name is a real symbol of the
    sqlcipher3 wheel's extension (or of glibc), so the glossary speaks of what
    a profile actually shows."""
    sqlcipher3 = pytest.importorskip("sqlcipher3")
    from pathlib import Path

    from elftools.elf.elffile import ELFFile
    from elftools.elf.sections import SymbolTableSection

    so = next(Path(sqlcipher3.__file__).parent.glob("_sqlite3*.so"))
    names = set()
    with open(so, "rb") as f:
        for sec in ELFFile(f).iter_sections():
            if isinstance(sec, SymbolTableSection):
                names.update(base_symbol(s.name) for s in sec.iter_symbols())
    g = load_glossary(*NAMES)
    libc_or_older = {  # glibc functions, older SQLite names, portable-AES and others
        "memcpy", "__memmove_avx_unaligned_erms", "memset", "malloc", "_int_free",
        "__libc_pread", "__libc_pwrite", "fsync", "sqlite3BtreeMovetoUnpacked",
        "sqlite3PagerGet", "sqlite3PcacheFetch", "seekAndRead", "sqlite3BtreeNext",
        "sqlite3VdbeMemRelease", "sqlite3BtreeCommitPhaseOne", "dropCell", "fillInCell",
        "AES_encrypt", "AES_decrypt", "AES_set_encrypt_key", "AES_set_decrypt_key",
        "AES_cbc_encrypt", "ChaCha20_ctr32", "CRYPTO_cbc128_encrypt", "CRYPTO_cbc128_decrypt",
    }
    missing = [k for k in g if not k.endswith("*") and k not in names and k not in libc_or_older]
    assert not missing, missing
