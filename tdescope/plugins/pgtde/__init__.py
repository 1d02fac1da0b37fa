"""pg-tde engine plugin: PostgreSQL 16.2 with Percona pg_tde (``tde_heap_basic``), its lab and its decrypt."""

from tdescope.plugins.pgtde.engine import PgTdeEngine

__all__ = ["ENGINE"]

ENGINE = PgTdeEngine()
