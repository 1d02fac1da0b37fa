"""What an Oracle instance encrypts: wallet, encrypted tablespaces and columns, version, AES-NI.

The SQL (documented dictionary and dynamic views, explicit column lists) is
kept apart from the mapping of its rows to
:class:`~tdescope.app.engines.api.Inventory` rows, so the mapping is tested on
rows shaped exactly like the views' columns without an instance. A view the
user may not read (ORA-00942 without SELECT_CATALOG_ROLE) becomes one row
saying so, never a failure of the whole inventory.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tdescope.app.engines.api import Inventory

__all__ = [
    "INVENTORY_QUERIES",
    "aes_ni_rows",
    "collect_inventory",
    "map_encrypted_columns",
    "map_encrypted_tablespaces",
    "map_instance",
    "map_tablespaces",
    "map_version",
    "map_wallet",
]

Rows = Sequence[Sequence]

WALLET_SQL = "select wrl_type, wrl_parameter, status, wallet_type, con_id from v$encryption_wallet"
ENCRYPTED_TS_SQL = """\
select t.name, e.encryptionalg, e.encryptedts, e.status, e.con_id
  from v$encrypted_tablespaces e
  join v$tablespace t on t.ts# = e.ts# and t.con_id = e.con_id
 order by t.name"""
TABLESPACES_SQL = "select tablespace_name, encrypted from dba_tablespaces order by tablespace_name"
ENCRYPTED_COLUMNS_SQL = """\
select owner, table_name, column_name, encryption_alg, salt, integrity_alg
  from dba_encrypted_columns
 order by owner, table_name, column_name"""
VERSION_SQL = "select banner from v$version"
INSTANCE_SQL = "select instance_name, host_name, version, status from v$instance"


def map_wallet(rows: Rows) -> list[tuple[str, str, str]]:
    """V$ENCRYPTION_WALLET (wrl_type, wrl_parameter, status, wallet_type, con_id) -> rows."""
    out = []
    if not rows:
        return [("Wallet", "status", "no keystore configured (V$ENCRYPTION_WALLET is empty)")]
    for wrl_type, wrl_parameter, status, wallet_type, con_id in rows:
        where = f" (container {con_id})" if con_id not in (None, 0) else ""
        out.append(("Wallet", f"status{where}", str(status or "UNKNOWN")))
        out.append(("Wallet", f"type{where}", f"{wrl_type or '?'} {wallet_type or ''}".strip()))
        if wrl_parameter:
            out.append(("Wallet", f"location{where}", str(wrl_parameter)))
    return out


def map_encrypted_tablespaces(rows: Rows) -> list[tuple[str, str, str]]:
    """V$ENCRYPTED_TABLESPACES join V$TABLESPACE (name, alg, encryptedts, status, con_id) -> rows."""
    out = []
    for name, alg, encrypted, status, _con_id in rows:
        state = "" if (encrypted or "YES") == "YES" else f", encryptedts={encrypted}"
        status_text = f", {status}" if status and status != "NORMAL" else ""
        out.append(("Encrypted tablespaces", str(name), f"{alg or '?'}{state}{status_text}"))
    return out


def map_tablespaces(rows: Rows) -> list[tuple[str, str, str]]:
    """DBA_TABLESPACES (tablespace_name, encrypted) -> a count row and one row per encrypted one."""
    enc = [str(n) for n, flag in rows if str(flag or "").upper() == "YES"]
    out = [("Tablespaces", "encrypted", f"{len(enc)} of {len(rows)}")]
    out += [("Tablespaces", name, "ENCRYPTED=YES") for name in enc]
    return out


def map_encrypted_columns(rows: Rows) -> list[tuple[str, str, str]]:
    """DBA_ENCRYPTED_COLUMNS (owner, table, column, encryption_alg, salt, integrity_alg) -> rows.

    ``integrity_alg`` is ``SHA-1`` by default and ``NOMAC`` when the column was
    declared ``ENCRYPT ... 'NOMAC'`` (no per-value integrity check: seed 003
    measured it 2-3x faster to read with AES).
    """
    out = []
    for owner, table, column, alg, salt, integrity in rows:
        salt_text = "SALT" if str(salt or "").upper() == "YES" else "NO SALT"
        integ = str(integrity or "?")
        out.append(("Encrypted columns", f"{owner}.{table}.{column}", f"{alg}, {salt_text}, {integ}"))
    if not out:
        out.append(("Encrypted columns", "count", "0"))
    return out


def map_version(rows: Rows) -> list[tuple[str, str, str]]:
    """V$VERSION banners -> the first (the database) banner."""
    return [("Instance", "banner", str(rows[0][0]))] if rows else []


def map_instance(rows: Rows) -> list[tuple[str, str, str]]:
    """V$INSTANCE (instance_name, host_name, version, status) -> rows."""
    out = []
    for name, host, version, status in rows[:1]:
        out += [("Instance", "instance", str(name)), ("Instance", "host", str(host)),
                ("Instance", "version", str(version)), ("Instance", "status", str(status))]
    return out


def aes_ni_rows(cpuinfo: str | None) -> list[tuple[str, str, str]]:
    """AES-NI from /proc/cpuinfo text, or why it is unknown (None: the database is remote)."""
    if cpuinfo is None:
        return [("Host", "AES-NI", "unknown (the database host is not this machine)")]
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and ":" in line:
            flags = line.split(":", 1)[1].split()
            return [("Host", "AES-NI", "yes (cpu flag aes)" if "aes" in flags else "no (cpu flag aes absent)")]
    return [("Host", "AES-NI", "unknown (no flags line in /proc/cpuinfo)")]


#: (section, SQL, row mapper) in display order.
INVENTORY_QUERIES: tuple[tuple[str, str, Callable[[Rows], list]], ...] = (
    ("Instance", INSTANCE_SQL, map_instance),
    ("Instance", VERSION_SQL, map_version),
    ("Wallet", WALLET_SQL, map_wallet),
    ("Encrypted tablespaces", ENCRYPTED_TS_SQL, map_encrypted_tablespaces),
    ("Tablespaces", TABLESPACES_SQL, map_tablespaces),
    ("Encrypted columns", ENCRYPTED_COLUMNS_SQL, map_encrypted_columns),
)


def collect_inventory(query: Callable[[str], Rows], cpuinfo: str | None) -> Inventory:
    """Run every inventory query through ``query(sql) -> rows`` and map the results.

    ``query`` raising (no privilege, view absent on this version) turns into a
    row naming the view and the error's first line.
    """
    rows: list[tuple[str, str, str]] = []
    for section, sql, mapper in INVENTORY_QUERIES:
        try:
            result = query(sql)
        except Exception as exc:  # noqa: BLE001 - one unreadable view must not hide the others
            view = sql.split(" from ", 1)[1].split()[0].upper() if " from " in sql else section
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            rows.append((section, view, f"unavailable: {first}"))
            continue
        rows.extend(mapper(result))
    rows.extend(aes_ni_rows(cpuinfo))
    return Inventory("oracle", tuple(rows))
