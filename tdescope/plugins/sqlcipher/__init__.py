"""SQLCipher engine plugin: the embedded default lab."""

from tdescope.plugins.sqlcipher.engine import SqlcipherEngine

__all__ = ["ENGINE"]

ENGINE = SqlcipherEngine()
