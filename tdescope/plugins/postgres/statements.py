"""Every statement tdescope runs on a PostgreSQL server it did not start, in one place.

On a customer's server (``--dsn`` without ``--sql``/``--workload``, the window's
Watch) tdescope reads catalogs and statistics views only: the statements of
:data:`WATCH_STATEMENTS`, each named where it runs. The README lists the same
set, and ``tests/test_watch_sql.py`` fails on any other statement in a
``log_statement=all`` server log. Reading user tables (:func:`sample_column`,
the pgcrypto column finder) is an explicit action: ``--sample-columns`` or the
Engine dock's **Sample columns…**, which says what it will read first.

Placeholders are psycopg's ``%s`` (the server log shows ``$1``, ``$2``...).
The backend's pid and the server's version come from libpq
(``conn.info.backend_pid``, the ``server_version`` parameter status): no statement.
"""

from __future__ import annotations

__all__ = [
    "BACKEND", "BACKENDS", "BYTEA_COLUMNS", "COLUMNS", "EXTENSIONS_AVAILABLE", "EXTENSIONS_INSTALLED",
    "BLOCK_SIZE", "EXTENSION_SCHEMA", "SAMPLE_BYTES", "SAMPLE_ROWS", "SETTINGS", "TDE_CALLABLE", "TDE_KEY_PROVIDERS",
    "RELATIONS", "RELATION_COLUMNS", "TDE_TABLES", "WAIT_HISTORY", "WAIT_POLL", "WATCH_STATEMENTS", "sample_column",
]

_ACTIVITY_COLUMNS = ("SELECT pid, coalesce(backend_type, ''), coalesce(usename, ''), coalesce(application_name, ''), "
                     "coalesce(state, ''), coalesce(query, '') FROM pg_stat_activity")

#: The target backend's row (checked once when the session opens or the target changes).
BACKEND = _ACTIVITY_COLUMNS + " WHERE pid = %s"
#: Every backend, to pick a target from (the window's Change target…).
BACKENDS = _ACTIVITY_COLUMNS + " ORDER BY backend_type <> 'client backend', pid"
#: Installed extensions and their versions (inventory; the wait source's choice of pg_wait_sampling).
EXTENSIONS_INSTALLED = "SELECT extname, extversion FROM pg_extension"
#: Which of the extensions the inventory names could be created.
EXTENSIONS_AVAILABLE = "SELECT name FROM pg_available_extensions WHERE name = ANY(%s)"
#: Settings that reveal a cluster-level encryption fork.
SETTINGS = "SELECT name, setting FROM pg_settings WHERE name = ANY(%s)"
#: ``bytea`` columns of user tables (names and sizes only: no row is read).
BYTEA_COLUMNS = (
    "SELECT n.nspname, c.relname, a.attname, pg_size_pretty(pg_total_relation_size(c.oid)) "
    "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "WHERE a.atttypid = 'bytea'::regtype AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p') "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%' "
    "ORDER BY 1, 2, a.attnum LIMIT %s"
)
#: The schema an extension lives in (``capture``'s check that pgcrypto exists before arming).
EXTENSION_SCHEMA = "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = %s"
#: A relation's attributes, to decode its heap pages (the window's page view).
COLUMNS = (
    "SELECT CASE WHEN a.attisdropped THEN '(dropped)' ELSE a.attname END, "
    "coalesce(t.typname, 'dropped'), a.attlen, a.attalign::text FROM pg_attribute a "
    "LEFT JOIN pg_type t ON t.oid = a.atttypid WHERE a.attrelid = %s::regclass AND a.attnum > 0 "
    "ORDER BY a.attnum"
)
#: The relations a capture can name (its table OID or relfilenode): names from pg_class only, no row read.
#: (``pg_relation_filenode``, not ``relfilenode``: the mapped catalogs, pg_class itself among them, have 0 there.)
RELATIONS = ("SELECT c.oid, pg_relation_filenode(c.oid), c.oid::regclass::text FROM pg_class c "
             "WHERE c.relkind IN ('r', 'm', 't', 'i') AND pg_relation_filenode(c.oid) IS NOT NULL "
             "ORDER BY c.oid LIMIT %s")
#: The attributes of the user tables among them, to decode their tuples by the capture's relation.
RELATION_COLUMNS = (
    "SELECT a.attrelid, CASE WHEN a.attisdropped THEN '(dropped)' ELSE a.attname END, "
    "coalesce(t.typname, 'dropped'), a.attlen, a.attalign::text FROM pg_attribute a "
    "JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
    "LEFT JOIN pg_type t ON t.oid = a.atttypid WHERE a.attnum > 0 AND c.relkind IN ('r', 'm') "
    "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%' "
    "ORDER BY a.attrelid, a.attnum LIMIT %s"
)
#: One engine-wait poll without pg_wait_sampling: the one backend's row, at the stated rate.
WAIT_POLL = "SELECT wait_event_type, wait_event, state FROM pg_stat_activity WHERE pid = %s"
#: One engine-wait poll with pg_wait_sampling: the server's own samples of the backend since the last
#: read, read once a second.
WAIT_HISTORY = ("SELECT ts, event_type, event FROM pg_wait_sampling_history WHERE pid = %s AND ts > %s "
                "ORDER BY ts")
#: With pg_tde: tables of its access methods (``tde_heap_basic``: pg_tde 1.0 tuple-level;
#: ``tde_heap``: pg_tde 2.x / open_pg_tde page-level), from pg_class (no row of them is read).
TDE_TABLES = ("SELECT c.oid::regclass::text, a.amname FROM pg_class c JOIN pg_am a ON a.oid = c.relam "
              "WHERE a.amname IN ('tde_heap_basic', 'tde_heap') ORDER BY 1 LIMIT %s")
#: Whether a pg_tde function exists and the role may call it (no ERROR in the server's log when not).
TDE_CALLABLE = "SELECT p IS NOT NULL AND has_function_privilege(p, 'EXECUTE') FROM to_regprocedure(%s) p"
#: pg_tde's key providers: names and types only (their options hold paths and tokens).
TDE_KEY_PROVIDERS = "SELECT provider_name, provider_type FROM pg_tde_list_all_key_providers()"

#: The server build's page size (BLCKSZ), read once at connect: what a ``mdread`` capture copies.
BLOCK_SIZE = "SHOW block_size"

#: What watch mode may run on a server tdescope did not start, as psycopg sends them.
WATCH_STATEMENTS = (BACKEND, BACKENDS, EXTENSIONS_INSTALLED, EXTENSIONS_AVAILABLE, SETTINGS, BYTEA_COLUMNS,
                    EXTENSION_SCHEMA, COLUMNS, WAIT_POLL, WAIT_HISTORY, BLOCK_SIZE, TDE_TABLES, TDE_CALLABLE,
                    TDE_KEY_PROVIDERS, RELATIONS, RELATION_COLUMNS)

#: Rows of each bytea column read by the explicit sampling, and how much of each value.
SAMPLE_ROWS = 20
SAMPLE_BYTES = 64


def sample_column(schema_table: str, column: str) -> str:
    """The sampling statement for one (already quoted) table and column: its first bytes, a few rows."""
    return (f"SELECT substring({column} from 1 for {SAMPLE_BYTES}) FROM {schema_table} "
            f"WHERE {column} IS NOT NULL LIMIT %s")

