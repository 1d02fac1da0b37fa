"""Real InnoDB pages and what the server says about them, made once by a private MariaDB (the lab).

:func:`innodb_pages` starts :class:`~tdescope.plugins.mariadb.lab.MariaLab`, creates tables with known
rows (every common column type, NULLs, empty, long and off-page values; a table big enough for a
level-1 root; an encrypted twin; a page_compressed table), flushes them (``FLUSH TABLES ... FOR
EXPORT``), and keeps the ``.ibd`` bytes, the rows as the server returns them, the data dictionary's
view (``INNODB_SYS_TABLES`` / ``_INDEXES``, ``INNODB_TABLESPACES_ENCRYPTION``), the replies to the
queries :func:`~tdescope.plugins.mariadb.records.index_layouts` makes, and ``innochecksum -D``'s
per-page report. The server is gone before a test runs.

The facts are made once per test process, whichever InnoDB test module asks first. With
``TDESCOPE_TEST_INNODB_PAGES`` naming a file, they are saved there on the first run and read back
afterwards (the mutation driver runs the tests once per mutant; the server starts once).
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import subprocess
from dataclasses import dataclass, field

DB = "pages"
PAGE = 16384
#: Columns of the ``types_*`` tables; the decoder's field names are these.
TYPES = """id INT PRIMARY KEY, ti TINYINT, su SMALLINT UNSIGNED, mi MEDIUMINT, bi BIGINT, dt DATETIME, d DATE,
 ts TIMESTAMP NULL, yr YEAR, db DOUBLE, fl FLOAT, vc VARCHAR(300), vl VARCHAR(20) CHARACTER SET latin1,
 ch CHAR(10), cl CHAR(10) CHARACTER SET latin1, vb VARBINARY(40), tx TEXT, bl BLOB, en ENUM('a','b','c'),
 nn INT NOT NULL, KEY k_vc (vc(20))"""
ROWS = [
    "(1, -5, 65535, -3, -9000000000, '2024-02-29 13:14:15', '2024-02-29', '2024-02-29 01:02:03', 2024, 1.5,"
    " -2.25, 'hello', 'caf\u00e9', 'ab', 'cd', x'00ff', 'text', x'0102', 'b', 7)",
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
    " NULL, 0)",
    "(3, 127, 0, 8388607, 1, '1999-12-31 23:59:59', '1000-01-01', '1970-01-02 00:00:00', 1901, -1e300, 3.5,"
    " REPEAT('x', 300), 'z', '\u00e9\u20ac', '\u00e9', '', REPEAT('y', 200), REPEAT('b', 20000), 'c', -1)",
    "(4, -128, 1, -8388608, -9223372036854775808, '9999-12-31 23:59:59', '9999-12-31', '2038-01-19 03:14:07',"
    " 2155, 0, 0, 'ab  ', '', '', '', x'', '', x'', 'a', 2147483647)",
    "(5, 0, 256, 0, 9223372036854775807, '2000-01-01 00:00:00', '2000-01-01', NULL, 0, 123456.789, -0.5,"
    " 'k\u00e4se', 'x ', 'zz', 'y', x'41', REPEAT('\u00e9', 30), REPEAT(x'00', 100), NULL, -2147483648)",
]
#: ``cs_plain``: CHAR in single-byte collations (latin1 5, 8, 15, 31, 47, 48, 49, 94; ascii 11, 65), a
#: utf8mb4 CHAR (variable-length) and a UNIQUE secondary index; ``nopk_plain`` has no key at all (DB_ROW_ID).
CHARSETS = """id INT PRIMARY KEY, l8 CHAR(5) CHARACTER SET latin1, l5 CHAR(5) COLLATE latin1_german1_ci,
 l15 CHAR(5) COLLATE latin1_danish_ci, l31 CHAR(5) COLLATE latin1_german2_ci, l47 CHAR(5) COLLATE latin1_bin,
 l48 CHAR(5) COLLATE latin1_general_ci, l49 CHAR(5) COLLATE latin1_general_cs, l94 CHAR(5) COLLATE latin1_spanish_ci,
 a11 CHAR(5) CHARACTER SET ascii, a65 CHAR(5) COLLATE ascii_bin, u CHAR(3) CHARACTER SET utf8mb4, n INT,
 UNIQUE KEY u_l48 (l48)"""
CHARSET_ROWS = ["(1, 'caf\u00e9', '\u00e4', '\u00f8', '\u00df', 'ab', '\u00e9t\u00e9', 'Ab', '\u00f1', 'asc', 'b',"
                " '\u20ac', 1)",
                "(2, '', NULL, 'x', 'y ', 'z', NULL, '', '', '', 'a b', 'xyz', NULL)",
                "(3, 'abcde', 'q', NULL, '', '\u00ff', '', NULL, 'e', NULL, '', '', 3)"]
#: ``cs_wide``: CHAR in more single-byte charsets (cp1250, koi8r, greek, latin2), in the two multi-byte
#: charsets whose characters all have one width (ucs2, utf32: fixed-length too), and in two multi-byte
#: collations with ids over 255 whose low byte is a single-byte collation's (577 utf8mb3_myanmar_ci: 65 is
#: ascii_bin; 673 utf16_myanmar_ci: 161 is utf32_icelandic_ci); ``n`` after them shows any misread length.
WIDE = """id INT PRIMARY KEY, c1250 CHAR(4) CHARACTER SET cp1250, k CHAR(4) CHARACTER SET koi8r,
 g CHAR(4) CHARACTER SET greek, l2 CHAR(4) CHARACTER SET latin2, uc CHAR(3) CHARACTER SET ucs2,
 u32 CHAR(2) CHARACTER SET utf32, my CHAR(3) COLLATE utf8mb3_myanmar_ci, u16 CHAR(2) COLLATE utf16_myanmar_ci, n INT"""
WIDE_ROWS = ["(1, 'ab', 'cd', 'ef', 'gh', 'ij', 'k', 'lm', 'no', 1)",
             "(2, '', 'wxyz', NULL, 'abcd', 'abc', 'ab', 'xyz', '', 2)",
             "(3, 'x', NULL, 'q', '', NULL, '', NULL, 'z', NULL)"]
#: Rows of ``big_plain``: enough for several leaf pages under a level-1 root.
BIG_ROWS = 600


@dataclass
class InnoDbPages:
    """What one lab run leaves: page bytes and the server's own view of them.

    Attributes
    ----------
    files : dict
        table -> the whole ``.ibd`` file.
    rows : dict
        table -> {primary key: {column: value as pymysql returns it}}.
    tables : dict
        table -> (space id, table id, row format) from ``INNODB_SYS_TABLES``.
    indexes : dict
        (table, index name) -> (index id, root page number, space id) from ``INNODB_SYS_INDEXES``.
    encryption : dict
        table -> (scheme, current key version) from ``INNODB_TABLESPACES_ENCRYPTION``.
    dictionary : dict
        SQL text -> the rows the server returned (for a replayed :func:`index_layouts`).
    checksum_report : dict
        table -> innochecksum ``-D`` lines: page number -> (page type label, extra info); empty when
        innochecksum is not installed.
    checksum_ok : dict
        table -> innochecksum's exit status checking every page's checksum.
    collations : dict
        collation id -> (name, character set, its MAXLEN) from ``information_schema.COLLATIONS``.
    """

    files: dict = field(default_factory=dict)
    rows: dict = field(default_factory=dict)
    tables: dict = field(default_factory=dict)
    indexes: dict = field(default_factory=dict)
    encryption: dict = field(default_factory=dict)
    dictionary: dict = field(default_factory=dict)
    checksum_report: dict = field(default_factory=dict)
    checksum_ok: dict = field(default_factory=dict)
    collations: dict = field(default_factory=dict)

    def page(self, table: str, pgno: int) -> bytes:
        """Page ``pgno`` of ``table``'s file."""
        return self.files[table][pgno * PAGE:(pgno + 1) * PAGE]

    def pages(self, table: str) -> range:
        """The page numbers of ``table``'s file."""
        return range(len(self.files[table]) // PAGE)


class RecordingConnection:
    """A DB-API connection wrapper that keeps each query's rows (``index_layouts`` is replayed from them)."""

    def __init__(self, conn, log: dict) -> None:
        self._conn, self._log = conn, log

    def cursor(self):
        return _Cursor(self._conn.cursor(), self._log)


class ReplayConnection:
    """Answers the queries a :class:`RecordingConnection` saw, with the rows it saw."""

    def __init__(self, log: dict) -> None:
        self._log = log

    def cursor(self):
        return _Cursor(None, self._log)


class _Cursor:
    def __init__(self, real, log: dict) -> None:
        self._real, self._log, self._rows = real, log, []

    def execute(self, sql, args=None):
        if self._real is not None:
            self._real.execute(sql, args)
            self._log[sql] = list(self._real.fetchall())
        self._rows = self._log[sql]

    def fetchall(self):
        return list(self._rows)

    def fetchone(self):
        return self._rows[0] if self._rows else None


_MADE: list[InnoDbPages] = []  # the facts of this test process: one server for every InnoDB test module


def innodb_pages() -> InnoDbPages:
    """The facts (read-only to the tests), made once per test process; from the cache file when
    ``TDESCOPE_TEST_INNODB_PAGES`` names one that exists."""
    if _MADE:
        return _MADE[0]
    cache = os.environ.get("TDESCOPE_TEST_INNODB_PAGES")
    if cache and os.path.exists(cache):
        with open(cache, "rb") as fh:
            facts = pickle.load(fh)
    else:
        facts = _from_the_server()
        if cache:
            with open(cache, "wb") as fh:
                pickle.dump(facts, fh)
    _MADE.append(facts)
    return facts


def _from_the_server() -> InnoDbPages:
    import pymysql

    from tdescope.plugins.mariadb.lab import MariaLab
    from tdescope.plugins.mariadb.records import index_layouts

    facts = InnoDbPages()
    lab = MariaLab()
    try:
        conn = pymysql.connect(unix_socket=lab.socket, user="root", autocommit=True, charset="utf8mb4")
        cur = conn.cursor()
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"CREATE DATABASE {DB} CHARACTER SET utf8mb4")
        for table, options in (("types_plain", "ENCRYPTED=NO ROW_FORMAT=DYNAMIC"),
                               ("types_compact", "ENCRYPTED=NO ROW_FORMAT=COMPACT"),
                               ("types_enc", "ENCRYPTED=YES ENCRYPTION_KEY_ID=2")):
            cur.execute(f"CREATE TABLE {DB}.{table} ({TYPES}) ENGINE=InnoDB {options}")
            cur.execute(f"INSERT INTO {DB}.{table} VALUES {', '.join(ROWS)}")
        cur.execute(f"CREATE TABLE {DB}.big_plain (id INT PRIMARY KEY, pad VARCHAR(200)) ENCRYPTED=NO")
        cur.execute(f"INSERT INTO {DB}.big_plain SELECT seq, CONCAT('row', seq, REPEAT('.', 140)) "
                    f"FROM {DB}.seq_1_to_{BIG_ROWS}")
        cur.execute(f"CREATE TABLE {DB}.pc_plain (id INT PRIMARY KEY, v VARCHAR(100)) ENCRYPTED=NO PAGE_COMPRESSED=1")
        cur.execute(f"INSERT INTO {DB}.pc_plain SELECT seq, REPEAT(CHAR(97 + seq % 26), 100) FROM {DB}.seq_1_to_50")
        cur.execute(f"CREATE TABLE {DB}.red_plain (id INT PRIMARY KEY, v VARCHAR(10)) "
                    "ENCRYPTED=NO ROW_FORMAT=REDUNDANT")
        cur.execute(f"INSERT INTO {DB}.red_plain VALUES (1, 'one'), (2, 'two')")
        # records over 127 bytes take 2-byte end offsets in REDUNDANT; and a NULL
        cur.execute(f"CREATE TABLE {DB}.red_wide (id INT PRIMARY KEY, v VARCHAR(200), n INT) "
                    "ENCRYPTED=NO ROW_FORMAT=REDUNDANT")
        cur.execute(f"INSERT INTO {DB}.red_wide VALUES (1, REPEAT('w', 150), NULL), (2, NULL, 5)")
        cur.execute(f"CREATE TABLE {DB}.cs_plain ({CHARSETS}) ENCRYPTED=NO")
        cur.execute(f"INSERT INTO {DB}.cs_plain VALUES {', '.join(CHARSET_ROWS)}")
        cur.execute(f"CREATE TABLE {DB}.cs_wide ({WIDE}) ENCRYPTED=NO")
        cur.execute(f"INSERT INTO {DB}.cs_wide VALUES {', '.join(WIDE_ROWS)}")
        cur.execute(f"CREATE TABLE {DB}.nopk_plain (v VARCHAR(10), n INT) ENCRYPTED=NO")
        cur.execute(f"INSERT INTO {DB}.nopk_plain VALUES ('first', 1), (NULL, 2), ('third', NULL)")
        cur.execute("SELECT c.ID, c.COLLATION_NAME, c.CHARACTER_SET_NAME, s.MAXLEN "
                    "FROM information_schema.COLLATIONS c "
                    "JOIN information_schema.CHARACTER_SETS s USING (CHARACTER_SET_NAME)")
        facts.collations = {i: (n, cs, m) for i, n, cs, m in cur.fetchall()}
        tables = ("types_plain", "types_compact", "types_enc", "big_plain", "pc_plain", "red_plain", "cs_plain",
                  "nopk_plain", "red_wide", "cs_wide")
        for table in tables:
            cur.execute(f"SELECT * FROM {DB}.{table}")
            names = [d[0] for d in cur.description]
            facts.rows[table] = {r[0]: dict(zip(names, r)) for r in cur.fetchall()}
        cur.execute("SELECT NAME, SPACE, TABLE_ID, ROW_FORMAT FROM information_schema.INNODB_SYS_TABLES "
                    "WHERE NAME LIKE %s", (f"{DB}/%",))
        facts.tables = {n.split("/")[1]: (s, t, f) for n, s, t, f in cur.fetchall()}
        cur.execute("SELECT t.NAME, i.NAME, i.INDEX_ID, i.PAGE_NO, i.SPACE "
                    "FROM information_schema.INNODB_SYS_INDEXES i "
                    "JOIN information_schema.INNODB_SYS_TABLES t USING (TABLE_ID) WHERE t.NAME LIKE %s", (f"{DB}/%",))
        facts.indexes = {(t.split("/")[1], i): (x, p, s) for t, i, x, p, s in cur.fetchall()}
        index_layouts(RecordingConnection(conn, facts.dictionary))
        cur.execute(f"FLUSH TABLES {', '.join(f'{DB}.{t}' for t in tables)} FOR EXPORT")
        for table in tables:
            path = lab.dir / "data" / DB / f"{table}.ibd"
            facts.files[table] = path.read_bytes()
            facts.checksum_report[table], facts.checksum_ok[table] = _innochecksum(path)
        cur.execute("UNLOCK TABLES")
        # the encryption threads have seen every space by now (each table was just written)
        cur.execute("SELECT NAME, ENCRYPTION_SCHEME, CURRENT_KEY_VERSION "
                    "FROM information_schema.INNODB_TABLESPACES_ENCRYPTION WHERE NAME LIKE %s", (f"{DB}/%",))
        facts.encryption = {n.split("/")[1]: (s, v) for n, s, v in cur.fetchall()}
        conn.close()
    finally:
        lab.close()
    return facts


def _innochecksum(path) -> tuple[dict, int | None]:
    exe = shutil.which("innochecksum")
    if exe is None:
        return {}, None
    dump = subprocess.run([exe, "-D", "/dev/stdout", str(path)], capture_output=True, text=True, timeout=60)
    report = {}
    for m in re.finditer(r"^#::(\d+)\s*\|\s*(.+?)\s*\|\s*(.*)$", dump.stdout, re.M):
        report[int(m.group(1))] = (m.group(2), m.group(3).strip())
    check = subprocess.run([exe, str(path)], capture_output=True, text=True, timeout=60)
    return report, check.returncode
