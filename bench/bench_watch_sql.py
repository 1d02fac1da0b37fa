"""What watch mode runs on a server: statements and errors in a ``log_statement=all`` log per recording.

A PostgreSQL cluster of its own (tests/pgcluster.py) logs every statement; a role with ``pg_monitor``
and no table privileges runs ``tdescope record --dsn ... --target-pid PID --captures 0 --no-hotspots``
for ``--seconds`` against an application backend decrypting a table the role may not read. Reported:
statements the role ran (all, distinct, per second), engine-wait polls per second, statements that read
a user table, and ERROR lines. ``--code DIR`` runs another checkout's ``tdescope`` (e.g. an export of
main) for a before/after comparison on the same cluster.

Run alone: ``python -m bench.bench_watch_sql [--seconds 10] [--code DIR]`` (JSON on stdout).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pgcluster import PgCluster  # noqa: E402

WATCHER = "watcher"


def _statements(log: str) -> tuple[list[str], list[str]]:
    statements, errors = [], []
    for line in log.splitlines():
        m = re.match(r"\[([^\]]*)\] (\w+):\s+(.*)", line)
        if not m:
            continue
        who, level, text = m.groups()
        if level == "ERROR":
            errors.append(text)
        elif level == "LOG" and who == WATCHER and (s := re.match(r"(?:statement|execute [^:]+):\s(.*)", text)):
            statements.append(s.group(1))
        elif level == "STATEMENT" and who == WATCHER:  # one refused before it ran (permission denied)
            statements.append(text)
    return statements, errors


def run(seconds: float, code: str | None) -> dict:
    import psycopg

    cluster = PgCluster().start()
    stop = threading.Event()
    try:
        cluster.psql("ALTER SYSTEM SET log_statement = 'all'")
        cluster.psql("ALTER SYSTEM SET log_line_prefix = '[%u] '")
        cluster.psql("SELECT pg_reload_conf()")
        cluster.psql(f"CREATE ROLE {WATCHER} LOGIN; GRANT pg_monitor TO {WATCHER}; CREATE TABLE cards (id int, "
                     "pan bytea); INSERT INTO cards SELECT g, pgp_sym_encrypt('4111-' || g, 'k') "
                     "FROM generate_series(1, 50) g")
        app = psycopg.connect(cluster.dsn(), autocommit=True)
        pid = app.info.backend_pid

        def loop() -> None:
            try:
                while not stop.is_set():
                    app.execute("SELECT sum(length(pgp_sym_decrypt(pan, 'k'))) FROM cards").fetchone()
            except psycopg.Error:
                pass  # the cluster stops under it

        threading.Thread(target=loop, daemon=True).start()
        log = cluster.root / "server.log"
        start = log.stat().st_size
        # another checkout: its package first, ahead of this venv's editable-install finder
        launch = ["-c", "import runpy, sys; sys.meta_path[:] = [f for f in sys.meta_path if 'editable' not in "
                  f"repr(f)]; sys.path.insert(0, {code!r}); sys.argv[0] = 'tdescope'; "
                  "runpy.run_module('tdescope', run_name='__main__', alter_sys=True)"] if code else ["-m", "tdescope"]
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([sys.executable, *launch, "record", "--engine", "postgres", "--dsn",
                                   cluster.dsn(user=WATCHER), "--target-pid", str(pid), "--seconds", str(seconds),
                                   "--captures", "0", "--no-hotspots", "-o", f"{tmp}/w.tds"],
                                  capture_output=True, text=True, timeout=seconds + 120,
                                  stdin=subprocess.DEVNULL)
        with open(log, errors="replace") as fh:
            fh.seek(start)
            statements, errors = _statements(fh.read())
        stop.set()
        polls = [s for s in statements if "FROM pg_stat_activity WHERE pid = $1" in s and "wait_event" in s]
        user_tables = [s for s in statements if s.startswith("SELECT substring(")]  # the pgcrypto column sampling
        return {"code": code or "this checkout", "ran": done.stderr.strip().splitlines()[-1:], "seconds": seconds,
                "exit": done.returncode,
                "statements": len(statements), "distinct": len(set(statements)),
                "statements_per_s": round(len(statements) / seconds, 2), "polls_per_s": round(len(polls) / seconds, 2),
                "user_table_reads": len(user_tables), "errors": len(errors),
                "first_error": errors[0] if errors else ""}
    finally:
        stop.set()
        cluster.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--code", help="a checkout whose tdescope package runs instead (PYTHONPATH)")
    args = parser.parse_args()
    print(json.dumps(run(args.seconds, args.code)))


if __name__ == "__main__":
    main()
