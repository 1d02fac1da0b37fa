"""Which Oracle server process to probe: the SPID of a session, and whether gdb can reach it.

A dedicated-server session is served by one OS process, whose pid Oracle calls
SPID (V$PROCESS.SPID, joined from V$SESSION.PADDR). tdescope probes its own
session's process by default, or one picked from a list. Background processes
hold latches every session needs (a stopped LGWR stalls every commit), so they
are refused unless the user overrides. gdb and perf see only processes on this
machine, which is checked, not assumed.
"""

from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass

from tdescope.app.system.critical import CriticalProcess
from tdescope.app.errors import UserError

__all__ = [
    "CRITICAL_PROCESSES",
    "OWN_SPID_SQL",
    "SESSIONS_SQL",
    "HOST_SQL",
    "OracleSessionRow",
    "LocalCheck",
    "background_name",
    "check_local",
    "session_rows",
    "target_pid",
]

#: The server process of the session running this query (dedicated server).
OWN_SPID_SQL = """\
select p.spid, s.sid, s.serial#, s.username, s.program
  from v$session s join v$process p on p.addr = s.paddr
 where s.sid = to_number(sys_context('USERENV', 'SID'))"""

#: Sessions to pick from: V$SESSION joined to V$PROCESS.
SESSIONS_SQL = """\
select s.sid, s.serial#, s.username, s.program, s.event, s.type, p.spid, p.pname
  from v$session s join v$process p on p.addr = s.paddr
 order by s.type desc, s.sid"""

#: Where the instance runs.
HOST_SQL = "select host_name, instance_name from v$instance"

# Oracle background process names (V$PROCESS.PNAME, the "ora_xxxx_SID" of ps).
# Stopping any of them in a debugger stalls or kills the instance.
_BACKGROUND = re.compile(
    r"^(PMON|SMON|LGWR|LG\d\d|DBW[0-9a-z]|BW\d\d|CKPT|LMS\d*|LMD\d*|LMON|LCK\d*|LMHB|DIAG|DIA\d|"
    r"GEN\d|MMAN|MMON|MMNL|RECO|ARC\d+|ARCH|PSP\d|VKTM|DBRM|CJQ\d|J\d{3}|Q\d{3}|QMNC|SMCO|W\d{3}|"
    r"PXMN|RVWR|CTWR|LREG|TMON|TT\d\d|AQPC|SCM\d|OFSD|CL\d\d|FENC|LMFC|PMAN|CLMN|BG\d\d\d|SP\d\d\d|"
    r"MARK|RSMN|ACMS|DMON|NSS\d|NSA\d|MRP\d|PR\d\d|VKRM|SVCB|ASMB|RBAL|GMON|ONNN|SCMN)$",
    re.IGNORECASE,
)
_PROGRAM = re.compile(r"\((\w+)\)\s*$")  # "oracle@db1 (LGWR)"

#: The deny-list as the kernel sees it (app/system/critical.py): a background process is
#: "ora_pmon_ORCL" in ps (and "asm_..." for ASM), both in cmdline and in comm.
CRITICAL_PROCESSES = (
    CriticalProcess("oracle", r"^(?:ora|asm|apx)_" + _BACKGROUND.pattern[1:-1] + r"_\S+",
                    "the Oracle background process {0}", comm=True, ignore_case=True),
)


@dataclass(frozen=True, slots=True)
class OracleSessionRow:
    """One session to choose a target from."""

    sid: int
    serial: int
    username: str
    program: str
    event: str
    session_type: str
    spid: int
    pname: str = ""

    @property
    def background(self) -> str:
        """The background process name (``"LGWR"``) or ``""`` for a user session."""
        return background_name(self.program, self.pname, self.session_type)

    def line(self) -> str:
        """One row of the pick list."""
        who = self.username or (self.background or "?")
        return f"SID {self.sid:<5} {who:<14} {self.program[:30]:<30} {self.event[:40]}"


def background_name(program: str, pname: str = "", session_type: str = "") -> str:
    """The background process name for a V$SESSION/V$PROCESS row, or ``""``."""
    for name in (pname or "", *(_PROGRAM.findall(program or "") or [""])):
        if name and _BACKGROUND.match(name):
            return name.upper()
    if (session_type or "").upper() == "BACKGROUND":
        return (pname or "BACKGROUND").upper()
    return ""


def session_rows(rows) -> list[OracleSessionRow]:
    """:data:`SESSIONS_SQL` rows -> :class:`OracleSessionRow` (shared servers, SPID null, skipped)."""
    out = []
    for sid, serial, username, program, event, stype, spid, pname in rows:
        if spid is None or not str(spid).strip().isdigit():
            continue
        out.append(OracleSessionRow(int(sid), int(serial), username or "", program or "", event or "",
                                    stype or "", int(str(spid).strip()), pname or ""))
    return out


def target_pid(row: OracleSessionRow, allow_background: bool = False) -> int:
    """The SPID to probe, refusing background processes unless ``allow_background``."""
    bg = row.background
    if bg and not allow_background:
        raise UserError(
            f"SID {row.sid} is the background process {bg}: stopping it in a debugger stalls the "
            "whole instance; pick a user session (or override explicitly)"
        )
    return row.spid


@dataclass(frozen=True, slots=True)
class LocalCheck:
    """Whether gdb and perf can reach the target from this machine, and if not, why."""

    local: bool
    reason: str


def _short(host: str) -> str:
    return (host or "").strip().lower().split(".")[0]


def check_local(db_host: str, spid: int, this_host: str | None = None, proc: str = "/proc") -> LocalCheck:
    """Compare V$INSTANCE.HOST_NAME with this machine and look for SPID in /proc.

    The pid must exist here and its command line must be an Oracle process
    (``oracleSID (LOCAL=NO)`` for a dedicated server, ``ora_xxxx_SID`` for a
    background), else a same-named host (a container, a clone) could make
    gdb attach to an unrelated process with the same pid.
    """
    here = this_host if this_host is not None else socket.gethostname()
    if _short(db_host) != _short(here):
        return LocalCheck(False, f"the database runs on {db_host}, not on this machine ({here}): "
                                 "gdb and perf need tdescope to run on the database host")
    path = os.path.join(proc, str(spid), "cmdline")
    try:
        with open(path, "rb") as fh:
            cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:
        return LocalCheck(False, f"server process {spid} is not visible here (/proc/{spid} missing): "
                                 "another host or a container with its own pid namespace")
    if not (cmdline.startswith("oracle") or cmdline.startswith("ora_")):
        return LocalCheck(False, f"pid {spid} here is {cmdline[:60]!r}, not an Oracle server process")
    return LocalCheck(True, f"server process {spid} ({cmdline[:60]}) runs on this machine")
