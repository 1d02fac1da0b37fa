"""The SQLCipher lab worker: a separate process owning the lab's two databases.

Run as ``python -m tdescope.plugins.sqlcipher.lab_worker DIR``. It is the probe
target: gdb attaches to this process, never to the workbench. The first line
on stdin is ``{"key": ...}`` (the key never appears in argv, so ``ps`` does not
show it). Then one JSON command per line:

- ``{"cmd": "inventory"}`` -> ``{"ev": "inventory", "rows": [...]}``
- ``{"cmd": "run", "workload": NAME, "params": {...}}`` -> progress events,
  then ``{"ev": "result", ...}`` (or ``{"ev": "error", "message": ...}``)
- ``{"cmd": "cancel"}`` stops a running workload at its next statement
- ``{"cmd": "quit"}``

Every reply is one JSON line on stdout.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time

import sqlcipher3

from tdescope.app.engines.api import wanted_sides
from tdescope.app.events import Side
from tdescope.plugins.sqlcipher import workloads

_out_lock = threading.Lock()


def _send(obj: dict) -> None:
    line = json.dumps(obj)
    with _out_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


class Lab:
    """The encrypted database and its plain twin, same schema."""

    def __init__(self, folder: str, key: str) -> None:
        self.paths = {"encrypted": os.path.join(folder, "lab-encrypted.db"),
                      "plain": os.path.join(folder, "lab-plain.db")}
        self._key = key
        self.conns = {side: self.open(side) for side in self.paths}
        for conn in self.conns.values():
            for stmt in workloads.SCHEMA:
                conn.execute(stmt)
            conn.commit()

    def open(self, side: str):
        """A new connection to ``side`` (SQLCipher 4 defaults on the encrypted one)."""
        conn = sqlcipher3.connect(self.paths[side], check_same_thread=False, isolation_level="DEFERRED")
        if side == Side.ENCRYPTED:
            conn.execute("PRAGMA key = " + _quote(self._key))
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # derive the key now
        return conn

    def reopen(self, side: str):
        """Close and reopen ``side`` (an empty page cache)."""
        self.conns[side].close()
        self.conns[side] = self.open(side)
        return self.conns[side]

    def inventory(self) -> list[list[str]]:
        """(section, name, value) rows for the engine panel."""
        enc = self.conns["encrypted"]

        def pragma(name: str) -> str:
            row = enc.execute(f"PRAGMA {name}").fetchone()
            return str(row[0]) if row else ""

        hmac = pragma("cipher_hmac_algorithm")
        hmac_bytes = {"HMAC_SHA1": 20, "HMAC_SHA256": 32, "HMAC_SHA512": 64}.get(hmac, 0)
        use_hmac = pragma("cipher_use_hmac") == "1"
        reserve = 16 + (hmac_bytes if use_hmac else 0)
        reserve += (-reserve) % 16  # SQLCipher rounds the reserve up to the cipher block size
        rows = [
            ["Cipher", "SQLCipher version", pragma("cipher_version")],
            ["Cipher", "Provider", pragma("cipher_provider")],
            ["Cipher", "Provider version", pragma("cipher_provider_version")],
            ["Cipher", "Algorithm", "AES-256-CBC (SQLCipher 4)"],
            ["Key", "Key state", "set (raw key derived; never shown)"],
            ["Key", "KDF algorithm", pragma("cipher_kdf_algorithm")],
            ["Key", "KDF iterations", pragma("kdf_iter")],
            ["Integrity", "HMAC", hmac if use_hmac else "off"],
            ["Page", "Page size", pragma("cipher_page_size")],
            ["Page", "Reserve per page", f"{reserve} bytes (IV 16 + HMAC {hmac_bytes if use_hmac else 0})"],
            ["Page", "Plaintext header", pragma("cipher_plaintext_header_size") + " bytes"],
        ]
        for side, path in self.paths.items():
            conn = self.conns[side]
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            size = os.path.getsize(path) if os.path.exists(path) else 0
            rows.append([f"File ({side})", "Path", path])
            rows.append([f"File ({side})", "File size", f"{size} bytes"])
            rows.append([f"File ({side})", "Page count", str(pages)])
        return rows

    def run(self, name: str, params: dict, cancel: threading.Event) -> dict:
        """Run workload ``name``; returns the result event."""
        merged = {**workloads.DEFAULTS[name], **(params or {})}
        emit = _send
        conns = {side: self.conns[side] for side in wanted_sides(merged, tuple(self.conns))}
        if name == "ab_dml":
            out = workloads.ab_dml(conns, merged, emit, cancel.is_set)
        elif name == "cold_warm":
            out = workloads.cold_warm_read(conns, self.paths, merged, emit, cancel.is_set, self.reopen)
        else:
            raise ValueError(f"unknown workload {name!r}")
        return {"ev": "result", "workload": name, "params": merged, **out}


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    folder = argv[0]
    os.makedirs(folder, exist_ok=True)
    first = sys.stdin.readline()
    key = json.loads(first)["key"] if first.strip() else ""
    lab = Lab(folder, key)
    del key, first
    _send({"ev": "ready", "pid": os.getpid()})
    cancel = threading.Event()
    job: threading.Thread | None = None

    def run_job(name: str, params: dict) -> None:
        try:
            _send(lab.run(name, params, cancel))
        except Exception as exc:  # noqa: BLE001 - reported to the workbench as one line
            _send({"ev": "error", "message": f"{type(exc).__name__}: {exc}"})

    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            _send({"ev": "error", "message": "bad command line"})
            continue
        cmd = msg.get("cmd")
        if cmd == "quit":
            break
        if cmd == "cancel":
            cancel.set()
        elif cmd == "inventory":
            _send({"ev": "inventory", "rows": lab.inventory()})
        elif cmd == "run":
            if job is not None:
                job.join(timeout=1.0)  # a job that just sent its result is still exiting
            if job is not None and job.is_alive():
                _send({"ev": "error", "message": "a workload is already running"})
                continue
            cancel.clear()
            job = threading.Thread(target=run_job, args=(msg.get("workload"), msg.get("params") or {}), daemon=True)
            job.start()
        elif cmd == "ping":
            _send({"ev": "pong", "ts": time.time()})
    cancel.set()
    if job is not None:
        job.join(timeout=10)
    for conn in lab.conns.values():
        conn.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
