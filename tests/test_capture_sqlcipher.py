"""Real gdb on a real SQLCipher process: pages caught before and after decryption."""

import threading

import pytest

from conftest import proc_state, tracer_pid
from tdescope.app.probe.window import CaptureLimits, CaptureWindow, stop_budget
from tdescope.app.engines.api import WorkloadControl
from tdescope.app.probe.entropy import shannon_entropy
from tdescope.app.events import CaptureWindowState, PageCapture
from tdescope.app.experiment import CaptureSpec, Experiment, WorkloadRun
from tdescope.plugins.sqlcipher.engine import DECRYPT, ENCRYPT
from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

pytestmark = pytest.mark.gdb


def _capture_lab(lab, recipe, count, params=None):
    workload = lab.workloads()[0]
    captures, states = [], []

    def sink(ev):
        if isinstance(ev, PageCapture):
            captures.append(ev)
        elif isinstance(ev, CaptureWindowState):
            states.append(ev)

    limits = CaptureLimits(max_captures=count, max_seconds=60, stops=stop_budget(lab.own_target))
    exp = Experiment(lab, "sqlcipher", sink, capture=CaptureSpec(recipe=recipe, limits=limits),
                     run=WorkloadRun(workload=workload, until_captured=True,
                                     params=params or {"groups": 6, "ids_per_group": 1500, "cache_pages": 50}))
    exp.start()
    assert exp.wait(120)
    assert exp.error is None, exp.error
    return captures, states, exp


def test_decrypted_pages_hold_the_rows_the_workload_inserted(lab):
    captures, states, exp = _capture_lab(lab, DECRYPT, 60)
    assert len(captures) == 60
    decoder = SqlitePageDecoder()
    leaf_rows = []
    for cap in captures:
        assert cap.direction == "decrypt" and cap.symbol == "sqlcipher_page_cipher"
        assert len(cap.before) == len(cap.after) in (4096, 4080)
        # ciphertext: high entropy, and none of the row text
        assert shannon_entropy(cap.before) > 7.5
        assert b"abc_" not in cap.before
        page = decoder.decode(cap.after, cap.pgno)
        assert page.page_type in ("table leaf", "table interior", "index leaf", "index interior"), page.problems
        if page.page_type == "table leaf":
            leaf_rows.extend(page.records)
    # rows are (rowid, grp, id, name, ts) exactly as A/B DML writes them
    assert leaf_rows, "no table leaf page among the captures"
    for rowid, grp, ident, name, ts in leaf_rows[:200]:
        assert 1 <= grp <= 6 and 1 <= ident <= 1500
        assert name.startswith(f"abc_{ident}") and len(name) == 100
    assert [s.state for s in states][0] == "armed" and states[-1].state == "disarmed"
    pid = lab.server_pid()
    assert tracer_pid(pid) == 0 and proc_state(pid) in "RS"


def test_encrypt_recipe_catches_plaintext_going_in(lab):
    captures, _, _ = _capture_lab(lab, ENCRYPT, 10)
    assert len(captures) == 10
    for cap in captures:
        assert cap.direction == "encrypt"
        assert shannon_entropy(cap.after) > 7.5  # out = ciphertext
        assert SqlitePageDecoder().decode(cap.before, cap.pgno).page_type != "encrypted"


def test_cancel_disarms_within_a_second_and_the_lab_still_works(lab):
    got = []
    limits = CaptureLimits(max_captures=100000, max_seconds=600, stops=stop_budget(lab.own_target))
    window = CaptureWindow(lab.server_pid(), DECRYPT, limits, "sqlcipher", got.append)
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("s", window.run()))
    t.start()
    assert window.armed.wait(20)
    import time

    t0 = time.monotonic()
    window.cancel()
    t.join(10)
    assert not t.is_alive() and time.monotonic() - t0 < 1.5
    assert result["s"].reason == "cancelled"
    assert tracer_pid(lab.server_pid()) == 0
    # the target runs on: a workload still completes with consistent counts
    w = lab.workloads()[0]
    r = w.run({"groups": 2, "ids_per_group": 100, "cache_pages": 50}, WorkloadControl())
    assert r.counts["encrypted"] == {"Insert": 200, "Delete": 100, "Update": 100, "Select": 100}


def test_window_on_an_idle_target_times_out_cleanly(lab):
    window = CaptureWindow(lab.server_pid(), DECRYPT,
                           CaptureLimits(max_captures=5, max_seconds=30, first_hit_timeout=1.0), "sqlcipher",
                           lambda c: None)
    summary = window.run()
    assert summary.captures == 0 and summary.reason == "timeout"
    assert "no decrypt hit" in summary.error
    assert tracer_pid(lab.server_pid()) == 0
