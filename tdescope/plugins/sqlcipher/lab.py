"""The workbench side of the SQLCipher lab: starts the worker and talks to it.

The worker (``lab_worker.py``) is a separate process so that gdb attaches to
it and never to the workbench. The lab's key is random per lab and is handed
over on the worker's stdin, never in argv.
"""

from __future__ import annotations

import json
import queue
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from typing import Any

from tdescope.app.engines.api import Inventory, WaitSource, Workload, WorkloadControl
from tdescope.app.errors import ConnectionLost, UserError
from tdescope.app.events import PhaseTiming, WorkloadProgress, WorkloadResult
from tdescope.app.system.child_env import PYTHON, child_env
from tdescope.plugins.sqlcipher.workloads import DEFAULTS

__all__ = ["LabSession"]


class LabSession:
    """A running lab worker: the target process and its two databases.

    ``own_target``: the worker is ours alone, so probes may stop it more than a
    production process (``tdescope.app.probe.limits.LAB_STOP_BUDGET``).

    Parameters
    ----------
    folder : str, optional
        Where the databases live; a fresh temporary folder (removed on close) when omitted.
    """

    own_target = True

    def __init__(self, folder: str | None = None) -> None:
        self._own_folder = folder is None
        self.folder = folder or tempfile.mkdtemp(prefix="tdescope-lab-")
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "tdescope.plugins.sqlcipher.lab_worker", self.folder],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
            start_new_session=True,  # Ctrl+C in a terminal reaches the workbench, not the target
            env=child_env(PYTHON),  # an allowlist: no password of the user's reaches the lab
        )
        self._events: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, name="lab-reader", daemon=True)
        self._reader.start()
        self._send({"key": secrets.token_urlsafe(24)})
        ready = self._next(timeout=60)
        if ready.get("ev") != "ready":
            err = (self._proc.stderr.read() if self._proc.poll() is not None else "") or str(ready)
            self.close()
            raise UserError(f"the SQLCipher lab worker did not start: {err.strip().splitlines()[-1:]}")

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                self._events.put(json.loads(line))
            except ValueError:
                continue
        self._events.put({"ev": "exit", "code": self._proc.wait()})

    def _send(self, obj: Mapping[str, Any]) -> None:
        try:
            self._proc.stdin.write(json.dumps(obj) + "\n")
            self._proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise UserError("the SQLCipher lab worker has exited") from None

    def _next(self, timeout: float) -> dict:
        try:
            ev = self._events.get(timeout=timeout)
        except queue.Empty:
            raise UserError("the SQLCipher lab worker did not answer in time") from None
        if ev.get("ev") == "exit":
            self._events.put(ev)
            raise ConnectionLost(f"the SQLCipher lab worker crashed (exit status {ev.get('code')})")
        return ev

    # -- EngineSession ---------------------------------------------------------
    def server_pid(self) -> int:
        """The worker's pid: the process that encrypts and decrypts the lab's pages."""
        return self._proc.pid

    def inventory(self) -> Inventory:
        """Cipher, key, page and file facts read from the worker's connections."""
        with self._lock:
            self._send({"cmd": "inventory"})
            while True:
                ev = self._next(timeout=30)
                if ev.get("ev") == "inventory":
                    return Inventory("sqlcipher", tuple(tuple(r) for r in ev["rows"]))

    def workloads(self) -> list[Workload]:
        """A/B DML (seed 000) and cold vs warm read (seed 002)."""
        return [
            Workload(
                "ab_dml",
                "A/B DML (seed 000)",
                "Per group: bulk insert, delete odd groups, update even groups, select back, commit; "
                "on the encrypted database, then on its plain twin, with the same parameters.",
                dict(DEFAULTS["ab_dml"]),
                lambda params, control: self._run("ab_dml", params, control),
                sides=("encrypted", "plain"),
            ),
            Workload(
                "cold_warm",
                "Cold vs warm read (seed 002)",
                "A full scan with an empty page cache, then a warm one, encrypted and plain: "
                "encryption costs when pages move from disk into memory.",
                dict(DEFAULTS["cold_warm"]),
                lambda params, control: self._run("cold_warm", params, control),
                sides=("encrypted", "plain"),
            ),
        ]

    def wait_source(self) -> WaitSource | None:
        """SQLite has no wait interface of its own; the OS view covers it."""
        return None

    def close(self) -> None:
        """Stop the worker and remove the lab folder when it was a temporary one."""
        if self._proc.poll() is None:
            try:
                self._send({"cmd": "cancel"})
                self._send({"cmd": "quit"})
            except UserError:
                pass
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        for stream in (self._proc.stdin, self._proc.stdout, self._proc.stderr):
            try:
                stream.close()
            except (OSError, ValueError):
                pass
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- workloads -------------------------------------------------------------
    def _run(self, name: str, params: Mapping[str, Any], control: WorkloadControl) -> WorkloadResult:
        with self._lock:
            self._send({"cmd": "run", "workload": name, "params": dict(params)})
            cancel_sent = False
            while True:
                if control.cancelled and not cancel_sent:
                    self._send({"cmd": "cancel"})
                    cancel_sent = True
                try:
                    ev = self._events.get(timeout=0.1)
                except queue.Empty:
                    continue
                kind = ev.get("ev")
                if kind == "progress":
                    control.emit(
                        WorkloadProgress(float(ev.get("ts") or time.time()), name, ev["side"], ev["done"], ev["total"], ev.get("message", ""))
                    )
                elif kind == "result":
                    return _result(ev)
                elif kind == "error":
                    raise UserError(f"workload {name} failed: {ev.get('message')}")
                elif kind == "exit":
                    self._events.put(ev)
                    raise ConnectionLost(f"the SQLCipher lab worker crashed (exit status {ev.get('code')})")

    def __enter__(self) -> "LabSession":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _result(ev: dict) -> WorkloadResult:
    timings = tuple(
        PhaseTiming(side, phase, float(sec)) for side, phases in ev["timings"].items() for phase, sec in phases.items()
    )
    table: tuple[tuple, ...] = ()
    if ev["workload"] == "cold_warm":
        t = ev["timings"]
        rows = [("", "cold (ms)", "warm (ms)", "cold / warm")]
        for side in t:
            rows.append((side, round(t[side]["cold"] * 1000, 2), round(t[side]["warm"] * 1000, 2),
                         _ratio(t[side]["cold"], t[side]["warm"])))
        if "encrypted" in t and "plain" in t:
            rows.append(("encrypted / plain", _ratio(t["encrypted"]["cold"], t["plain"]["cold"]),
                         _ratio(t["encrypted"]["warm"], t["plain"]["warm"]), ""))
        table = tuple(rows)
        # totals so WorkloadResult.ratio() speaks of the cold scan, where encryption costs
        timings += tuple(PhaseTiming(side, "total", float(t[side]["cold"])) for side in t)
    return WorkloadResult(
        time.time(), ev["workload"], ev["params"], timings, ev["counts"], bool(ev.get("cancelled")), table
    )


def _ratio(a: float, b: float) -> float | str:
    return round(a / b, 2) if b else "n/a"
