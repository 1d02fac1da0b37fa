"""Bench target: the SQLCipher test client's scan, reporting when each round ends.

Usage: ``python armed_target.py DBPATH STOPFILE``. Like
``tests/clients/sqlcipher_app.py`` (same table, key and tiny page cache, so every
scan decrypts all its pages again), but it scans until STOPFILE exists and
prints ``time.time()`` after each round, so the bench can measure the target's
own throughput unarmed and armed without touching the test client.
"""

import os
import sys
import time

import sqlcipher3

MARKER = "tdescope-marker-row"


def main() -> int:
    path, stop = sys.argv[1], sys.argv[2]
    conn = sqlcipher3.connect(path)
    conn.execute("PRAGMA key = 'app-secret'")
    conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT)")
    if conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0:
        conn.executemany("INSERT INTO items (label) VALUES (?)", [(f"{MARKER}-{i:05d}",) for i in range(3000)])
        conn.commit()
    conn.execute("PRAGMA cache_size = 8")
    print(os.getpid(), flush=True)
    while not os.path.exists(stop):
        rows = conn.execute("SELECT id, label FROM items ORDER BY id").fetchall()
        assert len(rows) == 3000, "rows missing"
        print(time.time(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
