"""What a PostgreSQL server encrypts: cluster-level forks, extensions, pgcrypto columns.

Stock PostgreSQL has no cluster-level encryption. Forks that add it are
recognised by what they leave visible through SQL: Percona's ``pg_tde``
extension, CYBERTEC PostgreSQL TDE's ``data_encryption`` setting. Columns
holding pgcrypto PGP messages are found by sampling ``bytea`` columns and
reading the packet headers (no key needed).
"""

from __future__ import annotations

from collections import Counter

from tdescope.app.engines.api import Inventory
from tdescope.plugins.postgres.pgp import parse_pgp_message

__all__ = ["build_inventory", "EXTENSIONS", "find_pgp_columns"]

EXTENSIONS = ("pgcrypto", "pageinspect", "pg_buffercache", "pg_wait_sampling", "pg_tde")
_SAMPLE_ROWS = 20
_MAX_COLUMNS = 200


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def find_pgp_columns(conn) -> list[tuple[str, str, str, int, str]]:
    """``(table, column, size, rows sampled as PGP, settings seen)`` for bytea columns holding PGP messages."""
    cols = conn.execute(
        "SELECT n.nspname, c.relname, a.attname, pg_size_pretty(pg_total_relation_size(c.oid)) "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE a.atttypid = 'bytea'::regtype AND a.attnum > 0 AND NOT a.attisdropped AND c.relkind IN ('r', 'p') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%%' "
        "ORDER BY 1, 2, a.attnum LIMIT %s", (_MAX_COLUMNS,)
    ).fetchall()
    found = []
    for schema, table, column, size in cols:
        qualified = f"{_quote(schema)}.{_quote(table)}"
        try:
            # the first bytes are enough to read the packet headers; TABLESAMPLE would miss small tables
            rows = conn.execute(
                f"SELECT substring({_quote(column)} from 1 for 64) FROM {qualified} "
                f"WHERE {_quote(column)} IS NOT NULL LIMIT %s", (_SAMPLE_ROWS,)
            ).fetchall()
        except Exception:  # noqa: BLE001 - no privilege on one table must not hide the others
            continue
        seen = Counter()
        for (value,) in rows:
            settings = parse_pgp_message(value)
            if settings is not None:
                seen[settings.describe()] += 1
        if seen:
            found.append((f"{schema}.{table}", column, size, sum(seen.values()), "; ".join(seen)))
    return found


def _setting(conn, name: str) -> str | None:
    row = conn.execute("SELECT setting FROM pg_settings WHERE name = %s", (name,)).fetchone()
    return row[0] if row else None


def build_inventory(conn, target_pid: int, target_label: str) -> Inventory:
    """Rows of (section, name, value) for the Engine panel and ``tdescope doctor``."""
    rows: list[tuple[str, str, str]] = []
    version = conn.execute("SHOW server_version").fetchone()[0]
    rows.append(("Server", "version", version))
    rows.append(("Server", "database", conn.info.dbname))
    rows.append(("Server", "probe target", f"pid {target_pid} ({target_label})"))
    installed = dict(conn.execute("SELECT extname, extversion FROM pg_extension").fetchall())
    available = {r[0] for r in conn.execute(
        "SELECT name FROM pg_available_extensions WHERE name = ANY(%s)", (list(EXTENSIONS),)).fetchall()}
    for ext in EXTENSIONS:
        if ext in installed:
            state = f"installed {installed[ext]}"
        elif ext in available:
            state = "available, not created (CREATE EXTENSION " + ext + ")"
        else:
            state = "not available"
        rows.append(("Extensions", ext, state))
    cluster = []
    if "pg_tde" in installed or _setting(conn, "pg_tde.wal_encrypt") is not None:
        cluster.append("Percona pg_tde (table access method / WAL encryption)")
    data_encryption = _setting(conn, "data_encryption")
    if data_encryption is not None:
        cluster.append(f"CYBERTEC PostgreSQL TDE (data_encryption = {data_encryption})")
    rows.append(("Encryption", "cluster level", "; ".join(cluster) if cluster else
                 "no cluster-level encryption; column encryption via pgcrypto"))
    pgp = find_pgp_columns(conn)
    if not pgp:
        rows.append(("Encryption", "pgcrypto columns", "none found in bytea columns"))
    for table, column, size, n, settings in pgp:
        rows.append(("pgcrypto columns", f"{table}.{column}", f"{settings} ({n} rows sampled; table {size})"))
    return Inventory("postgres", tuple(rows))
