"""The PostgreSQL plugin against a real cluster (tests/pgcluster.py): captures, pages, waits, workloads, errors."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest

from conftest import probe_backend, tracer_pid, wait_for
from pgcluster import PASSWORD, PASSWORD_ROLE
from tdescope.app.probe.window import CaptureLimits
from tdescope.app.engines.api import ConnectParams, WorkloadControl
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureContext, ContextKind, PageCapture, WaitSample
from tdescope.app.experiment import CaptureSpec, Experiment, WorkloadRun
from tdescope.plugins.postgres import ENGINE
from tdescope.plugins.postgres.pages import PgPageDecoder
from tdescope.plugins.postgres.pgp import parse_pgp_message
from tdescope.plugins.postgres.recipes import EVP_DECRYPT, PAGE_READ, PGP_DECRYPT
from tdescope.plugins.postgres.waits import WaitSampler

MARKER = "TDESCOPE-MARKER-4711"


@pytest.fixture(scope="module")
def filled(pg_cluster):
    """A small table with a pgcrypto column holding the marker, and one larger than shared_buffers."""
    pg_cluster.psql(
        "DROP TABLE IF EXISTS secrets, big;"
        f"CREATE TABLE secrets (id int, note text, s bytea);"
        f"INSERT INTO secrets SELECT g, 'row ' || g, pgp_sym_encrypt('{MARKER} ' || g, 'k', 'cipher-algo=aes256') "
        "FROM generate_series(1, 20) g;"
        "CREATE TABLE big AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 20000) g;"
        "DELETE FROM big WHERE id % 97 = 0;"
    )
    return pg_cluster


@pytest.fixture
def session(filled):
    s = ENGINE.connect(ConnectParams(dsn=filled.dsn()))
    yield s
    s.close()


def _capture(session, recipe, sql, count, repeat=1, backend="gdb"):
    captures: list[PageCapture] = []
    exp = Experiment(session, "postgres", lambda e: captures.append(e) if isinstance(e, PageCapture) else None,
                     capture=CaptureSpec(recipe=recipe, backend=probe_backend(backend),
                                         limits=CaptureLimits(max_captures=count, max_seconds=30, first_hit_timeout=20)),
                     run=WorkloadRun(workload=session.sql_workload(sql, repeat), params={"sql": sql, "repeat": repeat},
                                     until_captured=True))
    exp.start()
    assert exp.wait(60)
    assert exp.error is None, exp.error
    assert tracer_pid(session.server_pid()) == 0  # disarmed and detached
    print(f"{backend} window: {exp.capture_summary}")  # shown when a test fails: why the window ended
    return captures


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["gdb", "ebpf"])
def test_decrypt_capture_plaintext_holds_marker_ciphertext_does_not(session, backend):
    # pgcrypto.so is not loaded in this fresh backend: the probe waits for the library to load
    caps = _capture(session, PGP_DECRYPT, "SELECT pgp_sym_decrypt(s, 'k') FROM secrets WHERE id <= 3", 40,
                    backend=backend)
    assert caps
    assert any(MARKER.encode() in c.after for c in caps)
    assert not any(MARKER.encode() in c.before for c in caps)


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["gdb", "ebpf"])
def test_one_capture_per_pgp_message_its_chunks_joined(session, filled, backend):
    # pgp_cfb_decrypt runs per chunk (the 18-byte prefix, each packet-header byte, the data): the window joins
    # a message's chunks, so --count 3 gives three whole messages, each with its plaintext
    caps = _capture(session, PGP_DECRYPT, "SELECT pgp_sym_decrypt(s, 'k') FROM secrets WHERE id <= 3 ORDER BY id",
                    3, backend=backend)
    messages = [bytes(r[0]) for r in session.control.execute("SELECT s FROM secrets WHERE id <= 3 ORDER BY id")]
    assert [c.seq for c in caps] == [1, 2, 3]
    for cap in caps:  # gdb's stop budget may pause the probe mid-message: that message is dropped, not cut
        (i,) = [i for i in (1, 2, 3) if f"{MARKER} {i}".encode() in cap.after]
        assert len(cap.before) == len(cap.after) > 40 and MARKER.encode() not in cap.before
        assert cap.before in messages[i - 1]  # the whole encrypted data packet's body, as stored in the row


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["gdb", "ebpf"])
def test_evp_decrypt_in_the_system_libcrypto(session, backend):
    # decrypt() is pgcrypto's raw AES-CBC through OpenSSL (pgp_sym_decrypt's CFB only encrypts blocks)
    # (OpenSSL holds the last block back for EVP_DecryptFinal: the marker goes first, padding after)
    sql = f"SELECT decrypt(encrypt(('{MARKER} ' || repeat('x', 40))::bytea, 'key', 'aes'), 'key', 'aes')"
    caps = _capture(session, EVP_DECRYPT, sql, 3, backend=backend)
    assert len(caps) == 3 and all(c.symbol == "EVP_DecryptUpdate" for c in caps)
    assert all(len(c.before) == 64 and MARKER.encode() in c.after for c in caps)
    assert not any(MARKER.encode() in c.before for c in caps)


@pytest.mark.gdb
@pytest.mark.parametrize("backend", ["gdb", "ebpf"])
def test_page_read_decodes_like_heap_page_items(session, filled, backend):
    cur = session.conn
    cur.execute("SELECT count(*) FROM big").fetchone()  # catalogs cached: the next scan reads big's blocks
    caps = _capture(session, PAGE_READ, "SELECT count(*) FROM big", 6, backend=backend)
    decoder = session.catalog_decoder()  # the server's relations: each block decodes as the one its read names
    ctl = session.control
    nblocks = ctl.execute("SELECT pg_relation_size('big') / 8192").fetchone()[0]
    assert nblocks * 8192 > 256 * 1024  # bigger than shared_buffers: blocks come through mdread
    node = ctl.execute("SELECT pg_relation_filenode('big')").fetchone()[0]
    ours = [c for c in caps if c.where == CaptureContext(ContextKind.RELFILENODE, node)]
    assert ours, [c.where for c in caps]  # the read itself says which relation (mdread's SMgrRelation)
    for cap in ours:
        page = decoder.decode(cap.after, cap.pgno, cap.where)  # no columns given: big's, found by its file node
        assert page.page_type == "heap" and not page.problems and 0 <= cap.pgno < nblocks, page.problems
        assert page.fields[0].value == f"block {cap.pgno}, relation big (relfilenode {node})"
        raw = bytes(ctl.execute("SELECT get_raw_page('big', %s)", (cap.pgno,)).fetchone()[0])
        lower = int.from_bytes(raw[12:14], "little")
        assert cap.after[24:lower] == raw[24:lower]  # big's block, as pageinspect reads it
        ids = [r[0] for r in page.records]
        items = ctl.execute("SELECT lp, lp_off, lp_len FROM heap_page_items(get_raw_page('big', %s))",
                            (cap.pgno,)).fetchall()
        assert page.cells == len(items)
        assert len(page.records) == sum(1 for r in items if r[2])
        starts = sorted(f.start for f in page.fields if f.name.startswith("tuple "))
        assert starts == sorted(r[1] for r in items if r[2])
        attrs = ctl.execute("SELECT t_attrs FROM heap_page_item_attrs(get_raw_page('big', %s), 'big'::regclass) "
                            "WHERE lp_len > 0 ORDER BY lp_off", (cap.pgno,)).fetchall()
        assert sorted(ids) == sorted(int.from_bytes(a[0][0], "little", signed=True) for a in attrs)
    for cap in caps:  # every other block is named by its own relation, never decoded with big's columns
        if cap not in ours and cap.where is not None:
            head = decoder.decode(cap.after, cap.pgno, cap.where).fields[0].value
            assert "relation big" not in head and f"relfilenode {cap.where.value}" in head, head


def test_decoder_against_pageinspect(session, filled):
    ctl = session.control
    page_bytes = ctl.execute("SELECT get_raw_page('secrets', 0)").fetchone()[0]
    page = PgPageDecoder(session.columns("secrets")).decode(page_bytes, 0)
    items = ctl.execute("SELECT lp, lp_off, lp_len, t_xmin::text::bigint, t_ctid::text, t_infomask, t_hoff "
                        "FROM heap_page_items(get_raw_page('secrets', 0)) ORDER BY lp").fetchall()
    assert page.page_type == "heap" and not page.problems
    assert page.cells == len(items) == 20
    for lp, off, length, xmin, ctid, mask, hoff in items:
        tup = next(f for f in page.fields if f.name == f"tuple {lp}")
        assert (tup.start, tup.end) == (off, off + length)
        got = {f.name: f.value for f in tup.walk()}
        assert got["t_xmin"] == str(xmin) and got["t_ctid"] == ctid and got["t_hoff"] == str(hoff)
        assert got["t_infomask"].startswith(f"0x{mask:04x}")
    # the ciphertext sits inside the tuple as the bytea attribute, and it is a PGP message
    secret = page.records[0][2]
    assert isinstance(secret, bytes) and MARKER.encode() not in page_bytes
    assert parse_pgp_message(secret).cipher == "AES-256"


def test_pgp_settings_from_headers(session):
    for options, cipher, integrity in (("cipher-algo=aes128", "AES-128", "MDC"),
                                       ("cipher-algo=3des, disable-mdc=1", "3DES", "none"),
                                       ("cipher-algo=aes192, s2k-mode=1", "AES-192", "MDC")):
        msg = session.control.execute("SELECT pgp_sym_encrypt('x', 'k', %s)", (options,)).fetchone()[0]
        got = parse_pgp_message(msg)
        assert got.cipher == cipher and got.integrity.startswith(integrity)
    assert parse_pgp_message(b"\x00" * 40) is None


def test_inventory_finds_pgcrypto_column(session):
    assert session.inventory().get("pgcrypto columns").startswith("not sampled (")  # user tables: only when asked
    said = session.sampling_reads()  # other tests' tables share the cluster: only the shape is fixed here
    assert said.startswith("Sampling reads the first 64 bytes of up to 20 rows of each of ") and "public." in said
    inv = session.sample_columns()
    assert inv.get("cluster level") == "no cluster-level encryption; column encryption via pgcrypto"
    assert inv.get("pgcrypto").startswith("installed")
    assert "AES-256" in inv.get("public.secrets.s")
    assert inv.get("version").startswith("15")


def test_wait_sampling_returns_rows(session):
    events = []
    busy = threading.Thread(target=lambda: session.conn.execute(
        "SELECT count(pgp_sym_decrypt(s, 'k')) FROM secrets, generate_series(1, 150)").fetchone())
    sampler = WaitSampler(session.wait_source(), events.append, hz=20).start()
    busy.start()
    busy.join(60)
    wait_for(lambda: len(events) >= 5, timeout=10, what="five wait samples")
    sampler.stop()
    assert sampler.error is None
    assert len(events) >= 5
    assert all(isinstance(e, WaitSample) and e.source == "postgres" and e.pid == session.server_pid()
               for e in events)
    assert any(e.wait_class == "CPU" for e in events)


def test_matrix_every_cell_plain_fastest_each_the_median_of_its_rounds(session):
    matrix = next(w for w in session.workloads() if w.name == "matrix")
    events = []
    result = matrix.run({**matrix.params, "rows": 150, "rounds": 3}, WorkloadControl(events.append))
    cells = {t.side: t.elapsed_s for t in result.timings}
    assert len(cells) == 9 and len(result.table) == 10
    assert min(cells, key=cells.get) == "plain"
    # a server on this machine: each cell's backend CPU too, the measure other load does not stretch
    cpu = {side: c["server CPU ms (median)"] for side, c in result.counts.items()}
    assert set(cpu) == set(cells) and min(cpu, key=cpu.get) == "plain" and cpu["plain"] > 0, cpu
    took: dict[str, list[float]] = {}
    for e in events:
        if e.side in cells:  # "<cell>: 0.012 s (round r/3)"
            took.setdefault(e.side, []).append(float(e.message.split(": ")[1].split(" s")[0]))
    assert all(len(v) == 3 for v in took.values()) and set(took) == set(cells)
    assert all(abs(cells[c] - sorted(v)[1]) < 0.0015 for c, v in took.items())  # the middle of three (ms text)
    with pytest.raises(UserError, match="rounds 1..50"):
        matrix.run({**matrix.params, "rounds": 0}, WorkloadControl())


def test_ab_dml_runs_both_sides(session):
    ab = next(w for w in session.workloads() if w.name == "ab_dml")
    result = ab.run({"groups": 2, "ids_per_group": 20}, WorkloadControl())
    assert result.counts["encrypted"] == result.counts["plain"] == {"Insert": 40, "Delete": 20, "Update": 20,
                                                                    "Select": 20}
    assert result.ratio() is not None


def test_pgbench_ro_rw(session):
    bench = next(w for w in session.workloads() if w.name == "pgbench")
    result = bench.run({**bench.params, "scale": 1, "clients": 1, "seconds": 1}, WorkloadControl())
    tps = {t.side: t.elapsed_s for t in result.timings if t.phase == "tps"}
    assert tps["read-only"] > 0 and tps["read-write"] > 0


# -- bad input: one clear line, nothing armed --------------------------------------
def test_wrong_password(filled):
    dsn = filled.dsn(user=PASSWORD_ROLE, host="127.0.0.1")
    with pytest.raises(UserError, match="wrong password"):
        ENGINE.connect(ConnectParams(dsn=dsn, password=PASSWORD + "x"))
    s = ENGINE.connect(ConnectParams(dsn=dsn, password=PASSWORD))
    s.close()


def test_no_password_and_no_terminal(filled):
    with pytest.raises(UserError, match="asks for a password"):
        ENGINE.connect(ConnectParams(dsn=filled.dsn(user=PASSWORD_ROLE, host="127.0.0.1")))


def test_server_down(filled):
    port = filled.port + 1 if filled.port < 65000 else filled.port - 1
    with pytest.raises(UserError, match="not reachable"):
        ENGINE.connect(ConnectParams(dsn=f"host=127.0.0.1 port={port} dbname=postgres connect_timeout=3"))


def _cli(*argv, env=None):
    return subprocess.run([sys.executable, "-m", "tdescope", *argv], capture_output=True, text=True, timeout=90,
                          env={**os.environ, **(env or {})}, stdin=subprocess.DEVNULL)


def test_cli_extension_missing(filled):
    out = _cli("capture", "--engine", "postgres", "--dsn", filled.dsn("nocrypto"), "--sql", "SELECT 1",
               "--count", "1", "--timeout", "5")
    assert out.returncode != 0
    assert out.stderr.strip().count("\n") == 0 and "extension pgcrypto is missing" in out.stderr
    assert "Traceback" not in out.stderr
    assert tracer_pid(filled.postmaster_pid()) == 0


@pytest.mark.parametrize("which", ["postmaster", "checkpointer", "not-a-backend"])
def test_refused_targets(filled, which):
    pid = {"postmaster": filled.postmaster_pid, "not-a-backend": os.getpid}.get(which)
    if which == "checkpointer":
        pid = int(filled.psql("SELECT pid FROM pg_stat_activity WHERE backend_type = 'checkpointer'").strip())
    else:
        pid = pid()
    expected = {"postmaster": "is the postmaster", "checkpointer": "background process",
                "not-a-backend": "not a backend"}[which]
    with pytest.raises(UserError, match=expected):
        ENGINE.connect(ConnectParams(dsn=filled.dsn(), pid=pid))
    assert tracer_pid(pid) == 0


@pytest.mark.gdb
def test_cli_capture_json(filled):
    out = _cli("capture", "--engine", "postgres", "--dsn", filled.dsn(), "--sql",
               "SELECT pgp_sym_decrypt(s, 'k') FROM secrets", "--count", "2", "--json")
    assert out.returncode == 0, out.stderr
    lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{") and '"summary"' not in ln]
    assert len(lines) == 2 and '"symbol": "pgp_cfb_decrypt"' in lines[0]


def test_gui_target_picker_switches_the_probe_target(qtbot, qsettings, pg_cluster, monkeypatch):
    """The Engine dock's "Change target…" lists pg_stat_activity and refuses the checkpointer."""
    import psycopg
    from PySide6.QtWidgets import QMessageBox

    from tdescope.app.engines import ConnectParams, discover_engines
    from tdescope.ui.dialogs import target as target_dialog
    from tdescope.ui.window.main_window import MainWindow

    other = psycopg.connect(pg_cluster.dsn(), autocommit=True)
    try:
        other_pid = other.execute("SELECT pg_backend_pid()").fetchone()[0]
        win = MainWindow(discover_engines()[0]["postgres"], qsettings)
        qtbot.addWidget(win)
        win.connect_engine(ConnectParams(dsn=pg_cluster.dsn()))
        qtbot.waitUntil(lambda: win.session is not None, timeout=30000)
        assert win.engine_dock.change_target.isVisibleTo(win)
        kinds = {c.pid: c.kind for c in win.session.targets()}
        assert other_pid in kinds and "checkpointer" in kinds.values()
        checkpointer = next(pid for pid, kind in kinds.items() if kind == "checkpointer")
        warnings = []
        monkeypatch.setattr(QMessageBox, "warning", lambda *a: warnings.append(a[2]))
        for pick in (checkpointer, other_pid):
            monkeypatch.setattr(target_dialog.TargetDialog, "exec", lambda self: 1)
            monkeypatch.setattr(target_dialog.TargetDialog, "chosen", lambda self, p=pick: p)
            win.pick_target()  # listing and choosing are database calls: on the task runner
            qtbot.waitUntil(lambda: win.tasks.running == 0, timeout=10000)
        assert warnings and "checkpointer" in warnings[0]
        assert win.session.server_pid() == other_pid
        assert str(other_pid) in win.engine_dock.target.text()
        # one target: the engine's waits, the OS view and the inventory follow it, and the timeline says so
        assert win.session.wait_source().pid == other_pid
        qtbot.waitUntil(lambda: win.observation.observation is not None
                        and win.observation.observation.pid == other_pid, timeout=10000)
        qtbot.waitUntil(lambda: any(m.label == f"probe target: pid {other_pid}" for m in win.observation.run.markers),
                        timeout=5000)
        rows = {name: value for _, name, value in win.session.inventory().rows}
        assert any(str(other_pid) in str(v) for v in rows.values()), rows
        win.shutdown()
    finally:
        other.close()
