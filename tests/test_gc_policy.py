"""The workbench's cyclic GC runs on the GUI thread only (issue #27, item 15).

Each run is a subprocess with a timeout: the deadlock this guards against (``~QObject`` on a worker's
collection waiting for the GIL, the GUI thread holding it while waiting for Qt's mutex) would hang it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

CLIENT = Path(__file__).with_name("clients") / "gc_storm.py"


def _storm(mode: str, seconds: float = 2.0) -> dict:
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    out = subprocess.run([sys.executable, str(CLIENT), mode, str(seconds)], capture_output=True, text=True,
                         timeout=120, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_dropped_plot_items_are_collected_on_the_gui_thread_only_while_a_thread_allocates():
    got = _storm("policy")
    assert got["dropped"] > 0
    assert got["worker"] == 0  # no collection ever ran on the allocating thread
    assert got["gui"] > 0 and got["alive"] == 0  # the GUI thread's timer freed every dropped item


def test_without_the_policy_the_allocating_thread_collects():
    """The hazard the policy removes, shown with plain objects: Python's own collector runs on whichever
    thread allocates (with Qt items there, a run died of SIGSEGV once)."""
    got = _storm("plain", seconds=1.0)
    assert got["worker"] > 0 and got["alive"] == 0
