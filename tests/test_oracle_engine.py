"""The Oracle engine as the workbench and the CLI meet it: registry, contract, panel, commands."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tdescope.app.engines import discover_engines
from tdescope.app.engines.api import Constant, EngineSession
from tdescope.app.hotspots.glossary import describe
from tdescope.plugins.oracle.blocks import OracleBlockDecoder
from tdescope.plugins.oracle.session import OracleSession
from tdescope.plugins.oracle.trace import masked_summary, parse_trace_file

DATA = Path(__file__).parent / "data" / "oracle"


def test_engine_is_registered_and_keeps_the_contract():
    engines, errors = discover_engines()
    assert not [e for e in errors if e.name == "oracle"]
    oracle = engines["oracle"]
    assert isinstance(oracle.page_decoder(), OracleBlockDecoder)
    keys = [r.key for r in oracle.probe_recipes()]
    assert keys[0] == "oracle.block_decrypted"
    for recipe in oracle.probe_recipes():  # no DWARF in oracle: registers or constants only
        for ref in (recipe.before, recipe.after, recipe.length, recipe.pgno):
            assert ref is None or isinstance(ref, Constant) or ref.at_entry
    glossary = oracle.glossary()
    for fn in ("kcbgtcr", "kcbz_table_scan_read", "kdr4chk", "kdb4chk1", "y8_ExpandRijndaelKey", "qertbFetch",
               "evaopn2", "kcrfw_redo_gen_ext", "kcbchg1_main", "kgce_dec", "kcbchk_ctx", "kskthbwt"):
        assert describe(fn, glossary), fn
    assert describe("ztchsh1n", glossary) and describe("kdstf00000010000kmP", glossary)
    assert describe("l9_EncryptCFB128_RIJ128_AES_NI.key_128_s", glossary) or describe(
        "l9_EncryptCFB128_RIJ128_AES_NI", glossary)
    # the session contract, structurally (a Protocol with a data member refuses issubclass)
    contract = {n for n in dir(EngineSession) if not n.startswith("_")} | set(EngineSession.__annotations__)
    assert "own_target" in contract and [n for n in sorted(contract) if not hasattr(OracleSession, n)] == []


def cli(*args):
    return subprocess.run([sys.executable, "-m", "tdescope", "oracle", *args], capture_output=True, text=True,
                          timeout=60)


def test_parse_trace_json_has_the_documented_shape():
    result = cli("parse-trace", str(DATA / "trace_19c_tde_proc.trc"), "--json")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert set(doc) == {"statements", "waits"}
    st = doc["statements"][0]
    assert set(st) == {"sql_id", "text", "depth", "calls", "waits"}
    assert set(st["calls"]) == {"parse", "execute", "fetch"}
    assert set(st["calls"]["execute"]) == {"count", "cpu_us", "elapsed_us", "disk", "query", "current", "rows"}
    for w in doc["waits"].values():
        assert set(w) == {"count", "total_ela_us", "max_ela_us"}
    assert doc == masked_summary(parse_trace_file(DATA / "trace_19c_tde_proc.trc")).to_json()


def test_parse_trace_masks_literals_unless_asked():
    """Issue #27 item 17: a trace's statements may hold keys; what is printed (and projected) is masked."""
    masked = cli("parse-trace", str(DATA / "trace_19c_tde_proc.trc"))
    shown = cli("parse-trace", str(DATA / "trace_19c_tde_proc.trc"), "--show-literals")
    assert "BEGIN test_tab_tde_proc(?, ?); END;" in masked.stdout and "(2, 100)" not in masked.stdout
    assert "BEGIN test_tab_tde_proc(2, 100); END;" in shown.stdout
    assert "INSERT INTO TEST_TAB_TDE VALUES(:B1 ,:B2 ,:B3 ,:B4 )" in masked.stdout  # binds stay


def test_parse_trace_and_blockdump_text():
    trace = cli("parse-trace", str(DATA / "trace_19c_tde_proc.trc"))
    assert trace.returncode == 0 and "call     count       cpu    elapsed" in trace.stdout
    dump = cli("parse-blockdump", str(DATA / "blockdump_tde_907.trc"))
    assert dump.returncode == 0 and "rdba 0x0000038b (1024/907)" in dump.stdout
    dump_json = json.loads(cli("parse-blockdump", str(DATA / "blockdump_tde_907.trc"), "--json").stdout)
    assert len(dump_json["blocks"]) >= 2


@pytest.mark.parametrize("action", ["parse-trace", "parse-blockdump"])
def test_cli_errors_are_one_line(tmp_path, action):
    garbage = tmp_path / "garbage.trc"
    garbage.write_bytes(bytes(range(256)) * 64)
    text = tmp_path / "notes.txt"
    text.write_text("just some notes\nnothing Oracle here\n")
    for path, fragment in ((tmp_path / "missing.trc", "no such file"), (garbage, "binary data"),
                           (text, "no 10046 trace records" if action == "parse-trace" else "no block dump")):
        result = cli(action, str(path))
        assert result.returncode != 0 and result.stdout == ""
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and "Traceback" not in result.stderr and fragment in lines[0], result.stderr


def test_panel_shows_the_inventory(qtbot):
    from tdescope.app.engines.api import Inventory
    from tdescope.plugins.oracle.panel import OracleDock, create_docks

    dock = OracleDock()
    qtbot.addWidget(dock)
    dock.show_inventory(Inventory("oracle", (("Wallet", "status", "OPEN"), ("Host", "AES-NI", "yes"))))
    assert dock.inventory.rowCount() == 2 and dock.inventory.item(0, 2).text() == "OPEN"
    assert isinstance(create_docks()[0], OracleDock)
