"""gdb on a many-threaded server (the MariaDB lab's mariadbd): what the threads felt, from /proc.

The bench's own sampler (``ThreadStops``, every 2 ms) watches every thread of mariadbd while a gdb
window with the production stop budget (25 ms bursts, 1 %, ``accept_stop``) runs during back-to-back
cold scans. Two ways alternate, each round:

* ``helper``: the stop budget as before issue #27 (the gdb-side bucket alone, charging gdb's view:
  copy time + 0.25 ms a stop);
* ``proc``: the same plus the workbench's bucket charged with the most stopped thread's time as
  /proc shows it (the probe is paused from outside when it overflows).

Per window: the arming stop by gdb's clock and by /proc, the most stopped thread's stopped time after
arming against the promise (25 ms + 1 % of the armed time), and the scan rate next to an unobserved
scan of the same round (ratios within one round). Also timed: a refusal without ``accept_stop``
(the decoy measurement), during which /proc must see no thread of the server stopped.

Run alone: ``python -m bench.bench_gdb_threads [--quick]`` (JSON on stdout). The machine is shared:
read the ratios, and the spread over rounds.
"""

from __future__ import annotations

import json
import statistics
import sys
import threading
import time

from bench._report import goal

goal("gdb_threads_arming_stop_ms", "mariadbd: longest stop of any thread while gdb attached and armed (/proc), ms")
goal("gdb_threads_felt_over_promise_helper", "most stopped thread after arming ÷ (25 ms + 1 %), helper's bucket only")
goal("gdb_threads_felt_over_promise_proc", "same, with the /proc-charged bucket", "<= 1",
     lambda v: v <= 1.0)
goal("gdb_threads_refusal_stopped_ms", "threads of the server seen stopped while a window refused it, ms", "0",
     lambda v: v == 0)


def run(quick: bool) -> dict:
    from tdescope.app.engines.api import ConnectParams
    from tdescope.app.probe import gdb_backend
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.app.system.threadstops import ThreadStops
    from tdescope.plugins.mariadb import ENGINE
    from tdescope.plugins.mariadb import workloads as wl
    from tdescope.plugins.mariadb.lab import LAB_DATABASE
    from tdescope.plugins.mariadb.recipes import recipes

    rounds, seconds = (2, 4.0) if quick else (4, 8.0)
    session = ENGINE.connect(ConnectParams(lab=True))
    conn, db, pid = session.conn, LAB_DATABASE, session.server_pid()
    charge = gdb_backend.GdbHandle._charge_felt
    out: dict[str, list] = {k: [] for k in ("arming_gdb_ms", "arming_proc_ms", "felt_helper", "felt_proc",
                                             "felt_helper_ms", "felt_proc_ms", "rate_helper", "rate_proc",
                                             "pauses_helper", "pauses_proc")}
    threads = 0
    try:
        wl.prepare_io_path(conn, db, rows=2000, evict_rows=60000)
        # a refusal: nothing may stop
        meter = ThreadStops(pid, 0.002).start()
        t0 = time.monotonic()
        refused = CaptureWindow(pid, recipes()[0], CaptureLimits(max_captures=5, max_seconds=5), "mariadb",
                                lambda _c: None).run()
        refusal_s = time.monotonic() - t0
        refusal = meter.stop()
        for _ in range(rounds):
            t0, pages = time.monotonic(), 0
            while time.monotonic() - t0 < 2.0:
                wl.evict(conn, db)
                pages += wl.scan(conn, db)[1]
            unobserved = pages / (time.monotonic() - t0)
            for how in ("helper", "proc"):
                gdb_backend.GdbHandle._charge_felt = charge if how == "proc" else (lambda self: None)
                states: list = []
                limits = CaptureLimits(max_captures=100000, max_seconds=seconds, stops=StopLimits(accept_stop=True))
                window = CaptureWindow(pid, recipes()[0], limits, "mariadb", lambda _c: None,
                                       on_state=states.append)
                summary: list = []
                thread = threading.Thread(target=lambda w=window: summary.append(w.run()))
                thread.start()
                window.armed.wait(60)
                time.sleep(0.05)
                meter = ThreadStops(pid, 0.002).start()  # after the arming stop: the hits' stops only
                armed_at, pages = time.monotonic(), 0
                while thread.is_alive():
                    wl.evict(conn, db)
                    pages += wl.scan(conn, db)[1]
                thread.join(60)
                armed_s = time.monotonic() - armed_at
                felt = meter.stop()
                s = summary[0]
                threads = max(threads, s.threads)
                promise = limits.stops.max_burst_s + limits.stops.max_busy_fraction * armed_s
                out["arming_gdb_ms"].append(round(s.arming_stop_s * 1000, 1))
                out["arming_proc_ms"].append(round(s.longest_stop_s * 1000, 1))
                out[f"felt_{how}"].append(round(felt.most_stopped_s / promise, 2))
                out[f"felt_{how}_ms"].append(round(felt.most_stopped_s * 1000, 1))
                out[f"rate_{how}"].append(round(pages / armed_s / unobserved, 2))
                out[f"pauses_{how}"].append(sum(1 for x in states if x.state == "paused"))
    finally:
        gdb_backend.GdbHandle._charge_felt = charge
        session.close()
    med = statistics.median
    return {
        "gdb_threads_threads": threads,
        "gdb_threads_arming_stop_ms": med(out["arming_proc_ms"]),
        "gdb_threads_felt_over_promise_helper": med(out["felt_helper"]),
        "gdb_threads_felt_over_promise_proc": med(out["felt_proc"]),
        "gdb_threads_refusal_stopped_ms": round(refusal.longest_s * 1000, 1),
        "gdb_threads_refusal": {"error": refused.error, "seconds": round(refusal_s, 2)},
        "gdb_threads_rounds": out,
        "gdb_threads_window_s": seconds,
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
