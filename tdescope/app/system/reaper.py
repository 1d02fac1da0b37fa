"""Children that must not outlive the workbench: a small watcher ends them when the workbench dies.

``perf``, a lab's database server and the like run in sessions of their own (a
Ctrl+C in the terminal must reach the workbench only), so nothing ends them if
the workbench is killed. :func:`reap_with_me` starts ``python -m
tdescope.app.system.reaper PID START SIGNAL GRACE [DIR]`` with a pipe on its
stdin that only the workbench holds. EOF on that pipe (the workbench released
it, ended, or was killed) makes the watcher send SIGNAL to PID, if it is still
the same process (its start time), wait up to GRACE seconds, SIGKILL it if it
must, and remove DIR. A normal stop ends the child first, then calls
:meth:`Reaper.release`: the watcher finds nothing to do.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time

from tdescope.app.system.child_env import PYTHON, child_env

__all__ = ["Reaper", "end_child", "reap_with_me"]


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields[19] if fields[0] != "Z" else None  # field 22 of stat: the start time; a zombie is gone


class Reaper:
    """The watcher of one child; :meth:`release` once the child has been ended normally."""

    def __init__(self, proc: subprocess.Popen | None) -> None:
        self._proc = proc

    def release(self) -> None:
        """Close the pipe: the watcher ends (and ends the child if it still runs). Safe twice."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.stdin.close()
            proc.wait(35)
        except (OSError, subprocess.TimeoutExpired):
            proc.kill()


def reap_with_me(pid: int, sig: int = signal.SIGKILL, grace_s: float = 0.0, folder: str | None = None) -> Reaper:
    """Make sure ``pid`` ends (``sig``, then SIGKILL after ``grace_s``) and ``folder`` goes when we do."""
    start = _start_time(pid)
    if start is None:
        return Reaper(None)
    args = [sys.executable, "-m", "tdescope.app.system.reaper", str(pid), start, str(int(sig)), str(grace_s)]
    proc = subprocess.Popen(args + ([folder] if folder else []), stdin=subprocess.PIPE,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
                            env=child_env(PYTHON))
    return Reaper(proc)


def end_child(proc: subprocess.Popen | None, sig: int, timeout: float, folder: str | os.PathLike | None = None,
              guard: Reaper | None = None) -> None:
    """End a child the way its program wants (``sig``; SIGKILL after ``timeout`` s), remove ``folder`` and
    release its ``guard``: the normal stop that :func:`reap_with_me` stands in for. Nothing to do for None
    or an ended child; the caller drops its references first, so a second close is a no-op."""
    if proc is not None and proc.poll() is None:
        proc.send_signal(sig)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
    if folder is not None:
        shutil.rmtree(folder, ignore_errors=True)
    if guard is not None:
        guard.release()  # the child is gone: the watcher finds nothing to do and exits


def _main(argv: list[str]) -> int:
    pid, start, sig, grace = int(argv[0]), argv[1], int(argv[2]), float(argv[3])
    folder = argv[4] if len(argv) > 4 else None
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    while sys.stdin.buffer.read(4096):
        pass  # nothing is ever written: EOF is the message
    if _start_time(pid) == start:
        try:
            os.kill(pid, sig)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _start_time(pid) == start:
                time.sleep(0.05)
            if _start_time(pid) == start:
                os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if folder:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(_main(sys.argv[1:]))
