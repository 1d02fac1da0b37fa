"""Redaction table: every recipe of every engine, through a recorded session and the HTML report.

Each recipe's captures are made as that recipe produces them (entry-only recipes
have ``after=b""``), with real page bytes on the side(s) that can hold plaintext:
a SQLite table leaf, a PostgreSQL heap page, Oracle's block 5/907 from the
recorded fixture. Masked, the report must show none of those bytes (hex of any
16-byte window, the marker text, the decoded row values); asked for, it must.
"""

from __future__ import annotations

import html
import random
import sqlite3
import struct
import time
from pathlib import Path

import pytest

from tdescope.app.engines import discover_engines
from tdescope.app.events import PageCapture
from tdescope.app.report.model import build_report, render_html
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.reader import SessionReader
from tdescope.app.session.meta import SessionMeta

DATA = Path(__file__).parent / "data" / "oracle"
MARKER = "TDSMARK-4111-1111-1111-1111"
PGNO = {"sqlcipher": 2, "postgres": 0, "pg-tde": 0, "oracle": 907}

#: recipe key -> what its (before, after) buffers hold: "plain" (may hold decrypted bytes),
#: "cipher", or "" (nothing copied). A new recipe must be listed here.
SHAPES = {
    "sqlcipher.page_decrypt": ("cipher", "plain"),
    "sqlcipher.page_encrypt": ("plain", "cipher"),
    "postgres.pgp-decrypt": ("cipher", "plain"),
    "postgres.evp-decrypt": ("cipher", "plain"),
    # mdread: at entry the buffer holds whatever page was there before; at return the page read
    "postgres.page-read": ("plain", "plain"),
    "pg_tde.tuple-decrypt": ("cipher", "plain"),  # the tuple in the shared buffer, then the row
    "pg_tde.block-decrypt": ("cipher", "plain"),  # page-level pg_tde: in place, ciphertext then the page
    "oracle.block_decrypted": ("plain", ""),  # kcbchk_ctx at entry: the decrypted block
    "oracle.block_encrypted": ("plain", ""),  # kcbzvb fires for every block read, TDE tablespace or not
    "oracle.block_copy": ("plain", "plain"),  # a non-TDE block is plaintext on both sides of the copy
    "oracle.kgce_dec": ("cipher", "plain"),
    "oracle.wait_begin": ("", ""),
    "oracle.wait_end": ("", ""),
    "oracle.tbsblk_decrypt_call": ("", ""),
    "oracle.encryption_check": ("", ""),
}

ENGINES, _ = discover_engines()
CASES = [pytest.param(name, recipe, id=recipe.key)
         for name in ("sqlcipher", "postgres", "pg-tde", "oracle") for recipe in ENGINES[name].probe_recipes()]


def _sqlite_leaf(tmp: Path) -> bytes:
    """Page 2 of a real SQLite file: a table leaf whose rows hold the marker."""
    path = tmp / "plain.db"
    with sqlite3.connect(path) as db:
        db.execute("PRAGMA page_size = 4096")
        db.execute("CREATE TABLE cards (id INTEGER PRIMARY KEY, holder TEXT, number TEXT)")
        db.executemany("INSERT INTO cards (holder, number) VALUES (?, ?)",
                       [(f"Holder {i} {MARKER}", f"{MARKER}-{i:04d}") for i in range(12)])
    db.close()
    return path.read_bytes()[4096:8192]


def _pg_heap_page() -> bytes:
    """An 8 KB PostgreSQL heap page with one tuple whose text attribute is the marker."""
    text = MARKER.encode()
    tuple_ = struct.pack("<IIIHHHHHB", 731, 0, 0, 0, 0, 1, 1, 0x0902, 24) + b"\x00"
    tuple_ += bytes([((len(text) + 1) << 1) | 1]) + text
    upper = 8192 - ((len(tuple_) + 7) // 8 * 8)
    page = bytearray(8192)
    struct.pack_into("<IIHHHHHHI", page, 0, 0, 0x1A2B3C4D, 0, 0, 28, upper, 8192, 8192 | 4, 0)
    struct.pack_into("<I", page, 24, upper | (1 << 15) | (len(tuple_) << 17))
    page[upper:upper + len(tuple_)] = tuple_
    return bytes(page)


def _oracle_block() -> bytes:
    from tdescope.plugins.oracle.blockdump import parse_blockdump_file

    return parse_blockdump_file(DATA / "blockdump_tde_907.trc")[1].memory


def _pages(tmp: Path) -> dict[str, bytes]:
    return {"sqlcipher": _sqlite_leaf(tmp), "postgres": _pg_heap_page(), "pg-tde": _pg_heap_page(),
            "oracle": _oracle_block()}


def _buffer(kind: str, engine: str, recipe, pages) -> bytes:
    if kind == "":
        return b""
    if kind == "cipher":
        return random.Random(recipe.key).randbytes(len(pages[engine]))
    if recipe.key.startswith("postgres.") and recipe.key != "postgres.page-read":
        return f"card {MARKER} expires 12/29 ".encode() * 8  # a pgcrypto value, not a page
    return pages[engine]


def _secrets(plain: bytes, decoder, pgno: int) -> tuple[list[str], list[str]]:
    """(hex strings of every 16-byte window with some variety, texts) that must stay hidden."""
    windows = {plain[i:i + 16] for i in range(0, max(len(plain) - 15, 0))}
    hexes = [" ".join(f"{b:02x}" for b in w) for w in windows if len(set(w)) >= 4]
    texts = [MARKER] if MARKER.encode() in plain else []
    decoded = decoder.decode(plain, pgno) if plain else None
    for row in decoded.records if decoded else ():
        texts += [str(v).strip("'") for v in row if isinstance(v, str) and len(str(v).strip("'")) >= 4]
    return hexes, texts


@pytest.mark.parametrize("engine_name, recipe", CASES)
@pytest.mark.parametrize("include", [False, True], ids=["masked", "included"])
def test_report_shows_plaintext_only_when_asked(tmp_path, engine_name, recipe, include):
    assert recipe.key in SHAPES, f"say in SHAPES which buffers of {recipe.key} may hold plaintext"
    engine = ENGINES[engine_name]
    decoder = engine.page_decoder()
    pages = _pages(tmp_path)
    before_kind, after_kind = SHAPES[recipe.key]
    before = _buffer(before_kind, engine_name, recipe, pages)
    after = _buffer(after_kind, engine_name, recipe, pages)
    cap = PageCapture(time.time(), 1, recipe.symbols[0], recipe.direction, PGNO[engine_name], before, after, 800.0, engine_name)
    path = tmp_path / "s.tds"
    with SessionRecorder(path, SessionMeta.collect(engine_name, engine.label)) as rec:
        rec.record(cap)
    with SessionReader(path) as reader:
        page = html.unescape(render_html(build_report(reader, decoder, include_plaintext=include)))
    plains = [b for b, kind in ((before, before_kind), (after, after_kind)) if kind == "plain"]
    for plain in plains:
        hexes, texts = _secrets(plain, decoder, PGNO[engine_name])
        if include:
            first = " ".join(f"{b:02x}" for b in plain[:16])
            assert first in page, "the plaintext's first bytes are missing from a report that includes them"
            for row in decoder.decode(plain, PGNO[engine_name]).records[:8]:  # the report shows 8 rows
                for value in row:
                    if isinstance(value, str):
                        assert value.strip("'")[:50] in page, "a decoded value is missing from the report"
        else:
            shown = [h for h in hexes if h in page]
            assert not shown, f"{len(shown)} plaintext windows of {recipe.key} in a masked report, e.g. {shown[0]}"
            leaked = [t for t in texts if t in page]
            assert not leaked, f"plaintext text of {recipe.key} in a masked report: {leaked[:3]}"


@pytest.mark.parametrize("engine_name, recipe", CASES)
def test_recipe_says_which_side_is_plaintext(engine_name, recipe):
    from tdescope.app.events import Direction

    assert Direction(recipe.direction)  # every direction in use is a documented Direction
    before_kind, after_kind = SHAPES[recipe.key]
    cap = PageCapture(0.0, 1, "f", recipe.direction, 1, b"in", b"out" if recipe.after else b"",
                      plaintext_side=recipe.side.value)
    for side, kind in (("before", before_kind), ("after", after_kind)):
        if kind:  # "" copies no bytes: nothing to mask
            assert cap.holds_plaintext(side) == (kind == "plain"), side


@pytest.mark.parametrize("direction, side, before, after, plaintext, ciphertext", [
    ("decrypt", "", b"C", b"P", b"P", b"C"),  # files without plaintext_side: the default rule
    ("decrypt", "", b"P", b"", b"P", b""),  # entry-only
    ("encrypt", "", b"P", b"C", b"P", b"C"),
    ("read", "", b"old", b"P", b"P", b""),
    ("copy", "", b"P", b"P", b"P", b""),
    ("decrypt", "after", b"C", b"", b"", b"C"),  # did not return inside the window: still ciphertext
    ("decrypt", "before", b"P", b"", b"P", b""),
    ("decrypt", "both", b"P", b"", b"P", b""),
])
def test_plaintext_and_ciphertext_one_rule(direction, side, before, after, plaintext, ciphertext):
    cap = PageCapture(0.0, 1, "f", direction, 1, before, after, plaintext_side=side)
    assert (cap.plaintext, cap.ciphertext) == (plaintext, ciphertext)
    withheld = cap.without_plaintext()
    assert plaintext not in (withheld.before, withheld.after) or not plaintext
    assert withheld.ciphertext == ciphertext and withheld.side == cap.side


def test_the_report_chooses_captures_that_show_something(tmp_path):
    """pgcrypto's packet headers (1-byte buffers) come first in a watch; the report shows a long one (one per
    kind of buffer), never a buffer too short to judge; a session of short ones alone shows one, saying so."""
    engine = ENGINES["postgres"]
    path = tmp_path / "s.tds"
    t = time.time()
    with SessionRecorder(path, SessionMeta.collect("postgres", engine.label)) as rec:
        for i in range(8):
            rec.record(PageCapture(t + i, i + 1, "pgp_cfb_decrypt", "decrypt", -1, b"\x9c", b"\x01", 1.0, "postgres",
                                   "after"))
        for i in range(8, 12):
            value = f"card {MARKER} {i}".encode() * 4
            rec.record(PageCapture(t + i, i + 1, "pgp_cfb_decrypt", "decrypt", -1, random.randbytes(len(value)),
                                   value, 1.0, "postgres", "after"))
    with SessionReader(path) as reader:
        report = build_report(reader, engine.page_decoder(), include_plaintext=True)
    assert [c.title.split(":")[0] for c in report.captures] == ["Capture #9"]
    assert all(c.before_verdict != "too short to judge" for c in report.captures)
    short = tmp_path / "short.tds"
    with SessionRecorder(short, SessionMeta.collect("postgres", engine.label)) as rec:
        for i in range(3):
            rec.record(PageCapture(t + i, i + 1, "pgp_cfb_decrypt", "decrypt", -1, b"\x9c", b"\x01", 1.0, "postgres",
                                   "after"))
    with SessionReader(short) as reader:
        alone = build_report(reader, engine.page_decoder(), include_plaintext=True)
    assert [(c.title.split(":")[0], c.why) for c in alone.captures] == [
        ("Capture #1", "a short buffer (1 B): nothing longer was captured")]
    assert "page -1" not in render_html(report)  # no page number: none shown
