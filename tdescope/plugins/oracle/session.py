"""A live Oracle session for tdescope: the workload connection and a monitor connection.

Two connections, both opened with the password once at connect time: the
*workload* connection runs the experiments and its server process (SPID) is
the probe target; the *monitor* connection samples V$ views while the workload
connection is busy (a python-oracledb connection runs one call at a time).

Not verified against a live instance (Oracle cannot run where tdescope is
built): every SQL text here follows Oracle's documentation of the views and
packages it names.
"""

from __future__ import annotations

import threading

from tdescope.app.engines.api import Inventory, ProbeRecipe, Workload
from tdescope.app.errors import UserError
from tdescope.plugins.oracle import target as tg
from tdescope.plugins.oracle.inventory import collect_inventory
from tdescope.plugins.oracle.recipes import BLOCK_SIZE_SQL, fit_block_recipe
from tdescope.plugins.oracle.waits import OracleWaitSource

__all__ = ["OracleSession", "Querier"]


class Querier:
    """``query(sql, **binds) -> list of rows`` on one connection, one call at a time."""

    def __init__(self, conn) -> None:
        self.conn = conn
        self._lock = threading.Lock()

    def __call__(self, sql: str, **binds) -> list[tuple]:
        with self._lock:
            cur = self.conn.cursor()
            try:
                cur.execute(sql, binds) if binds else cur.execute(sql)
                return cur.fetchall() if cur.description else []
            finally:
                cur.close()


class OracleSession:
    """:class:`~tdescope.app.engines.api.EngineSession` for Oracle.

    Parameters
    ----------
    work_conn, monitor_conn : oracledb.Connection
    target_sid : int or None
        Probe this session's process instead of the workload connection's.
    allow_background : bool
        Allow a background process (PMON, LGWR...) as the target.
    """

    own_target = False  # Oracle has no lab here: every target is someone's server

    def __init__(self, work_conn, monitor_conn, target_sid: int | None = None,
                 allow_background: bool = False) -> None:
        self.work_conn = work_conn
        self.work = Querier(work_conn)
        self.monitor = Querier(monitor_conn)
        own = self.work(tg.OWN_SPID_SQL)
        if not own or own[0][0] is None:
            raise UserError("Oracle: cannot find this session's server process (V$SESSION/V$PROCESS not readable?)")
        spid, sid, serial, user, program = own[0]
        self.own = tg.OracleSessionRow(int(sid), int(serial), user or "", program or "", "", "USER",
                                       int(str(spid).strip()))
        self.target = self.own
        if target_sid is not None:
            self.choose_session(target_sid, allow_background)
        rows = self.monitor(tg.HOST_SQL)
        self.db_host = str(rows[0][0]) if rows else "?"
        self._block_size: int | None = None  # db_block_size, read when a recipe is first fitted

    # -- target ----------------------------------------------------------------------------
    def sessions(self) -> list[tg.OracleSessionRow]:
        """Every session with a dedicated server process, to pick a target from."""
        return tg.session_rows(self.monitor(tg.SESSIONS_SQL))

    def choose_session(self, sid: int, allow_background: bool = False) -> tg.OracleSessionRow:
        """Make session ``sid`` the probe target (background processes refused unless allowed)."""
        row = next((r for r in self.sessions() if r.sid == int(sid)), None)
        if row is None:
            raise UserError(f"Oracle: no session with SID {sid} and a dedicated server process")
        tg.target_pid(row, allow_background)
        self.target = row
        return row

    def local_check(self) -> tg.LocalCheck:
        """Whether gdb and perf can reach the target from here."""
        return tg.check_local(self.db_host, self.target.spid)

    def server_pid(self) -> int:
        """The target's SPID."""
        return self.target.spid

    def fit_recipe(self, recipe: ProbeRecipe) -> ProbeRecipe:
        """``recipe`` sized for this instance's ``db_block_size`` where it copies a whole block (read once
        from V$PARAMETER; unreadable or not a valid block size, the recipe keeps its 8192)."""
        if self._block_size is None:
            try:
                rows = self.monitor(BLOCK_SIZE_SQL)
                self._block_size = int(rows[0][0]) if rows else 0
            except Exception:  # noqa: BLE001 - a missing grant (ORA-00942) keeps the default
                self._block_size = 0
        try:
            return fit_block_recipe(recipe, self._block_size)
        except ValueError:
            return recipe

    # -- contract ----------------------------------------------------------------------------
    def inventory(self) -> Inventory:
        """Wallet, encrypted tablespaces and columns, version, AES-NI (when the host is this machine)."""
        cpuinfo = None
        if self.local_check().local:
            try:
                with open("/proc/cpuinfo") as fh:
                    cpuinfo = fh.read()
            except OSError:
                cpuinfo = None
        return collect_inventory(lambda sql: self.monitor(sql), cpuinfo)

    def workloads(self) -> list[Workload]:
        """Seeds 000, 003 and 001 on the workload connection."""
        from tdescope.plugins.oracle.workload_columns import column_timing_workload
        from tdescope.plugins.oracle.workload_lobs import lob_workload
        from tdescope.plugins.oracle.workload_tde import tde_compare_workload

        return [tde_compare_workload(self.work_conn), column_timing_workload(self.work_conn),
                lob_workload(self.work_conn)]

    def wait_source(self) -> OracleWaitSource:
        """ASH-like sampling and snapper deltas of the target session, on the monitor connection."""
        return OracleWaitSource(self.monitor, self.target.sid, self.target.spid)

    #: oracledb's codes for a connection that is gone (end-of-file on the channel, not connected, closed).
    LOST_CODES = frozenset({"ORA-03113", "ORA-03114", "ORA-03135", "DPI-1080", "DPI-1010", "DPY-4011", "DPY-1001"})

    def connection_lost(self, exc: BaseException) -> bool:
        """True when ``exc`` says the connection is gone: its error's code (oracledb's ``full_code``).
        Not run here (no Oracle server): the codes are from oracledb's documentation."""
        import oracledb

        err = exc.args[0] if isinstance(exc, oracledb.Error) and exc.args else None  # oracledb's _Error
        return getattr(err, "full_code", None) in self.LOST_CODES

    def close(self) -> None:
        """Close both connections."""
        for q in (self.work, self.monitor):
            try:
                q.conn.close()
            except Exception:  # noqa: BLE001 - already closed or the network is gone
                pass
