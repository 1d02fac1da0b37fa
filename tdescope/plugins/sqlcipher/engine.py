"""The SQLCipher engine: the embedded default lab, and any process using the sqlcipher3 wheel."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from tdescope.app.engines.api import ConnectParams, PageDecoder, ProbeRecipe, Read, Register, StackSlot
from tdescope.app.engines.capabilities import Ability

__all__ = ["SqlcipherEngine", "DECRYPT", "ENCRYPT"]


def _page_cipher(mode: int, direction: str) -> ProbeRecipe:
    # sqlcipher_page_cipher(ctx, cipher_ctx, pgno, mode, page_sz, in, out), read by the
    # SysV ABI at the first instruction: rdx, ecx, r8d, r9, and the 7th argument on the
    # stack. The wheel has DWARF too, but reading it means expanding the SQLite
    # amalgamation's one huge compile unit while the target is stopped (~0.6 s here);
    # registers need no symbols at all. Mode 0 decrypts, 1 encrypts.
    return ProbeRecipe(
        key=f"sqlcipher.page_{direction}",
        label=f"Page {direction} (sqlcipher_page_cipher, mode {mode})",
        symbols=("sqlcipher_page_cipher",),
        before=Read(Register("r9")),
        after=Read(StackSlot(8)),
        length=Read(Register("r8")),
        pgno=Read(Register("rdx")),
        condition=(Read(Register("rcx")), mode),
        direction=direction,
    )


DECRYPT = _page_cipher(0, "decrypt")
ENCRYPT = _page_cipher(1, "encrypt")


class SqlcipherEngine:
    """Engine plugin for SQLCipher 4 (the sqlcipher3 wheel)."""

    name = "sqlcipher"
    label = "SQLCipher (embedded lab)"
    abilities = frozenset({Ability.SUMMARIZE_PAGES})

    def connect(self, params: ConnectParams):
        """Start the lab worker (SQLCipher has nothing else to connect to) in ``params.dsn`` or a temp folder."""
        from tdescope.plugins.sqlcipher.lab import LabSession

        return LabSession(params.dsn or None)

    def probe_recipes(self) -> list[ProbeRecipe]:
        """Page decrypt (the default) and page encrypt."""
        return [DECRYPT, ENCRYPT]

    def page_decoder(self) -> PageDecoder:
        """SQLite b-tree pages, SQLCipher's reserve area (IV, HMAC)."""
        from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

        return SqlitePageDecoder()

    @cache
    def glossary(self) -> Mapping[str, str]:
        """SQLite, SQLCipher and OpenSSL functions as they show in profiles."""
        from tdescope.app.hotspots.glossary import load_glossary

        return load_glossary("sqlite", "openssl")
