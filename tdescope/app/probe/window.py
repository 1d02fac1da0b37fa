"""Capture windows: arm a probe recipe in a live process, collect page pairs, disarm.

A :class:`CaptureWindow` owns one gdb session for one bounded window. It
attaches, loads the gdb-side helper (``app/gdb/_probe_helper.py``), arms the
recipe, lets the target run, and tails the spool file that the helper appends
"before" and "after" frames to. It disarms and detaches on every way out:
limits reached, cancel, target exit, gdb death, error, and interpreter exit.
"""

from __future__ import annotations

import atexit
import dataclasses
import json
import os
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass

from tdescope.app.system.elf import resolve_in_process
from tdescope.app.engines.api import ArgRef, ProbeRecipe
from tdescope.app.errors import UserError
from tdescope.app.events import CaptureWindowState, PageCapture
from tdescope.app.gdb.allowlist import HELPER_PATH
from tdescope.app.gdb.guard import start_guard as _start_guard
from tdescope.app.gdb.guard import stop_guard as _stop_guard
from tdescope.app.gdb.guard import update_guard as _update_guard
from tdescope.app.gdb.mi import GdbError, GdbSession
from tdescope.app.system.procstat import process_state
from tdescope.app.probe.spool import FramePairs, SpoolReader

__all__ = ["BUSY_FRACTION", "LAB_STOP_BUDGET", "CaptureLimits", "CaptureSummary", "CaptureWindow", "stop_budget"]

_live_windows: "weakref.WeakSet[CaptureWindow]" = weakref.WeakSet()
#: Seconds between the "armed" progress states that carry the live stopped time.
PROGRESS_S = 0.5
#: Cost of one breakpoint stop and resume through ptrace, measured on these machines
#: (DESIGN.md: ~0.25 ms); gdb's Python callback time is measured and added per hit.
STOP_OVERHEAD_S = 0.00025
#: The default stop budget: the share of wall time a target may spend stopped in probes.
BUSY_FRACTION = 0.01
#: Stop budget for a lab process the workbench started itself: nobody else's work
#: waits on it, so a class sees captures stream instead of arriving in bursts.
LAB_STOP_BUDGET = {"max_busy_fraction": 0.5, "max_burst_s": 0.5}


@dataclass(frozen=True, slots=True)
class CaptureLimits:
    """Bounds of one capture window.

    Attributes
    ----------
    max_captures : int
        Pages to capture before disarming (1..100000).
    max_seconds : float
        Wall-clock length of the window once armed.
    max_busy_fraction : float
        The stop budget, a duty cycle: the share of wall time the target may
        spend stopped in probe hits (default 1 %). Each hit is charged the
        measured copy time plus :data:`STOP_OVERHEAD_S` per stop. Over budget, the
        window pauses: the breakpoint leaves the target's code until the budget
        has been paid back by running time, then it re-arms.
    max_burst_s : float
        How much stopped time a burst may use before the window pauses (default
        25 ms: about 40 page captures back to back).
    first_hit_timeout : float or None
        Give up when nothing was captured this long after arming.
    watchdog_s : float
        Detach when the target stays stopped longer than this while armed.
    max_hits_per_s : int
        The hit-rate cap: more probe hits than this within one second disarm the
        window (default 1000: at ~0.25 ms a stop, a burst can never hold the target
        stopped more than about a quarter of that second, even in a long window
        whose stop budget is large).
    """

    max_captures: int = 200
    max_seconds: float = 30.0
    max_busy_fraction: float = BUSY_FRACTION
    max_burst_s: float = 0.025
    first_hit_timeout: float | None = None
    watchdog_s: float = 0.25
    max_hits_per_s: int = 1000

    def __post_init__(self) -> None:
        if not 1 <= self.max_captures <= 100_000:
            raise UserError(f"capture count must be between 1 and 100000, not {self.max_captures}")
        if not 0 < self.max_seconds <= 3600:
            raise UserError(f"capture window must be between 0 and 3600 seconds, not {self.max_seconds}")
        if not 0 < self.max_busy_fraction <= 1:
            raise UserError("stop budget must be a fraction between 0 and 1")
        if not 0.001 <= self.max_burst_s <= 10:
            raise UserError(f"stop burst must be between 0.001 and 10 seconds, not {self.max_burst_s}")
        if not 0.01 <= self.watchdog_s <= 10:
            raise UserError(f"watchdog must be between 0.01 and 10 seconds, not {self.watchdog_s}")
        if not 1 <= self.max_hits_per_s <= 1_000_000:
            raise UserError(f"hit-rate cap must be between 1 and 1000000 hits/s, not {self.max_hits_per_s}")
        if self.first_hit_timeout is not None and not 0 < self.first_hit_timeout <= 3600:
            raise UserError(f"first-hit timeout must be between 0 and 3600 seconds, not {self.first_hit_timeout}")


@dataclass(frozen=True, slots=True)
class CaptureSummary:
    """How a window ended. ``arming_stop_s``: how long the target was stopped while
    gdb attached and armed (before the first resume). ``guard``: what the guard
    did when gdb died while armed (``{"restored": N, "fast_ms": ...}``), else None."""

    captures: int
    reason: str
    armed_symbol: str | None
    locations: tuple[str, ...]
    stopped_s: float
    elapsed_s: float
    error: str | None = None
    arming_stop_s: float = 0.0
    guard: dict | None = None


def stop_budget(own_target: bool, fraction: float | None = None) -> dict:
    """:class:`CaptureLimits` keywords for the stop budget: 1 % of wall time in 25 ms
    bursts, or :data:`LAB_STOP_BUDGET` for a target the workbench started itself
    (``EngineSession.own_target``). ``fraction`` (the user's ``--stop-budget``) wins."""
    budget = dict(LAB_STOP_BUDGET) if own_target else {"max_busy_fraction": BUSY_FRACTION}
    if fraction:
        budget["max_busy_fraction"] = fraction
    return budget


def _ref(ref: ArgRef | None) -> dict | None:
    return None if ref is None else dataclasses.asdict(ref)


def at_entry(recipe: ProbeRecipe) -> bool:
    """True when the recipe reads registers and stack only: it breaks at the first instruction."""
    refs = (recipe.before, recipe.after, recipe.length, recipe.pgno, recipe.condition[0] if recipe.condition else None)
    return all(r is None or r.name is None for r in refs)


def recipe_spec(recipe: ProbeRecipe, limits: CaptureLimits, spool: str) -> dict:
    """The JSON spec the gdb-side helper arms from."""
    uses_registers_only = at_entry(recipe)
    return {
        "symbols": list(recipe.symbols),
        "at_entry": uses_registers_only,  # registers hold the ABI arguments only at the first instruction
        "before": _ref(recipe.before),
        "after": _ref(recipe.after),
        "length": _ref(recipe.length),
        "pgno": _ref(recipe.pgno),
        "condition": [_ref(recipe.condition[0]), recipe.condition[1]] if recipe.condition else None,
        "max_length": recipe.max_length,
        "max_captures": limits.max_captures,
        "max_seconds": limits.max_seconds,
        "duty": limits.max_busy_fraction,
        "burst_s": limits.max_burst_s,
        "max_hits_per_s": limits.max_hits_per_s,
        "stop_overhead_s": STOP_OVERHEAD_S,
        "allow_pending": recipe.library is not None,
        "spool": spool,
    }


class CaptureWindow:
    """One bounded capture window on one process.

    Parameters
    ----------
    pid : int
        The target process.
    recipe : ProbeRecipe
        What to break on and which buffers to copy.
    limits : CaptureLimits
        Bounds of the window.
    engine : str
        Engine name stamped on each capture.
    on_capture : callable
        Called (on the window's thread) with each completed :class:`PageCapture`.
    on_state : callable, optional
        Called with :class:`CaptureWindowState` when the window arms, disarms or fails.
    gdb_path : str, optional
        gdb to use.

    Notes
    -----
    :meth:`run` blocks; call it from a worker thread. :meth:`cancel` may be called
    from any thread and returns at once; the window disarms within ~50 ms.
    """

    def __init__(
        self,
        pid: int,
        recipe: ProbeRecipe,
        limits: CaptureLimits,
        engine: str,
        on_capture: Callable[[PageCapture], None],
        on_state: Callable[[CaptureWindowState], None] | None = None,
        gdb_path: str | None = None,
    ) -> None:
        self.pid = int(pid)
        self.recipe = recipe
        self.limits = limits
        self.engine = engine
        self._on_capture = on_capture
        self._on_state = on_state or (lambda _s: None)
        self._gdb_path = gdb_path
        self._cancel = threading.Event()
        self._gdb: GdbSession | None = None
        self.armed = threading.Event()
        self._symbol = ""

    def cancel(self) -> None:
        """Ask the window to disarm and detach now."""
        self._cancel.set()

    def _capture(self, seq: int, ts: float, pgno: int, before: bytes, after: bytes, stop_us: float) -> PageCapture:
        return PageCapture(ts=ts, seq=seq, symbol=self._symbol, direction=self.recipe.direction, pgno=pgno,
                           before=before, after=after, stop_us=stop_us, engine=self.engine,
                           plaintext_side=self.recipe.side.value)

    def run(self) -> CaptureSummary:
        """Attach, arm, collect until a limit, cancel or exit; always disarm and detach."""
        if not os.path.exists(f"/proc/{self.pid}"):
            raise UserError(f"pid {self.pid} is gone (no such process)")
        t_start = time.monotonic()
        workdir = tempfile.mkdtemp(prefix="tdescope-probe-")
        spool = os.path.join(workdir, "spool.bin")
        open(spool, "wb").close()
        reader = SpoolReader(spool)
        pairs = FramePairs(reader, self._capture, entry_only=self.recipe.after is None)
        armed_symbol: str | None = None
        captures = 0
        stopped = 0.0
        reason = "cancelled"
        locations: tuple[str, ...] = ()
        error: str | None = None
        arming_stop = 0.0
        guard: subprocess.Popen | None = None
        guard_report: dict | None = None
        gdb = self._gdb = GdbSession(self._gdb_path)
        _live_windows.add(self)
        try:
            resolved = None
            if at_entry(self.recipe):
                # find the address before attaching: gdb then loads no library symbols while
                # the target is stopped, and a process without the function is never stopped
                resolved = _resolve(self.pid, self.recipe)
                if resolved is None and self.recipe.library is None:
                    names = " or ".join(self.recipe.symbols)
                    raise UserError(f"pid {self.pid} does not use {self.engine}: symbol {names} not found")
            gdb.start()
            if resolved is not None:
                gdb.command("-gdb-set auto-solib-add off")
            t_attach = time.monotonic()
            gdb.attach(self.pid)
            gdb.console_command(f"source {HELPER_PATH}")
            spec_path = os.path.join(workdir, "spec.json")
            with open(spec_path, "w") as fh:
                spec = recipe_spec(self.recipe, self.limits, spool)
                spec["address"] = resolved.address if resolved is not None else None
                json.dump(spec, fh)
            n_console = len(gdb.console)
            gdb.console_command(f'python _tdescope_probe.arm("{spec_path}")')
            result = _last_json(gdb.console[n_console:])
            if not result or not result.get("armed"):
                names = " or ".join(self.recipe.symbols)
                raise UserError(f"pid {self.pid} does not use {self.engine}: symbol {names} not found")
            armed_symbol = self._symbol = result["armed"]
            locations = tuple(result.get("locations") or ())
            guard = _start_guard(self.pid, gdb._proc.pid if gdb._proc else None, locations)
            gdb.resume()
            arming_stop = time.monotonic() - t_attach
            self.armed.set()
            armed_at = time.monotonic()
            self._on_state(CaptureWindowState(time.time(), "armed", message=f"{armed_symbol} in pid {self.pid}"))
            reason = ""
            stopped_since = 0.0
            progress_at = armed_at
            resume_at = 0.0  # when a window paused by the stop budget re-arms
            guarded = set(int(a, 16) for a in locations)
            while not reason:
                if self._cancel.is_set():
                    reason = "cancelled"
                    break
                for capture in pairs.drain(self.limits.max_captures):
                    self._on_capture(capture)
                captures, stopped = pairs.captures, pairs.stopped_total_s
                if pairs.closed_reason:
                    reason = pairs.closed_reason
                if captures >= self.limits.max_captures:
                    reason = reason or "limit: max captures"
                    break
                if not pairs.return_sites <= guarded:
                    guarded |= pairs.return_sites
                    _update_guard(guard, guarded)
                now = time.monotonic()
                if pairs.paused_for is not None:
                    resume_at, pairs.paused_for = now + pairs.paused_for, None
                    progress_at = now
                    self._on_state(CaptureWindowState(
                        time.time(), "paused", captures, stopped,
                        f"stop budget ({self.limits.max_busy_fraction:.0%} of wall time) spent: "
                        f"breakpoint out of pid {self.pid}, re-arms in {resume_at - now:.1f} s"))
                elif resume_at and now >= resume_at:
                    resume_at = 0.0
                    gdb.console_command("python _tdescope_probe.resume()", timeout=5.0)
                    progress_at = 0.0  # say "armed" again now
                if now - progress_at >= PROGRESS_S and not resume_at:
                    # the stopped time, live: the GUI's status bar shows it while armed
                    progress_at = now
                    self._on_state(CaptureWindowState(time.time(), "armed", captures, stopped,
                                                      f"{armed_symbol} in pid {self.pid}"))
                if (
                    self.limits.first_hit_timeout is not None
                    and captures == 0
                    and not pairs.pending
                    and now - armed_at > self.limits.first_hit_timeout
                ):
                    reason = "timeout"
                    error = f"no {self.recipe.direction} hit on {armed_symbol} within {self.limits.first_hit_timeout:g} s"
                    break
                if now - armed_at > self.limits.max_seconds:
                    reason = reason or "limit: max seconds"
                    break
                if process_state(self.pid) == "t":  # the main thread sits in a ptrace stop
                    stopped_since = stopped_since or now
                    if now - stopped_since > self.limits.watchdog_s:
                        reason = f"watchdog: target stopped over {self.limits.watchdog_s * 1000:.0f} ms"
                        break
                else:
                    stopped_since = 0.0
                rec = gdb.wait_event(_is_exit_or_sigint, timeout=0.02)
                if rec is not None and _is_sigint(rec):
                    # someone sent the target SIGINT (PostgreSQL's query cancel): gdb stopped it
                    # and keeps SIGINT for itself; deliver it, as if nobody were attached
                    gdb.console_command("signal SIGINT &", timeout=5.0)  # "&": gdb must not wait for a stop
                    self._on_state(CaptureWindowState(time.time(), "armed", captures, stopped,
                                                      f"passed a SIGINT on to pid {self.pid}"))
                    continue
                if rec is not None:
                    reason = "target exited" if rec.type != "gdb-exit" else "gdb exited"
                    gdb.pid = None if rec.type != "gdb-exit" else gdb.pid
                    if rec.type != "gdb-exit":
                        error = f"pid {self.pid} exited while armed ({captures} pages captured)"
                    break
        except UserError as exc:
            error = str(exc)
            reason = "error"
        finally:
            self.armed.clear()
            if gdb.alive and gdb.pid is not None:
                try:
                    if gdb.interrupt(timeout=3.0):
                        n_console = len(gdb.console)
                        gdb.console_command("python _tdescope_probe.disarm()", timeout=5.0)
                        said = _last_json(gdb.console[n_console:]) or {}
                        pairs.helper_busy_s = max(pairs.helper_busy_s, float(said.get("busy_s") or 0.0))
                except GdbError:
                    pass  # close() below still deletes breakpoints and detaches
            gdb.close()
            guard_report = _stop_guard(guard)
            if guard_report and guard_report.get("restored"):
                error = (f"gdb died while armed: the guard put back {guard_report['restored']} breakpoint "
                         f"byte(s) in pid {self.pid} within {guard_report.get('ms', 0):.1f} ms")
            _live_windows.discard(self)
            # frames written between the last read and the disarm
            for capture in pairs.drain(self.limits.max_captures):
                self._on_capture(capture)
            captures, stopped = pairs.captures, pairs.stopped_total_s
            reader.close()
            for name in ("spool.bin", "spec.json"):
                try:
                    os.unlink(os.path.join(workdir, name))
                except OSError:
                    pass
            try:
                os.rmdir(workdir)
            except OSError:
                pass
            state = "failed" if error else "disarmed"
            self._on_state(
                CaptureWindowState(time.time(), state, captures, stopped, error or reason)
            )
        return CaptureSummary(
            captures, reason, armed_symbol, locations, stopped, time.monotonic() - t_start, error, arming_stop,
            guard_report,
        )


def _resolve(pid: int, recipe: ProbeRecipe):
    """:func:`resolve_in_process`, with a process we may not read or that is gone as one line."""
    try:
        return resolve_in_process(pid, recipe.symbols, recipe.library)
    except PermissionError:
        # /proc/PID/maps needs the same ptrace access that attaching does
        raise UserError(f"ptrace not permitted on pid {pid} (another user's process): run tdescope "
                        "as the process owner or as root") from None
    except (FileNotFoundError, ProcessLookupError):
        raise UserError(f"pid {pid} is gone (no such process)") from None


def _is_exit(rec) -> bool:
    if rec.type == "gdb-exit":
        return True
    if rec.type == "notify" and rec.message == "thread-group-exited":
        return True
    return rec.type == "notify" and rec.message == "stopped" and isinstance(rec.payload, dict) and str(
        rec.payload.get("reason", "")
    ).startswith("exited")


def _is_sigint(rec) -> bool:
    return (rec.type == "notify" and rec.message == "stopped" and isinstance(rec.payload, dict)
            and rec.payload.get("reason") == "signal-received" and rec.payload.get("signal-name") == "SIGINT")


def _is_exit_or_sigint(rec) -> bool:
    return _is_exit(rec) or _is_sigint(rec)


def _last_json(lines: list[str]) -> dict | None:
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                continue
    return None


@atexit.register
def _disarm_all_on_exit() -> None:
    """Interpreter exit: every live window detaches (gdb would too, on EOF)."""
    for window in list(_live_windows):
        window.cancel()
        if window._gdb is not None:
            window._gdb.close(timeout=2.0)
