"""Where a MariaDB server decrypts and encrypts InnoDB pages, as probe recipes.

``encryption_scheme_decrypt(src, slen, dst, dlen, scheme, key_version, space, page, lsn)``
and its ``_encrypt`` twin are exported by ``mariadbd`` (its only symbols are in
``.dynsym``: the build is stripped). At the first instruction: rdi = src, esi =
slen, rdx = dst, [rsp+8] = space id, [rsp+16] = page number. For a page, src and
dst point 26 bytes into it (the FIL header's first 26 bytes stay clear), so the
whole page starts at src - 26 / dst - 26 and is ``page_size`` long.
``EVP_CipherUpdate`` in libcrypto is the fallback for builds without the scheme
functions: one call per page with the encrypted range only, no page number.
Facts: ``../shared/research/mariadb-tde.md``.
"""

from __future__ import annotations

from tdescope.app.engines.api import ArgRef, ProbeRecipe

__all__ = ["ENCRYPTED_TABLESPACES", "PAGE_HEADER_CLEAR", "recipes"]

#: What the page recipes require of the server (``MariaDbSession.require_extension``).
ENCRYPTED_TABLESPACES = "encrypted tablespaces"
#: Bytes at the start of a page that encryption leaves clear (full_crc32 and the old format alike).
PAGE_HEADER_CLEAR = 26
_PAGE = ArgRef(stack=16)  # [rsp+8] holds the space id; the decrypted page says it too (FIL header)


def recipes(page_size: int = 16384) -> list[ProbeRecipe]:
    """Decrypt (the default), encrypt, and the libcrypto-level fallback, for ``page_size`` pages."""
    whole = ArgRef(constant=page_size)
    src, dst = ArgRef(register="rdi", offset=-PAGE_HEADER_CLEAR), ArgRef(register="rdx", offset=-PAGE_HEADER_CLEAR)
    return [
        ProbeRecipe(key="mariadb.page_decrypt", label="InnoDB page decrypted on read (encryption_scheme_decrypt)",
                    symbols=("encryption_scheme_decrypt",), before=src, after=dst, length=whole, pgno=_PAGE,
                    direction="decrypt", max_length=page_size, requires=ENCRYPTED_TABLESPACES),
        ProbeRecipe(key="mariadb.page_encrypt", label="InnoDB page encrypted on write (encryption_scheme_encrypt)",
                    symbols=("encryption_scheme_encrypt",), before=src, after=dst, length=whole, pgno=_PAGE,
                    direction="encrypt", max_length=page_size, requires=ENCRYPTED_TABLESPACES),
        ProbeRecipe(key="mariadb.evp_cipher", label="Cipher call in libcrypto (EVP_CipherUpdate: encrypted range only)",
                    symbols=("EVP_CipherUpdate",), before=ArgRef(register="rcx"), after=ArgRef(register="rsi"),
                    length=ArgRef(register="r8"), direction="decrypt", library="libcrypto", max_length=page_size,
                    plaintext_side="both"),  # the same call encrypts on writes
    ]
