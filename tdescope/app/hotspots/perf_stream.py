"""One long-lived perf pipeline: ``perf record -o -`` piped into one ``perf script -i -``.

Why one pipeline rather than a ``perf script`` per window: each ``perf script`` loads the symbols and
the DWARF unwind tables of every DSO the target maps before it prints its first sample. With one per
1 s window the observers took 18-20 % of a core whatever the rate or the stack copy, 12.6 % with 2 s
windows (``bench/results/observe_choices.md``): the cost followed the number of windows. A single
``perf script`` reading the pipe loads them once and then only unwinds.

Samples come with ``CLOCK_MONOTONIC`` timestamps (``perf record --clockid``), the clock of
:func:`time.monotonic`, so windows are cut by sample time
(:class:`~tdescope.app.hotspots.time_windows.WindowCutter`). perf record writes what its ring
buffers hold only when they are half full; :meth:`PerfPipeline.ping` (``ping`` on perf record's
``--control`` fd) makes it write what it has now, and the metronome
(:mod:`~tdescope.app.hotspots.perf_tick`, also in perf record's ``-p`` list) gives perf script a
next batch every tick, so a lightly busy or bursty target's samples come through within a few ticks.

Both perf processes run niced in sessions of their own (a Ctrl+C aimed at tdescope does not cut
them); each has a reaper (:func:`~tdescope.app.system.reaper.reap_with_me`), so a killed workbench
leaves neither behind. Nothing goes to disk.
"""

from __future__ import annotations

import array
import fcntl
import functools
import os
import subprocess
import sys
import termios
import threading
from collections.abc import Iterator

from tdescope.app.hotspots import perf_tick  # imported, not only run: the agent's zipapp carries it
from tdescope.app.hotspots.perf_script import Sample, iter_perf_script
from tdescope.app.system.child_env import PERF, PYTHON, child_env
from tdescope.app.system.reaper import Reaper, reap_with_me

__all__ = ["PERF_SCRIPT_FIELDS", "PerfPipeline"]

# pid/tid in every header (the default layout drops pid); symoff so the
# disassembly heat works from symbol offsets. --no-inline keeps perf script
# from running addr2line on every frame, which is what makes it slow.
PERF_SCRIPT_FIELDS = "comm,pid,tid,time,period,event,ip,sym,symoff,dso"
#: The pipe from perf record to perf script is widened to this (the kernel's default, 64 KiB, is four
#: DWARF samples): perf script may fall behind for a moment without perf record blocking on it.
PIPE_BYTES = 1 << 20
_F_SETPIPE_SZ = 1031  # fcntl.F_SETPIPE_SZ, named in Python 3.10+ only on some builds


@functools.cache
def _has_control() -> bool:
    """Whether this perf record takes ``--control`` (perf 5.10 and later); asked once."""
    try:
        usage = subprocess.run(["perf", "record", "-h"], capture_output=True, text=True, timeout=10,
                               env=child_env(PERF))
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "--control" in usage.stdout + usage.stderr


def _pending(fd: int) -> int:
    """Bytes waiting to be read in pipe ``fd`` (0 when it is closed)."""
    buf = array.array("i", [0])
    try:
        fcntl.ioctl(fd, termios.FIONREAD, buf)
    except OSError:
        return 0
    return buf[0]


class PerfPipeline:
    """``perf record -p PID RECORD_ARGS -o -`` into ``perf script -i -``; parsed samples out.

    Parameters
    ----------
    pid : int
        The target process.
    record_args : list of str
        How perf record samples (``-F``, ``-e``, ``--call-graph``...); the pipeline adds the pids,
        the clock, the control fd and the output.
    tick_s : float
        The metronome's period.
    """

    def __init__(self, pid: int, record_args: list[str], tick_s: float) -> None:
        self.pid = pid
        self.record_args = list(record_args)
        self.tick_s = tick_s
        self.ticker: subprocess.Popen | None = None
        #: True when the metronome runs and perf record watches it.
        self.ticking = False
        self.record: subprocess.Popen | None = None
        self.script: subprocess.Popen | None = None
        #: What each perf said on stderr (its first 50 non-empty lines), for the error message.
        self.record_lines: list[str] = []
        self.script_lines: list[str] = []
        self._ctl: int | None = None  # our end of perf record's control pipe
        self._reapers: list[Reaper] = []
        self._closing = threading.Lock()  # stop() and the sampler thread may both end the pipeline
        self._toggled = threading.Event()  # perf record said "Events enabled/disabled" (set_sampling)

    def start(self) -> None:
        """Start the metronome and both perfs (returns at once; :attr:`record` may still be attaching)."""
        # It ends at EOF on its stdin, which only we hold: with us, or when the target has gone.
        self.ticker = subprocess.Popen(
            [sys.executable, "-m", perf_tick.__name__, str(self.tick_s)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True, env=child_env(PYTHON))
        assert self.ticker.stdout is not None
        self.ticking = self.ticker.stdout.readline().strip() == b"ready"
        self.ticker.stdout.close()
        pids = f"{self.pid},{self.ticker.pid}" if self.ticking else str(self.pid)
        # else it could not start: sample without it (a bursty target's samples then come a burst late)
        ctl_read, ctl_write = os.pipe()
        # an older perf has no --control: its samples then come when its buffers fill (or the cap)
        control = ["--control", f"fd:{ctl_read}"] if _has_control() else []
        try:
            self.record = subprocess.Popen(
                ["nice", "-n", "19", "perf", "record", "-p", pids, *self.record_args,
                 "--clockid", "CLOCK_MONOTONIC", *control, "-o", "-"],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                start_new_session=True, pass_fds=(ctl_read,), env=child_env(PERF))
        except BaseException:
            os.close(ctl_write)
            raise
        finally:
            os.close(ctl_read)
        self._ctl = ctl_write
        os.set_blocking(ctl_write, False)  # a stalled perf record never blocks the window thread
        self._reapers.append(reap_with_me(self.record.pid))
        assert self.record.stdout is not None
        try:
            fcntl.fcntl(self.record.stdout.fileno(), _F_SETPIPE_SZ, PIPE_BYTES)
        except OSError:
            pass  # above /proc/sys/fs/pipe-max-size: the default pipe works, with less slack
        # niced: the observers yield the CPU to the database they observe.
        self.script = subprocess.Popen(
            ["nice", "-n", "19", "perf", "script", "-i", "-", "-F", PERF_SCRIPT_FIELDS, "--no-inline"],
            stdin=self.record.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            start_new_session=True, env=child_env(PERF))
        self._reapers.append(reap_with_me(self.script.pid))
        for proc, lines in ((self.record, self.record_lines), (self.script, self.script_lines)):
            threading.Thread(target=self._read_stderr, args=(proc, lines), name="perf-stderr",
                             daemon=True).start()

    def _read_stderr(self, proc: subprocess.Popen, lines: list[str]) -> None:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = (raw.decode(errors="replace") if isinstance(raw, bytes) else raw).strip()
            if line.startswith("Events "):
                self._toggled.set()
                continue  # "Events disabled/enabled": perf's answer to set_sampling, not a fault to report
            if line and len(lines) < 50:
                lines.append(line)

    def samples(self) -> Iterator[Sample]:
        """perf script's samples as they come; ends when perf script does (or is killed)."""
        assert self.script is not None and self.script.stdout is not None and self.ticker is not None
        ticker = self.ticker.pid
        return (s for s in iter_perf_script(self.script.stdout) if s.pid != ticker)

    def target_gone(self) -> None:
        """The target has exited: end the metronome, so perf record ends and perf script prints the rest."""
        ticker = self.ticker
        if ticker is not None and ticker.stdin is not None and not ticker.stdin.closed:
            try:
                ticker.stdin.close()
            except OSError:
                pass

    def ping(self) -> None:
        """Ask perf record to write what its ring buffers hold now (no-op once it has gone)."""
        with self._closing:
            if self._ctl is None:
                return
            try:
                os.write(self._ctl, b"ping\n")
            except (BlockingIOError, BrokenPipeError, OSError):
                pass  # full (perf record is behind: it has data to write anyway) or perf record ended

    def set_sampling(self, on: bool, timeout: float = 2.0) -> bool:
        """Turn perf record's events on or off in the kernel (``enable``/``disable`` on its control fd) and
        wait up to ``timeout`` s for perf to say it did ("Events enabled"/"Events disabled" on its stderr);
        both perfs keep running, perf script keeps its symbols and unwind tables. False when perf record
        has no control fd (perf before 5.10), has gone, or did not answer in time."""
        with self._closing:
            if self._ctl is None or not _has_control():
                return False
            self._toggled.clear()
            try:
                os.write(self._ctl, b"enable\n" if on else b"disable\n")
            except OSError:
                return False
        return self._toggled.wait(timeout)

    def idle(self) -> bool:
        """True when nothing waits in either pipe (perf record -> perf script -> us)."""
        record, script = self.record, self.script
        if record is None or script is None or record.stdout is None or script.stdout is None:
            return True
        try:
            return _pending(record.stdout.fileno()) == 0 and _pending(script.stdout.fileno()) == 0
        except ValueError:  # closed: the pipeline is gone, nothing more will come
            return True

    def kill(self, timeout: float = 1.0) -> None:
        """End both perfs (SIGKILL: harmless to the target, the kernel closes its events with perf's
        fds), close the pipes, release the reapers. Idempotent."""
        for proc in (self.record, self.script, self.ticker):
            if proc is not None and proc.poll() is None:
                try:
                    proc.kill()
                except ProcessLookupError:
                    pass
        self.wait(timeout)
        self.close()

    def wait(self, timeout: float) -> None:
        """Wait up to ``timeout`` s for each perf (and the metronome) to end."""
        for proc in (self.record, self.script, self.ticker):
            if proc is not None:
                try:
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    pass

    def close(self) -> None:
        """Close our pipe ends and release the reapers (they end what still runs). Idempotent."""
        with self._closing:
            ctl, self._ctl = self._ctl, None
            reapers, self._reapers = self._reapers, []
            if ctl is not None:
                os.close(ctl)
            if self.record is not None and self.record.stdout is not None:
                self.record.stdout.close()
            if self.ticker is not None and self.ticker.stdin is not None:
                try:
                    self.ticker.stdin.close()
                except OSError:
                    pass
        for reaper in reapers:
            reaper.release()

    def close_output(self) -> None:
        """Close perf script's output, once :meth:`samples` has been read to its end."""
        if self.script is not None and self.script.stdout is not None:
            self.script.stdout.close()
