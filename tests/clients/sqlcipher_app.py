"""A stand-in for "an application someone else wrote" that uses the sqlcipher3 wheel.

Usage: python sqlcipher_app.py DBPATH ROUNDS [STOPFILE]. Prints its pid, waits
for a line on stdin, then scans its encrypted table ROUNDS times through a tiny
page cache (so every scan decrypts its pages again), checking every row, and
finally prints "ok N" with the number of rows it read and verified. It stops
early, still verifying, once STOPFILE exists. Like a database session, it takes
SIGINT as "cancel": it counts them and reports "ok N cancels K" when it had any.
"""

import os
import signal
import sys

import sqlcipher3

MARKER = "tdescope-marker-row"


def main() -> int:
    path, rounds = sys.argv[1], int(sys.argv[2])
    stop = sys.argv[3] if len(sys.argv) > 3 else None
    conn = sqlcipher3.connect(path)
    conn.execute("PRAGMA key = 'app-secret'")
    conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT)")
    if conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0:
        conn.executemany("INSERT INTO items (label) VALUES (?)", [(f"{MARKER}-{i:05d}",) for i in range(3000)])
        conn.commit()
    conn.execute("PRAGMA cache_size = 8")
    cancels = []
    signal.signal(signal.SIGINT, lambda *_: cancels.append(1))
    print(os.getpid(), flush=True)
    sys.stdin.readline()
    total = 0
    for _ in range(rounds):
        rows = conn.execute("SELECT id, label FROM items ORDER BY id").fetchall()
        assert len(rows) == 3000, "rows missing"
        assert all(label == f"{MARKER}-{i - 1:05d}" for i, label in rows), "data corrupted"
        total += len(rows)
        if stop and os.path.exists(stop):
            break
    print(f"ok {total}" + (f" cancels {len(cancels)}" if cancels else ""), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
