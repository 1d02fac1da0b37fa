"""Oracle inventory, target choice, wait deltas and trace fetching on recorded view rows.

Oracle cannot run here: each test feeds rows shaped exactly like the columns the SQL selects
(from the documented V$ / DBA_ views) to the pure mapping code that a live session uses.
"""

import os
from pathlib import Path

import pytest

from tdescope.app.errors import UserError
from tdescope.plugins.oracle import inventory as inv
from tdescope.plugins.oracle import target as tg
from tdescope.plugins.oracle.trace import parse_trace_file
from tdescope.plugins.oracle.waits import (
    ASH_SQL,
    EVENTS_SQL,
    TIME_MODEL_SQL,
    OracleWaitSource,
    SnapperDeltas,
    ash_sample,
    pga_wait_samples,
)

DATA = Path(__file__).parent / "data" / "oracle"

# -- inventory ------------------------------------------------------------------------------

RECORDED = {
    inv.INSTANCE_SQL: [("ORCLCDB", "db19.example.com", "19.0.0.0.0", "OPEN")],
    inv.VERSION_SQL: [("Oracle Database 19c Enterprise Edition Release 19.0.0.0.0 - Production",)],
    inv.WALLET_SQL: [("FILE", "/opt/oracle/admin/ORCLCDB/wallet/tde/", "OPEN", "AUTOLOGIN", 1),
                     ("FILE", None, "OPEN", "AUTOLOGIN", 3)],
    inv.ENCRYPTED_TS_SQL: [("TEST_TS_TDE", "AES128", "YES", "NORMAL", 3),
                           ("USERS_ENC", "AES256", "YES", "ENCRYPTING", 3)],
    inv.TABLESPACES_SQL: [("SYSAUX", "NO"), ("SYSTEM", "NO"), ("TEST_TS_NON", "NO"), ("TEST_TS_TDE", "YES"),
                          ("USERS_ENC", "YES")],
    inv.ENCRYPTED_COLUMNS_SQL: [("SCOTT", "COLUMN_ENCRYPTION", "A", "AES 192 bits key", "YES", "SHA-1"),
                                ("SCOTT", "TDS_COLENC_AES128_NOMAC", "A", "AES 128 bits key", "YES", "NOMAC")],
}


def test_inventory_maps_every_view():
    result = inv.collect_inventory(lambda sql: RECORDED[sql], "processor : 0\nflags : fpu sse2 aes avx\n")
    rows = set(result.rows)
    assert ("Instance", "version", "19.0.0.0.0") in rows
    assert ("Wallet", "status (container 1)", "OPEN") in rows
    assert ("Wallet", "location (container 1)", "/opt/oracle/admin/ORCLCDB/wallet/tde/") in rows
    assert ("Encrypted tablespaces", "TEST_TS_TDE", "AES128") in rows
    assert ("Encrypted tablespaces", "USERS_ENC", "AES256, ENCRYPTING") in rows
    assert ("Tablespaces", "encrypted", "2 of 5") in rows
    assert ("Encrypted columns", "SCOTT.COLUMN_ENCRYPTION.A", "AES 192 bits key, SALT, SHA-1") in rows
    assert ("Encrypted columns", "SCOTT.TDS_COLENC_AES128_NOMAC.A", "AES 128 bits key, SALT, NOMAC") in rows
    assert result.get("AES-NI") == "yes (cpu flag aes)"
    assert result.engine == "oracle"


def test_an_unreadable_view_is_one_row_not_a_failure():
    def query(sql):
        if "dba_encrypted_columns" in sql:
            raise RuntimeError("ORA-00942: table or view does not exist\nHelp: ...")
        return RECORDED[sql]

    result = inv.collect_inventory(query, None)
    assert ("Encrypted columns", "DBA_ENCRYPTED_COLUMNS", "unavailable: ORA-00942: table or view does not exist") \
        in result.rows
    assert result.get("AES-NI").startswith("unknown (the database host is not this machine")
    assert inv.map_wallet([]) == [("Wallet", "status", "no keystore configured (V$ENCRYPTION_WALLET is empty)")]
    assert inv.aes_ni_rows("flags : fpu sse2\n") == [("Host", "AES-NI", "no (cpu flag aes absent)")]


# -- target ------------------------------------------------------------------------------------

SESSIONS = [
    (2, 1, None, "oracle@db19 (PMON)", "pmon timer", "BACKGROUND", "4811", "PMON"),
    (5, 3, None, "oracle@db19 (LGWR)", "rdbms ipc message", "BACKGROUND", "4831", "LGWR"),
    (9, 7, None, "oracle@db19 (DBW0)", "rdbms ipc message", "BACKGROUND", "4825", "DBW0"),
    (17, 44, None, "oracle@db19 (LMS1)", "gcs remote message", "BACKGROUND", "4900", None),
    (131, 20511, "SCOTT", "sqlplus@client (TNS V1-V3)", "SQL*Net message from client", "USER", "91234", None),
    (140, 9, "SYS", "python@ws", "PGA memory operation", "USER", None, None),  # shared server: no SPID
]


def test_sessions_list_and_background_refusal():
    rows = tg.session_rows(SESSIONS)
    assert [r.sid for r in rows] == [2, 5, 9, 17, 131]
    assert [r.background for r in rows] == ["PMON", "LGWR", "DBW0", "LMS1", ""]
    for r in rows[:4]:
        with pytest.raises(UserError, match=f"background process {r.background}"):
            tg.target_pid(r)
        assert tg.target_pid(r, allow_background=True) == r.spid
    assert tg.target_pid(rows[4]) == 91234
    assert "SCOTT" in rows[4].line()


def test_local_check_compares_host_and_proc(tmp_path):
    remote = tg.check_local("db19.example.com", 4242, this_host="workstation")
    assert not remote.local and "runs on db19.example.com, not on this machine" in remote.reason
    (tmp_path / "4242").mkdir()
    (tmp_path / "4242" / "cmdline").write_bytes(b"oracleORCLCDB\0(LOCAL=NO)\0")
    ok = tg.check_local("DB19.example.com", 4242, this_host="db19", proc=str(tmp_path))
    assert ok.local and "oracleORCLCDB (LOCAL=NO)" in ok.reason
    missing = tg.check_local("db19", 4343, this_host="db19", proc=str(tmp_path))
    assert not missing.local and "/proc/4343 missing" in missing.reason
    # a real process here that is not Oracle: pytest itself
    me = tg.check_local("h", os.getpid(), this_host="h")
    assert not me.local and "not an Oracle server process" in me.reason


# -- waits ------------------------------------------------------------------------------------

SNAP1_EVENTS = [("db file sequential read", "User I/O", 100, 50_000),
                ("SQL*Net message from client", "Idle", 10, 2_000_000)]
SNAP1_MODEL = [("DB time", 1_000_000), ("DB CPU", 600_000), ("sql execute elapsed time", 900_000)]
SNAP2_EVENTS = [("db file sequential read", "User I/O", 160, 80_000),
                ("SQL*Net message from client", "Idle", 10, 2_000_000),
                ("PGA memory operation", "Other", 4, 120)]
SNAP2_MODEL = [("DB time", 1_700_000), ("DB CPU", 1_100_000), ("sql execute elapsed time", 1_600_000)]


def test_snapper_deltas_between_recorded_snapshots():
    d = SnapperDeltas()
    assert d.update(100.0, SNAP1_EVENTS, SNAP1_MODEL) is None
    rep = d.update(101.0, SNAP2_EVENTS, SNAP2_MODEL)
    assert [(r.name, r.count, r.time_us) for r in rep.events] == [
        ("db file sequential read", 60, 30_000), ("PGA memory operation", 4, 120)]
    assert rep.events[0].percent == pytest.approx(3.0) and rep.events[0].avg_us == 500
    assert [(r.name, r.time_us) for r in rep.time_model] == [
        ("DB time", 700_000), ("sql execute elapsed time", 700_000), ("DB CPU", 500_000)]
    # counters reset (SID reused by a new session): no negative deltas, a new baseline
    assert d.update(102.0, [("db file sequential read", "User I/O", 3, 900)], SNAP1_MODEL) is None
    rep = d.update(103.0, [("db file sequential read", "User I/O", 5, 1500)], SNAP1_MODEL)
    assert [(r.count, r.time_us) for r in rep.events] == [(2, 600)]


def test_ash_samples_and_the_1hz_delta_rule():
    waiting = ("WAITING", "db file scattered read", "User I/O", 5, 907, 16, 4711, -1, "fj7pznj6y4qtg", "ACTIVE")
    on_cpu = ("WAITED SHORT TIME", "db file sequential read", "User I/O", 5, 12, 1, 4712, 30, None, "ACTIVE")
    s = ash_sample(waiting, 91234, 5.0)
    assert (s.source, s.wait_class, s.event, s.pid) == ("oracle", "User I/O", "db file scattered read", 91234)
    assert "p2=907" in s.detail and "sql_id=fj7pznj6y4qtg" in s.detail
    assert (ash_sample(on_cpu, 1, 0).wait_class, ash_sample(on_cpu, 1, 0).event) == ("CPU", "ON CPU")

    clock = [100.0]
    snaps = iter([(SNAP1_EVENTS, SNAP1_MODEL), (SNAP2_EVENTS, SNAP2_MODEL)])
    current = {}
    asked = []

    def query(sql, sid):
        asked.append(sql)
        assert sid == 131
        if sql == ASH_SQL:
            return [waiting]
        if sql == EVENTS_SQL:
            current["snap"] = next(snaps)
            return current["snap"][0]
        assert sql == TIME_MODEL_SQL
        return current["snap"][1]

    src = OracleWaitSource(query, 131, 91234, clock=lambda: clock[0])
    for i in range(10):  # ten samples in one second (10 Hz): one snapshot
        clock[0] = 100.0 + i / 10
        assert len(src.sample()) == 1
    assert asked.count(EVENTS_SQL) == 1 and src.last_report is None
    clock[0] = 101.0
    src.sample()  # 1 s later: second snapshot, first report
    assert asked.count(EVENTS_SQL) == 2
    assert src.last_report.events[0].name == "db file sequential read"


def test_pga_memory_operation_waits_carry_their_sizes():
    summary = parse_trace_file(DATA / "trace_19c_tde_proc.trc")
    samples = pga_wait_samples(summary, 4242, epoch_at_tim0=1000.0)
    assert len(samples) == len(summary.pga_operations) > 0
    assert {s.event for s in samples} == {"PGA memory operation"}
    ops = summary.pga_operations
    for op, s in zip(ops, samples):
        if op.p2:
            assert f"reserve p1={op.p1} B, map p2={op.p2} B" in s.detail
    assert samples[0].ts == 1000.0
