"""What a PostgreSQL server encrypts: cluster-level forks, extensions, pgcrypto columns.

Stock PostgreSQL has no cluster-level encryption. Forks that add it are
recognised by what they leave visible through SQL: Percona's ``pg_tde``
extension, CYBERTEC PostgreSQL TDE's ``data_encryption`` setting. Columns
holding pgcrypto PGP messages are found by sampling ``bytea`` columns and
reading the packet headers (no key needed): that reads user tables, so it
happens only when asked (``sample_columns=True``); otherwise the inventory
reads catalogs and statistics views only and lists the ``bytea`` columns it
could sample (:mod:`tdescope.plugins.postgres.statements`).
"""

from __future__ import annotations

from collections import Counter

from tdescope.app.engines.api import Inventory
from tdescope.plugins.postgres import statements as sql
from tdescope.plugins.postgres.pgp import parse_pgp_message

__all__ = ["build_inventory", "EXTENSIONS", "find_pgp_columns", "sampling_reads"]

EXTENSIONS = ("pgcrypto", "pageinspect", "pg_buffercache", "pg_wait_sampling", "pg_tde")
_MAX_COLUMNS = 200
_SETTINGS = ("pg_tde.wal_encrypt", "data_encryption")
_MAX_TDE_TABLES = 200
#: pg_tde's access methods: which pg_tde, which encryption model.
TDE_ACCESS_METHODS = {"tde_heap_basic": "pg_tde 1.0 tuple-level (every tuple fetch decrypts)",
                      "tde_heap": "pg_tde 2.x / open_pg_tde page-level (a block decrypts on its read)"}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _bytea_columns(conn) -> list[tuple[str, str, str, str]]:
    return conn.execute(sql.BYTEA_COLUMNS, (_MAX_COLUMNS,)).fetchall()


def sampling_reads(conn) -> str:
    """What :func:`find_pgp_columns` will read, said before it reads it (one sentence)."""
    cols = _bytea_columns(conn)
    if not cols:
        return "There is no bytea column in a user table: sampling reads nothing."
    names = ", ".join(f"{s}.{t}.{c}" for s, t, c, _ in cols[:12]) + (", …" if len(cols) > 12 else "")
    return (f"Sampling reads the first {sql.SAMPLE_BYTES} bytes of up to {sql.SAMPLE_ROWS} rows of each of "
            f"{len(cols)} bytea column(s) of user tables ({names}) with SELECT, to find pgcrypto messages; "
            "tables the role may not read are skipped (the server logs a permission error for each).")


def find_pgp_columns(conn) -> list[tuple[str, str, str, int, str]]:
    """``(table, column, size, rows sampled as PGP, settings seen)`` for bytea columns holding PGP messages.

    Reads user tables (:func:`~tdescope.plugins.postgres.statements.sample_column`): only on request.
    """
    found = []
    for schema, table, column, size in _bytea_columns(conn):
        try:
            # the first bytes are enough to read the packet headers; TABLESAMPLE would miss small tables
            rows = conn.execute(sql.sample_column(f"{_quote(schema)}.{_quote(table)}", _quote(column)),
                                (sql.SAMPLE_ROWS,)).fetchall()
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


def _pg_tde_rows(conn, settings: dict) -> list[tuple[str, str, str]]:
    """pg_tde: its encrypted tables and their access method, its key providers (names, types), WAL encryption."""
    rows = []
    tables = conn.execute(sql.TDE_TABLES, (_MAX_TDE_TABLES,)).fetchall()
    for name, am in tables:
        rows.append(("pg_tde tables", name, f"{am}: {TDE_ACCESS_METHODS.get(am, am)}"))
    if not tables:
        rows.append(("pg_tde", "encrypted tables", "none (no table USING tde_heap_basic or tde_heap)"))
    if conn.execute(sql.TDE_CALLABLE, ("pg_tde_list_all_key_providers()",)).fetchone()[0]:
        providers = conn.execute(sql.TDE_KEY_PROVIDERS).fetchall()
        rows.append(("pg_tde", "key providers", ", ".join(f"{n} ({t})" for n, t in providers) or "none"))
    else:
        rows.append(("pg_tde", "key providers", "not listed: this role may not call pg_tde_list_all_key_providers() "
                     "(pg_tde_grant_key_viewer_to_role), or this pg_tde has no such function"))
    wal = settings.get("pg_tde.wal_encrypt")
    rows.append(("pg_tde", "WAL encryption", {"on": "on", "off": "off: rows are readable in pg_wal"}.get(
        wal, "not a setting of this pg_tde" if wal is None else wal)))
    return rows


def build_inventory(conn, target_pid: int, target_label: str, sample_columns: bool = False) -> Inventory:
    """Rows of (section, name, value) for the Engine panel and ``tdescope doctor``.

    Catalogs and statistics views only, unless ``sample_columns``: then the
    ``bytea`` columns of user tables are sampled for pgcrypto messages too.
    """
    rows: list[tuple[str, str, str]] = []
    rows.append(("Server", "version", conn.info.parameter_status("server_version") or "unknown"))
    rows.append(("Server", "database", conn.info.dbname))
    rows.append(("Server", "probe target", f"pid {target_pid} ({target_label})"))
    installed = dict(conn.execute(sql.EXTENSIONS_INSTALLED).fetchall())
    available = {r[0] for r in conn.execute(sql.EXTENSIONS_AVAILABLE, (list(EXTENSIONS),)).fetchall()}
    settings = dict(conn.execute(sql.SETTINGS, (list(_SETTINGS),)).fetchall())
    for ext in EXTENSIONS:
        if ext in installed:
            state = f"installed {installed[ext]}"
        elif ext in available:
            state = "available, not created (CREATE EXTENSION " + ext + ")"
        else:
            state = "not available"
        rows.append(("Extensions", ext, state))
    cluster = []
    if "pg_tde" in installed or settings.get("pg_tde.wal_encrypt") is not None:
        cluster.append("Percona pg_tde (table access method / WAL encryption)")
    data_encryption = settings.get("data_encryption")
    if data_encryption is not None:
        cluster.append(f"CYBERTEC PostgreSQL TDE (data_encryption = {data_encryption})")
    rows.append(("Encryption", "cluster level", "; ".join(cluster) if cluster else
                 "no cluster-level encryption; column encryption via pgcrypto"))
    if "pg_tde" in installed:
        rows.extend(_pg_tde_rows(conn, settings))
    if not sample_columns:
        n = len(_bytea_columns(conn))
        rows.append(("Encryption", "pgcrypto columns",
                     f"not sampled ({n} bytea column(s) in user tables; sampling reads them: --sample-columns, "
                     "or Sample columns… in the Engine dock)" if n else "no bytea column in user tables"))
        return Inventory("postgres", tuple(rows))
    pgp = find_pgp_columns(conn)
    if not pgp:
        rows.append(("Encryption", "pgcrypto columns", "none found in bytea columns"))
    for table, column, size, n, settings in pgp:
        rows.append(("pgcrypto columns", f"{table}.{column}", f"{settings} ({n} rows sampled; table {size})"))
    return Inventory("postgres", tuple(rows))
