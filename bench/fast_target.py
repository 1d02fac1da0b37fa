"""Bench target: a SQLCipher scan with no Python per row, so pages decrypt as fast as SQLite can.

Usage: ``python fast_target.py DBPATH STOPFILE``. A 30,000-row encrypted table read with a
tiny page cache (every scan decrypts all ~300 of its pages again) by one aggregate statement per
round, until STOPFILE exists; prints its pid, then ``time.time()`` after each round. It
checks the aggregate every round, so a wrong page would show. The eBPF bench needs a target
that offers tens of thousands of decrypts a second; ``armed_target.py`` verifies rows in Python
and offers a few thousand.
"""

import os
import sys
import time

import sqlcipher3

ROWS = 30000


def main() -> int:
    path, stop = sys.argv[1], sys.argv[2]
    conn = sqlcipher3.connect(path)
    conn.execute("PRAGMA key = 'app-secret'")
    conn.execute("CREATE TABLE IF NOT EXISTS items (id INTEGER PRIMARY KEY, label TEXT)")
    if conn.execute("SELECT count(*) FROM items").fetchone()[0] == 0:
        conn.executemany("INSERT INTO items (label) VALUES (?)", [(f"tdescope-marker-row-{i:05d}",) for i in range(ROWS)])
        conn.commit()
    conn.execute("PRAGMA cache_size = 8")
    want = conn.execute("SELECT sum(length(label)), count(*) FROM items").fetchone()
    print(os.getpid(), flush=True)
    while not os.path.exists(stop):
        got = conn.execute("SELECT sum(length(label)), count(*) FROM items").fetchone()
        assert got == want, "a page read back wrong"
        print(time.time(), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
