"""PostgreSQL engine plugin: pgcrypto decryption and page reads inside a live backend."""

from tdescope.plugins.postgres.engine import PostgresEngine

__all__ = ["ENGINE"]

ENGINE = PostgresEngine()
