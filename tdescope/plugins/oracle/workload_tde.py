"""Seed 000: the same DML procedure on a TDE tablespace and on a plain one.

The DDL is the seed's own (Oracle 19.27, AIX and Linux), with the datafile
folder as a parameter; an empty folder lets Oracle-managed files name the
datafile (``datafile size 10m``), as seed 003 does. Each procedure prints one
DBMS_OUTPUT line::

    test_tab_tde elapsed=91.65, Insert = 1000000, Delete = 500000, Update = 500000, Select = 500000

which :func:`parse_proc_output` reads into a :class:`ProcOutcome`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tdescope.app.engines.api import Workload, WorkloadControl, wanted_sides
from tdescope.app.errors import UserError
from tdescope.app.events import PhaseTiming, WorkloadProgress, WorkloadResult

__all__ = [
    "ProcOutcome",
    "SIDES",
    "parse_proc_output",
    "read_dbms_output",
    "run_tde_compare",
    "setup_statements",
    "tde_compare_workload",
]

#: side -> (suffix of the seed's object names, tablespace is encrypted)
SIDES = {"encrypted": ("tde", True), "plain": ("non", False)}

_LINE = re.compile(
    r"(?P<table>\w+) elapsed=(?P<elapsed>-?[\d.]+), Insert = (?P<ins>\d+), Delete = (?P<del>\d+), "
    r"Update = (?P<upd>\d+), Select = (?P<sel>\d+)"
)
_SAFE_DIR = re.compile(r"^[\w./+:\\-]*$")

_PROC = """\
create or replace procedure test_tab_{s}_proc (p_grp_cnt number, p_id_cnt number) as
l_start number := dbms_utility.get_time;
type t_tab is table of test_tab_{s}%rowtype;
l_tab t_tab := t_tab();
l_ins_cnt number := 0;
l_del_cnt number := 0;
l_upd_cnt number := 0;
l_sel_cnt number := 0;
begin
select ceil(level/p_id_cnt), level, rpad('abc_'||level, 100, 'x'), systimestamp bulk collect into l_tab from dual connect by level <= p_id_cnt;
l_start := dbms_utility.get_time;
for g in 1..p_grp_cnt loop
for i in 1..p_id_cnt loop
l_tab(i).grp := g;
end loop;
forall k in l_tab.first .. l_tab.last save exceptions
insert into test_tab_{s} values l_tab(k);
l_ins_cnt := l_ins_cnt + p_id_cnt;
if mod(g, 2) = 1 then
delete from test_tab_{s} where grp = g and rownum <= p_id_cnt;
l_del_cnt := l_del_cnt + sql%rowcount;
end if;
if mod(g, 2) = 0 then
update test_tab_{s} set name = rpad('abc_'||id, 100, 'x') where grp = g and rownum <= p_id_cnt;
l_upd_cnt := l_upd_cnt + sql%rowcount;
end if;
for c in (select * from test_tab_{s} where grp = g and rownum <= p_id_cnt)
loop
l_sel_cnt := l_sel_cnt + 1;
end loop;
commit;
end loop;
dbms_output.put_line('test_tab_{s} elapsed='||round((dbms_utility.get_time-l_start)/100, 2)||
', Insert = '||l_ins_cnt||', Delete = '||l_del_cnt||', Update = '||l_upd_cnt||', Select = '||l_sel_cnt);
end;"""


def setup_statements(side: str, datafile_dir: str = "") -> list[str]:
    """The seed's DDL for one side, one statement per item (no ``/`` terminators).

    The ``drop`` statements come first and fail harmlessly on a fresh schema
    (ORA-00959 / ORA-00942); :func:`run_tde_compare` ignores exactly those.
    """
    s, encrypted = SIDES[side]
    if not _SAFE_DIR.match(datafile_dir):
        raise UserError(f"datafile folder {datafile_dir!r} has characters that do not belong in a path")
    datafile = f"'{datafile_dir.rstrip('/')}/test_ts_{s}.dbf'" if datafile_dir else ""
    storage = " encryption default storage (encrypt)" if encrypted else ""
    return [
        f"drop tablespace test_ts_{s} including contents and datafiles",
        f"create tablespace test_ts_{s} datafile {datafile}".rstrip()
        + "\nsize 10m autoextend on maxsize 1g extent management local segment space management auto"
        + f"{storage}",
        f"drop table test_tab_{s}",
        f"create table test_tab_{s}(grp number, id number, name varchar2(100), ts timestamp with time zone)"
        f" tablespace test_ts_{s}",
        f"create index test_tab_{s}_idx1 on test_tab_{s} (grp, id, name, ts) tablespace test_ts_{s}",
        f"create index test_tab_{s}_idx2 on test_tab_{s} (grp, name) tablespace test_ts_{s}",
        _PROC.format(s=s),
    ]


@dataclass(frozen=True, slots=True)
class ProcOutcome:
    """One procedure's DBMS_OUTPUT line, parsed."""

    table: str
    elapsed_s: float
    inserted: int
    deleted: int
    updated: int
    selected: int

    def counts(self) -> dict[str, int]:
        """Row counts as the seed prints them."""
        return {"Insert": self.inserted, "Delete": self.deleted, "Update": self.updated, "Select": self.selected}


def parse_proc_output(lines) -> ProcOutcome | None:
    """The first ``test_tab_xxx elapsed=...`` line in ``lines``, or None."""
    for line in lines:
        m = _LINE.search(line or "")
        if m:
            return ProcOutcome(m["table"], float(m["elapsed"]), int(m["ins"]), int(m["del"]),
                               int(m["upd"]), int(m["sel"]))
    return None


def read_dbms_output(cursor, chunk: int = 100) -> list[str]:
    """Drain DBMS_OUTPUT with ``dbms_output.get_lines`` (python-oracledb's documented recipe)."""
    lines_type = cursor.connection.gettype("SYS.DBMSOUTPUT_LINESARRAY")
    lines_var = cursor.var(lines_type)
    count_var = cursor.var(int)
    out: list[str] = []
    while True:
        count_var.setvalue(0, chunk)
        cursor.callproc("dbms_output.get_lines", (lines_var, count_var))
        got = lines_var.getvalue().aslist()[: count_var.getvalue()]
        out.extend(x or "" for x in got)
        if count_var.getvalue() < chunk:
            return out


_IGNORABLE_DROP = ("ORA-00959", "ORA-00942")


def run_tde_compare(conn, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
    """Create the objects when asked, then run both procedures with the same parameters."""
    name = "oracle.tde_compare"
    groups, ids = int(params.get("groups", 1000)), int(params.get("ids", 100))
    cur = conn.cursor()
    timings, counts = [], {}
    sides = list(wanted_sides(params, tuple(SIDES)))
    steps = len(sides) * (2 if params.get("create") else 1)
    done = 0
    if params.get("create"):
        for side in sides:
            for sql in setup_statements(side, str(params.get("datafile_dir", ""))):
                try:
                    cur.execute(sql)
                except Exception as exc:  # noqa: BLE001 - only "does not exist" on drops is expected
                    if not (sql.startswith("drop") and any(c in str(exc) for c in _IGNORABLE_DROP)):
                        raise UserError(f"setup of {side} side failed: {str(exc).splitlines()[0]}") from None
            done += 1
            control.emit(WorkloadProgress(time.time(), name, side, done, steps, "objects created"))
    cur.callproc("dbms_output.enable", [None])
    for side in sides:
        if control.cancelled:
            break
        s, _ = SIDES[side]
        t0 = time.perf_counter()
        cur.callproc(f"test_tab_{s}_proc", [groups, ids])
        wall = time.perf_counter() - t0
        outcome = parse_proc_output(read_dbms_output(cur))
        elapsed = outcome.elapsed_s if outcome else wall
        timings.append(PhaseTiming(side, "total", elapsed))
        timings.append(PhaseTiming(side, "client wall", wall))
        if outcome:
            counts[side] = outcome.counts()
        done += 1
        control.emit(WorkloadProgress(time.time(), name, side, done, steps, f"elapsed={elapsed:.2f} s"))
    return WorkloadResult(time.time(), name, {"groups": groups, "ids": ids}, tuple(timings), counts,
                          cancelled=control.cancelled)


def tde_compare_workload(conn) -> Workload:
    """Seed 000 as a :class:`Workload` bound to ``conn``."""
    return Workload(
        name="oracle.tde_compare",
        label="TDE vs plain tablespace (seed 000)",
        description="Insert/delete/update/select loops in test_tab_tde_proc and test_tab_non_proc; "
                    "elapsed from DBMS_OUTPUT and their ratio",
        params={"groups": 1000, "ids": 100, "create": False, "datafile_dir": ""},
        run=lambda params, control: run_tde_compare(conn, params, control),
        sides=tuple(SIDES),
    )
