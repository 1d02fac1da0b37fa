"""Issue #27 item 5's case, before and after: ``capture --backend gdb --allow-critical --count 20`` on a
private mariadbd (17 threads) under back-to-back cold scans, with an outside witness sampling every
thread of the server from /proc every 2 ms (``ThreadStops``), next to what the command's summary says.

Each ROOT is a checkout of tdescope whose CLI is run (``PYTHONPATH=ROOT``); ``--accept-stop`` is passed
to a checkout that knows it. Compare this branch with main::

    git archive main | tar -x -C /tmp/tdescope-main
    .venv/bin/python -m bench.gdb_cli_witness /tmp/tdescope-main . /tmp/tdescope-main .

Prints one JSON line per run. Not part of ``python -m bench`` (it needs a second checkout).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path


def main(roots: list[str]) -> None:
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.system.threadstops import ThreadStops
    from tdescope.plugins.mariadb import ENGINE
    from tdescope.plugins.mariadb import workloads as wl
    from tdescope.plugins.mariadb.lab import LAB_DATABASE, MariaLab

    lab = MariaLab()
    try:
        session = ENGINE.connect(ConnectParams(dsn=f"socket={lab.socket} user=root"))
        conn = session.conn
        wl.prepare_io_path(conn, LAB_DATABASE, rows=2000, evict_rows=60000)
        stop, rates = threading.Event(), []

        def load() -> None:
            while not stop.is_set():
                wl.evict(conn, LAB_DATABASE)
                elapsed, reads = wl.scan(conn, LAB_DATABASE)
                rates.append((time.monotonic(), reads / elapsed))

        loader = threading.Thread(target=load, daemon=True)
        loader.start()
        time.sleep(3)
        for root in roots:
            root = str(Path(root).resolve())
            knows = "accept-stop" in (Path(root) / "tdescope" / "commands" / "_args.py").read_text()
            witness = ThreadStops(lab.pid, 0.002).start()
            t0 = time.monotonic()
            result = subprocess.run(
                [sys.executable, "-m", "tdescope", "capture", "--engine", "mariadb", "--pid", str(lab.pid),
                 "--backend", "gdb", "--allow-critical", "--count", "20", *(["--accept-stop"] if knows else [])],
                capture_output=True, text=True, env={**os.environ, "PYTHONPATH": root}, cwd=root, timeout=300)
            t1 = time.monotonic()
            felt = witness.stop()
            during = [r for t, r in rates if t0 <= t <= t1]
            before = [r for t, r in rates if t < t0][-5:]
            print(json.dumps({
                "root": root, "rc": result.returncode, "said": result.stderr.strip().splitlines()[-1][:400],
                "command_s": round(t1 - t0, 1), "threads": felt.threads,
                "longest_stop_ms": round(felt.longest_s * 1000, 1),
                "most_stopped_ms": round(felt.most_stopped_s * 1000, 1),
                "all_stopped_ms": round(felt.all_stopped_s * 1000, 1),
                "scan_rate_during_over_before": round(sum(during) / len(during) / (sum(before) / len(before)), 2)
                if during and before else None}), flush=True)
            time.sleep(2)
        stop.set()
        loader.join(30)
        session.close()
    finally:
        lab.close()


if __name__ == "__main__":
    main(sys.argv[1:] or ["."])
