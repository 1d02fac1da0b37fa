"""Whether perf can sample here, and which event it samples: asked once, answered in one line.

``perf_event_paranoid``, capabilities, Debian's kernel-matched ``perf`` wrapper and CPUs whose cycle
counter is ``<not supported>`` (VMs) are the usual reasons perf cannot run as the sampler wants.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from tdescope.app.system import runtime_tools
from tdescope.app.system.child_env import PERF, child_env

__all__ = ["check_perf", "perf_event", "run_perf"]


def run_perf(cmd: list[str], timeout: float = 10.0) -> subprocess.CompletedProcess:
    """Run a short perf command with an allowlisted environment, capturing its output."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                          env=child_env(PERF))


_CAP_SYS_PTRACE, _CAP_SYS_ADMIN, _CAP_PERFMON = 19, 21, 38


def _capable(*caps: int) -> bool:
    """True when this process holds any of ``caps`` (root with them dropped does not)."""
    try:
        with open("/proc/self/status") as fh:
            eff = next(int(ln.split()[1], 16) for ln in fh if ln.startswith("CapEff:"))
    except (OSError, StopIteration, ValueError):
        return os.geteuid() == 0
    return any(eff >> cap & 1 for cap in caps)


def check_perf(pid: int | None = None) -> str | None:
    """Whether perf can sample here (and ``pid``, when given).

    Returns
    -------
    str or None
        None when usable, else one line saying what is wrong and the fix.
    """
    if shutil.which("perf") is None:
        return runtime_tools.PERF.missing()
    try:
        paranoid = int(open("/proc/sys/kernel/perf_event_paranoid").read().strip())
    except (OSError, ValueError):
        paranoid = None
    if paranoid is not None and paranoid > 1 and not _capable(_CAP_PERFMON, _CAP_SYS_ADMIN):
        return (
            f"perf_event_paranoid is {paranoid}: run sysctl kernel.perf_event_paranoid=1 "
            "(or run as root)"
        )
    try:
        res = run_perf(["perf", "stat", "-x,", "-e", "cpu-clock", "true"])
    except (OSError, subprocess.TimeoutExpired) as err:
        return f"perf does not run: {err}"
    if res.returncode != 0:
        text = (res.stderr or res.stdout).strip().splitlines()
        # Debian's /usr/bin/perf is a wrapper that fails when no perf matches
        # the running kernel.
        if any("not found for kernel" in ln for ln in text):
            return "perf is not installed for this kernel: apt-get install linux-perf"
        return "perf stat failed: " + (text[-1] if text else f"exit status {res.returncode}")
    if pid is not None:
        if not os.path.exists(f"/proc/{pid}"):
            return f"no process {pid}"
        if not _capable(_CAP_SYS_PTRACE) and os.stat(f"/proc/{pid}").st_uid != os.geteuid():
            return f"process {pid} belongs to another user: run tdescope as root or as that user"
    return None


@functools.cache
def perf_event() -> str:
    """``"cycles"`` when the CPU's cycle counter works here, else ``"cpu-clock"``.

    Detected once per process. ``perf stat`` exits 0 even when an event is
    ``<not supported>`` (as on these VMs), so the verdict comes from its output.
    """
    try:
        res = run_perf(["perf", "stat", "-x,", "-e", "cycles", "true"])
    except (OSError, subprocess.TimeoutExpired):
        return "cpu-clock"
    out = res.stderr + res.stdout
    if res.returncode != 0 or "<not supported>" in out or "<not counted>" in out:
        return "cpu-clock"
    return "cycles"
