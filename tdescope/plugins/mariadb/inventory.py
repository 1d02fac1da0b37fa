"""What a MariaDB server encrypts, with what, and its key state (keys are never shown).

``information_schema`` and server variables only (:mod:`tdescope.plugins.mariadb.statements`).
"""

from __future__ import annotations

from tdescope.app.engines.api import Inventory
from tdescope.plugins.mariadb import statements as sql
from tdescope.plugins.mariadb.waits import waits_unavailable

__all__ = ["build_inventory"]

def _rows(conn, sql: str, args=None) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, args)
    return list(cur.fetchall())


def build_inventory(conn, pid: int, lab: bool = False) -> Inventory:
    """Server, key management, InnoDB encryption settings and per-tablespace encryption state."""
    version = _rows(conn, sql.VERSION)[0][0]
    variables = dict(_rows(conn, sql.VARIABLES))
    plugins = _rows(conn, sql.PLUGINS)
    rows: list[tuple[str, str, str]] = [
        ("Server", "version", version),
        ("Server", "probe target", f"pid {pid}: mariadbd, the whole server (one process serves every connection; "
                                   "a gdb stop halts every thread)" + (" — the lab's private server" if lab else "")),
        ("Key management", "plugin", ", ".join(f"{n} ({s})" for n, s in plugins) or "none: nothing can be encrypted"),
        ("Key management", "algorithm", variables.get("file_key_management_encryption_algorithm", "n/a")),
        ("Key management", "keys", "never shown"),
    ]
    rows += [("InnoDB", name, variables[name]) for name in sql.SETTINGS[:7] if name in variables]
    rows.append(("Waits", "performance_schema", variables.get("performance_schema", "OFF")))
    try:
        why_not = waits_unavailable(conn)
    except Exception as exc:  # noqa: BLE001 - a user without SELECT on performance_schema: say so, go on
        why_not = f"performance_schema not readable: {(str(exc).splitlines() or [''])[0]}"
    rows.append(("Waits", "engine waits", why_not or "performance_schema.events_waits_current (every thread)"))
    spaces = _rows(conn, sql.TABLESPACES)
    encrypted = [s for s in spaces if s[1]]
    rows.append(("Tablespaces", "encrypted", f"{len(encrypted)} of {len(spaces)}" if spaces else
                 "no encrypted tablespaces"))
    for name, scheme, _req, min_v, cur_v, key_id, rotating in spaces[:40]:
        state = (f"scheme {scheme}, key id {key_id}, key version {min_v}..{cur_v}"
                 + (", rotating" if rotating else "")) if scheme else "not encrypted"
        rows.append(("Tablespaces", name, state))
    return Inventory("mariadb", tuple(rows))
