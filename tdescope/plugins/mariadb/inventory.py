"""What a MariaDB server encrypts, with what, and its key state (keys are never shown)."""

from __future__ import annotations

from tdescope.app.engines.api import Inventory

__all__ = ["build_inventory"]

_SETTINGS = ("innodb_encrypt_tables", "innodb_encrypt_log", "innodb_encrypt_temporary_tables",
             "innodb_encryption_threads", "innodb_encryption_rotate_key_age", "innodb_page_size",
             "innodb_buffer_pool_size", "file_key_management_encryption_algorithm", "performance_schema")


def _rows(conn, sql: str, args=None) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, args)
    return list(cur.fetchall())


def build_inventory(conn, pid: int, lab: bool = False) -> Inventory:
    """Server, key management, InnoDB encryption settings and per-tablespace encryption state."""
    version = _rows(conn, "SELECT VERSION()")[0][0]
    variables = dict(_rows(conn, "SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s)" %
                           ", ".join(["%s"] * len(_SETTINGS)), _SETTINGS))
    plugins = _rows(conn, "SELECT PLUGIN_NAME, PLUGIN_STATUS FROM information_schema.PLUGINS "
                          "WHERE PLUGIN_TYPE = 'ENCRYPTION'")
    rows: list[tuple[str, str, str]] = [
        ("Server", "version", version),
        ("Server", "probe target", f"pid {pid}: mariadbd, the whole server (one process serves every connection; "
                                   "a gdb stop halts every thread)" + (" — the lab's private server" if lab else "")),
        ("Key management", "plugin", ", ".join(f"{n} ({s})" for n, s in plugins) or "none: nothing can be encrypted"),
        ("Key management", "algorithm", variables.get("file_key_management_encryption_algorithm", "n/a")),
        ("Key management", "keys", "never shown"),
    ]
    rows += [("InnoDB", name, variables[name]) for name in _SETTINGS[:7] if name in variables]
    rows.append(("Waits", "performance_schema", variables.get("performance_schema", "OFF")))
    spaces = _rows(conn, "SELECT NAME, ENCRYPTION_SCHEME, KEYSERVER_REQUESTS, MIN_KEY_VERSION, CURRENT_KEY_VERSION, "
                         "CURRENT_KEY_ID, ROTATING_OR_FLUSHING FROM information_schema.INNODB_TABLESPACES_ENCRYPTION "
                         "ORDER BY NAME")
    encrypted = [s for s in spaces if s[1]]
    rows.append(("Tablespaces", "encrypted", f"{len(encrypted)} of {len(spaces)}" if spaces else
                 "no encrypted tablespaces"))
    for name, scheme, _req, min_v, cur_v, key_id, rotating in spaces[:40]:
        state = (f"scheme {scheme}, key id {key_id}, key version {min_v}..{cur_v}"
                 + (", rotating" if rotating else "")) if scheme else "not encrypted"
        rows.append(("Tablespaces", name, state))
    return Inventory("mariadb", tuple(rows))
