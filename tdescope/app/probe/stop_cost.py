"""What a stopping probe (gdb, all-stop) costs a many-threaded target, said before anything stops it.

gdb in all-stop mode stops every thread of the target together: for the whole
attach and arm (measured on mariadbd with 15-17 threads: 0.25-1.1 s, against a
25 ms stop burst), and again at every probe hit. Non-stop mode does not help
the attach (gdb stops each thread as it attaches it, and reads the executable's
symbols meanwhile: 0.24 s measured, one thread then held 0.7 s). So a target
with more than one thread is refused unless the user accepts the stops
(``--accept-stop``, ``CaptureLimits.accept_stop``); the refusal says the cost,
measured just now on a decoy process of tdescope's own, never on the target.
"""

from __future__ import annotations

import subprocess

from tdescope.app.errors import UserError
from tdescope.app.system.threadstops import ThreadStops, thread_ids

__all__ = ["measure_attach_stop", "refuse_many_threads"]


def measure_attach_stop(gdb_path: str | None = None) -> float | None:
    """Seconds a one-thread decoy process (``sleep``) stays stopped while gdb attaches to it the way
    the backend does (no library symbols), as ``/proc`` shows it; None when it cannot be measured."""
    from tdescope.app.gdb.mi import GdbSession

    decoy = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             start_new_session=True)
    meter = ThreadStops(decoy.pid).start()
    try:
        with GdbSession(gdb_path) as gdb:
            gdb.command("-gdb-set auto-solib-add off")
            gdb.attach(decoy.pid)
            gdb.resume()
            gdb.detach()
        return meter.stop().longest_s or None
    except (UserError, OSError):  # gdb missing, too old or refused: the refusal says no figure
        return None
    finally:
        meter.stop()
        decoy.kill()
        decoy.wait()


def refuse_many_threads(pid: int, gdb_path: str | None = None, burst_s: float = 0.025) -> None:
    """UserError, with the cost, when ``pid`` has more than one thread (gdb would stop them all)."""
    threads = len(thread_ids(pid))
    if threads <= 1:
        return
    stop = measure_attach_stop(gdb_path)
    cost = (f"about {stop * 1000:.0f} ms each while gdb attaches (measured now on a one-thread process; "
            f"{threads} × {stop * 1000:.0f} ms = {threads * stop:.1f} s of thread time, more to arm)"
            if stop else "for the whole attach and arm")
    raise UserError(f"gdb stops all {threads} threads of pid {pid} at once: {cost}, and all {threads} at "
                    f"every probe hit, beyond the {burst_s * 1000:.0f} ms stop burst; --accept-stop goes ahead, "
                    f"--backend ebpf stops nothing")
