"""What a stopping probe (gdb, all-stop) costs a many-threaded target, said before anything stops it.

gdb in all-stop mode stops every thread of the target together: for the whole
attach and arm (measured on mariadbd with 15-17 threads: 0.25-1.1 s, against a
25 ms stop burst), and again at every probe hit. Non-stop mode does not help
the attach (gdb stops each thread as it attaches it, and reads the executable's
symbols meanwhile: 0.24 s measured, one thread then held 0.7 s). So a target
with more than one thread is refused unless the user accepts the stops
(``--accept-stop``, ``CaptureLimits.stops.accept_stop``); the refusal says the cost,
measured just now on a decoy process of tdescope's own, never on the target.
"""

from __future__ import annotations

import subprocess

from tdescope.app.errors import UserError
from tdescope.app.system.child_env import child_env
from tdescope.app.system.threadstops import ThreadStops, thread_ids

__all__ = ["StopBucket", "measure_attach_stop", "refuse_many_threads"]


def measure_attach_stop(gdb_path: str | None = None) -> float | None:
    """Seconds a one-thread decoy process (``sleep``) stays stopped while gdb attaches to it the way
    the backend does (no library symbols), as ``/proc`` shows it; None when it cannot be measured."""
    from tdescope.app.gdb.mi import GdbSession

    decoy = subprocess.Popen(["sleep", "60"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             start_new_session=True, env=child_env())
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


class StopBucket:
    """The stop budget's leaky bucket over a running total of stopped seconds (the most stopped thread's,
    from /proc): it fills with the stopped time, drains at ``duty`` of wall time and holds ``burst_s``.

    A total can grow by no more than the wall time between two feeds: a sampler that caught up after a
    delay is not charged twice, and a 100 % budget never overflows.
    """

    def __init__(self, duty: float, burst_s: float) -> None:
        self.duty, self.burst_s = duty, burst_s
        self.debt = 0.0
        self._total: float | None = None
        self._at = 0.0

    def start(self, total_s: float, now: float) -> None:
        """Count from here: ``total_s`` stopped so far is not charged (the arming stop, reported apart)."""
        self.debt, self._total, self._at = 0.0, total_s, now

    @property
    def started(self) -> bool:
        return self._total is not None

    def feed(self, total_s: float, now: float) -> float | None:
        """Charge the growth of ``total_s`` since the last feed; the seconds until the probe may re-arm
        when the bucket overflowed, else None."""
        if self._total is None:
            self.start(total_s, now)
            return None
        wall = max(0.0, now - self._at)
        felt = min(max(0.0, total_s - self._total), wall)
        self.debt = max(0.0, self.debt + felt - wall * self.duty)
        self._total, self._at = total_s, now
        return self.debt / self.duty if self.debt > self.burst_s else None
