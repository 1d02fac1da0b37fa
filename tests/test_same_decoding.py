"""The window and the report decode a capture the same way, for every engine (issue #22 item 7).

Each engine's real lab (or a real PostgreSQL cluster) is recorded headless with ``tdescope record``;
the file is then opened in a replay window and reported with ``tdescope report``. The window's
decoding of a capture (what its page view shows) must equal the report's, the report's HTML must
show the rows the window shows, and record byte ranges must not overlap.
"""

from __future__ import annotations

import html

import pytest

from conftest import run_tdescope
from tdescope.app.events import PageCapture
from tdescope.app.report.captures import capture_section
from tdescope.app.report.model import build_report
from tdescope.app.session.reader import SessionReader
from tdescope.commands.report import decoder_for

#: engine -> (tdescope record arguments, what a decoded row of the lab holds)
RECORDED = {
    "sqlcipher": (["--lab", "sqlcipher"], "abc_"),
    # the system tablespace's pages come first: enough captures to reach scan_tde's, made by the workload
    "mariadb": (["--lab", "mariadb", "--workload", "cold_warm", "--captures", "1200"], "tdescope-innodb-marker"),
    "pg-tde": (["--lab", "pg-tde"], "WOMBAT-TDE-ROW-"),
    "postgres": (None, None),  # --dsn on the session's cluster, filled in by the test (its blocks name their table)
}


def _record(tmp_path, engine: str, pg_cluster) -> tuple:
    args, row = RECORDED[engine]
    if engine == "postgres":
        pg_cluster.psql("CREATE TABLE IF NOT EXISTS same_decoding (id int, name text);"
                        "TRUNCATE same_decoding;"
                        "INSERT INTO same_decoding SELECT g, 'SAME-DECODING-' || g FROM generate_series(1, 3000) g")
        # a fresh backend's first 30 reads are catalog blocks (named by their relfilenode, no user rows):
        # tests/test_postgres.py checks user blocks decoded by their own relation
        args = ["--dsn", pg_cluster.dsn(), "--engine", "postgres", "--workload", "io_path",
                "--recipe", "postgres.page-read", "--cleanup"]
        row = None
    out = tmp_path / f"{engine}.tds"
    if "--captures" not in args:
        args = [*args, "--captures", "30"]
    # record runs its workload again until --seconds: the 30 captures come in the first run, except
    # MariaDB's 400 (the system tablespace's pages first)
    seconds = "30" if engine == "mariadb" else "10"
    result = run_tdescope("record", *args, "--seconds", seconds, "--no-hotspots", "--no-waits", "--keep-plaintext",
                          "-o", str(out))
    assert result.returncode == 0, result.stderr
    return out, row


def _spans_overlap(decoded) -> list[tuple[str, str]]:
    """Pairs of sibling fields whose byte ranges overlap (records that share bytes)."""
    bad = []
    for top in decoded.fields:
        kids = sorted(top.children, key=lambda f: f.start)
        bad += [(f"{a.name} {a.start}-{a.end}", f"{b.name} {b.start}-{b.end}")
                for a, b in zip(kids, kids[1:]) if b.start < a.end]
    return bad


@pytest.mark.ebpf
@pytest.mark.parametrize("engine", sorted(RECORDED))
def test_the_window_and_the_report_decode_a_capture_alike(engine, tmp_path, qtbot, qsettings, request):
    from tdescope.ui.window.capture_presenter import prepare_capture
    from tdescope.ui.window.main_window import open_replay_window

    pg_cluster = request.getfixturevalue("pg_cluster") if engine == "postgres" else None
    path, row = _record(tmp_path, engine, pg_cluster)
    with SessionReader(path, writable=False) as reader:
        meta = reader.meta
        caps = [c for c in reader.events(kinds=[PageCapture]) if c.plaintext]
    assert caps, f"{engine}: no capture with its plaintext side"
    report_decoder = decoder_for(meta.engine, meta.decoder)  # what `tdescope report FILE` decodes with
    win = open_replay_window(str(path), qsettings)
    qtbot.addWidget(win)
    try:
        shown_rows = []
        for cap in caps:
            shown = prepare_capture(win.decoder, cap)  # what the page view draws
            window = shown.decoded_after if cap.plaintext == cap.after else shown.decoded_before
            report = report_decoder.decode(cap.plaintext, cap.pgno, cap.where)
            assert window == report, f"{engine} capture #{cap.seq}: the window and the report decode differently"
            assert not _spans_overlap(report), (engine, cap.seq, _spans_overlap(report)[:3])
            section = capture_section(cap, report_decoder, True, [])
            assert section.page_type == window.page_type
            shown_rows += [" ".join(r) for r in section.records]
        if row is not None:
            assert any(row in r for r in shown_rows), (engine, shown_rows[:3])
    finally:
        win.shutdown()
    # the CLI report, from the file alone, shows the rows the window shows for the captures it chose
    out = tmp_path / f"{engine}.html"
    result = run_tdescope("report", str(path), "-o", str(out), "--include-plaintext", "--captures", "30")
    assert result.returncode == 0, result.stderr
    with SessionReader(path, writable=False) as reader:
        chosen = build_report(reader, report_decoder, include_plaintext=True, max_captures=30).captures
    page = html.unescape(out.read_text())
    with_rows = [s for s in chosen if s.records]
    if row is not None:
        assert with_rows, f"{engine}: the report chose no capture whose rows decode"
    for section in with_rows:
        assert section.title in page
        for cell in section.records[0]:
            assert cell in page, (engine, section.title, cell)
