"""Getting text out of a session's trace file: 10046 SQL traces and block dumps.

Where the trace file is: V$DIAG_INFO 'Default Trace File' for tdescope's own
session (V$PROCESS.TRACEFILE for another one). How to read it: over SQL from
V$DIAG_TRACE_FILE_CONTENTS (12.2+, one row per line, ordered by LINE_NUMBER),
so no shell access to the database host is needed; else from the file itself
when the database runs on this machine. Reads are incremental: a
:class:`TraceCursor` remembers how far it read, so a block dump or a traced
workload yields only the lines it added.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tdescope.app.errors import UserError

__all__ = [
    "CONTENTS_SQL",
    "OWN_TRACE_FILE_SQL",
    "SESSION_TRACE_FILE_SQL",
    "TraceCursor",
    "TraceLocation",
    "block_dump_statements",
    "trace_disable_sql",
    "trace_enable_sql",
    "SGA_CLEAR_DUMP_WARNING",
]

OWN_TRACE_FILE_SQL = "select value from v$diag_info where name = 'Default Trace File'"
SESSION_TRACE_FILE_SQL = """\
select p.tracefile from v$session s join v$process p on p.addr = s.paddr where s.sid = :sid"""
CONTENTS_SQL = """\
select line_number, payload from v$diag_trace_file_contents
 where trace_filename = :name and line_number > :after
 order by line_number"""

SGA_CLEAR_DUMP_WARNING = (
    '"_sga_clear_dump"=true makes Oracle write the DECRYPTED contents of encrypted blocks into a trace '
    "file on the database server, readable by anyone who can read trace files. Use it only on test data."
)


def trace_enable_sql(sid: int | None = None, serial: int | None = None, level: int = 8) -> tuple[str, dict]:
    """10046 at ``level`` (8 = waits, 12 = waits and binds) for one session or our own.

    DBMS_MONITOR is the documented way; ``alter session set events`` only
    reaches the session that runs it.
    """
    if level not in (1, 4, 8, 12):
        raise UserError(f"10046 level must be 1, 4, 8 or 12, not {level}")
    waits, binds = level in (8, 12), level in (4, 12)
    flags = f"waits => {'true' if waits else 'false'}, binds => {'true' if binds else 'false'}"
    if sid is None:
        return f"begin dbms_monitor.session_trace_enable({flags}); end;", {}
    return (f"begin dbms_monitor.session_trace_enable(session_id => :sid, serial_num => :serial, {flags}); end;",
            {"sid": int(sid), "serial": int(serial or 0)})


def trace_disable_sql(sid: int | None = None, serial: int | None = None) -> tuple[str, dict]:
    """The matching disable."""
    if sid is None:
        return "begin dbms_monitor.session_trace_disable; end;", {}
    return ("begin dbms_monitor.session_trace_disable(session_id => :sid, serial_num => :serial); end;",
            {"sid": int(sid), "serial": int(serial or 0)})


def block_dump_statements(file_no: int, block_no: int, clear_dump: bool = False) -> list[str]:
    """``alter system dump datafile F block B``, after ``_sga_clear_dump`` only when asked.

    Oracle writes a header-only dump for an encrypted block (``Encrypted block
    <5, 907> content will not be dumped``) unless the hidden parameter is set;
    see :data:`SGA_CLEAR_DUMP_WARNING`.
    """
    if not (1 <= int(file_no) <= 65533):
        raise UserError(f"datafile number must be between 1 and 65533, not {file_no}")
    if not (0 <= int(block_no) < 2**32):
        raise UserError(f"block number must be between 0 and 4294967295, not {block_no}")
    stmts = ['alter session set "_sga_clear_dump"=true'] if clear_dump else []
    stmts.append(f"alter system dump datafile {int(file_no)} block {int(block_no)}")
    return stmts


@dataclass(frozen=True, slots=True)
class TraceLocation:
    """A trace file: its full path on the database host and its file name."""

    path: str

    @property
    def name(self) -> str:
        return re.split(r"[/\\]", self.path)[-1]


class TraceCursor:
    """Reads the lines a trace file gained since the last read.

    Parameters
    ----------
    query : callable
        ``query(sql, **binds) -> rows``.
    location : TraceLocation
    local : bool
        The database host is this machine, so the file can be read directly
        when the view is absent (Oracle < 12.2) or not granted.
    """

    def __init__(self, query: Callable[..., Sequence], location: TraceLocation, local: bool) -> None:
        self._query = query
        self.location = location
        self.local = local
        self._line = 0  # last LINE_NUMBER read through the view
        self._offset = 0  # bytes read from the local file
        self.via: str | None = None

    def mark(self) -> None:
        """Skip what is in the file now: later reads return only newer lines."""
        self.read()

    def read(self) -> list[str]:
        """New lines, without line ends. Raises UserError when neither way works."""
        view_error = None
        if self.via in (None, "view"):
            try:
                rows = self._query(CONTENTS_SQL, name=self.location.name, after=self._line)
                self.via = "view"
                return self._from_rows(rows)
            except Exception as exc:  # noqa: BLE001 - fall back to the file
                view_error = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if self.local and os.path.exists(self.location.path):
            self.via = "file"
            with open(self.location.path, "rb") as fh:
                fh.seek(self._offset)
                data = fh.read()
            # keep a partial last line for the next read
            cut = data.rfind(b"\n") + 1
            self._offset += cut
            return data[:cut].decode("utf-8", errors="replace").splitlines()
        raise UserError(
            f"cannot read trace file {self.location.name}: V$DIAG_TRACE_FILE_CONTENTS "
            f"{'failed: ' + view_error if view_error else 'unavailable'}"
            + ("" if self.local else ", and the database host is not this machine")
        )

    def _from_rows(self, rows) -> list[str]:
        out: list[str] = []
        for line_number, payload in rows:
            if hasattr(payload, "read"):  # a CLOB on some versions
                payload = payload.read()
            self._line = max(self._line, int(line_number))
            # A payload is one line with its newline; a long record may carry several.
            out.extend((payload or "").rstrip("\n").split("\n"))
        return out
