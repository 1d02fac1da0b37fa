"""Malformed input never raises: every parser of text or bytes that comes from outside, fuzzed.

Seeds are real input (perf script text as perf printed it, Oracle traces and
block dumps in tests/data/oracle, real PostgreSQL pages from the test cluster);
each is truncated at random points, has bytes flipped and lines shuffled, and is
mixed with random bytes. A parser may find nothing; it must not raise. The MI
path is fuzzed through a real GdbSession talking to a "gdb" that prints garbage.
"""

from __future__ import annotations

import os
import random
import stat
from pathlib import Path

import pytest

from conftest import assert_one_line_error, run_tdescope, tracer_pid
from tdescope.app.hotspots.perf_script import fold, parse_perf_script
from tdescope.app.gdb.mi import GdbError, GdbSession
from tdescope.plugins.oracle.blockdump import parse_blockdump
from tdescope.plugins.oracle.blockdump_render import blockdump_to_page
from tdescope.plugins.oracle.tkprof import format_tkprof
from tdescope.plugins.oracle.trace import parse_trace, trace_report_json
from tdescope.plugins.postgres._tuples import PgColumn
from tdescope.plugins.postgres.pages import PgPageDecoder
from tdescope.plugins.postgres.pgp import parse_pgp_message

ORACLE = Path(__file__).parent / "data" / "oracle"
ROUNDS = 300

PERF_TEXT = (
    "hot  7901   398.961059:   10101010 cpu-clock: \n"
    "\t            116a hot_loop+0x21 (/tmp/hot)\n"
    "\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
    "python  8100/8100    449.479846:    2004008 cpu-clock: \n"
    "\t          5825c0 sha512_block_data_order_avx2+0xb00 (/x/_sqlite3.so)\n"
    "\ta831c66d2db43210 [unknown] ([unknown])\n"
    "\n"
    "hotdel  8259   467.349676:   10101010 cpu-clock:ppp: \n"
    "\t            116a [unknown] (/tmp/hotdel (deleted))\n"
    "\n"
    "             hot  8284   471.639997:   10101010 cpu-clock:      5639279ee16a hot_loop+0x21 (/tmp/hot)\n"
    "cxx2 13175/13175   892.886619:   10101010 cpu-clock: \n"
    "\t            1234 std::vector<int, std::allocator<int> >::push_back(int const&)+0x10 (/tmp/cxx2)\n"
)


def mutations(seed: str, rng: random.Random, rounds: int = ROUNDS):
    """Truncations, flipped characters, shuffled and duplicated lines, random text, of ``seed``."""
    lines = seed.splitlines(keepends=True)
    for n in range(rounds):
        mode = n % 5
        if mode == 0:
            yield seed[: rng.randrange(len(seed) + 1)]
        elif mode == 1:
            chars = list(seed)
            for _ in range(rng.randrange(1, 40)):
                chars[rng.randrange(len(chars))] = chr(rng.choice([0, 9, 10, 32, 35, 40, 41, 58, 61, 0xFFFD,
                                                                   rng.randrange(33, 127)]))
            yield "".join(chars)
        elif mode == 2:
            picked = [rng.choice(lines) for _ in range(rng.randrange(1, len(lines) + 1))]
            yield "".join(picked)
        elif mode == 3:
            yield rng.randbytes(rng.randrange(0, 600)).decode("latin-1")
        else:
            cut = rng.randrange(len(lines) + 1)
            yield "".join(lines[:cut]) + rng.choice(lines)[: rng.randrange(1, 30)]


def test_perf_script_parser_never_raises():
    rng = random.Random(71)
    assert len(parse_perf_script(PERF_TEXT)) == 5  # the seed itself parses
    for text in mutations(PERF_TEXT, rng):
        fold(parse_perf_script(text))
        fold(parse_perf_script(text.splitlines()))


@pytest.mark.parametrize("name", ["trace_19c_tde_proc.trc", "trace_122_truncated.trc"])
def test_oracle_trace_parser_never_raises(name):
    seed = (ORACLE / name).read_text(errors="replace")
    rng = random.Random(name)
    assert parse_trace(seed.splitlines()).statements  # the seed itself parses
    for text in mutations(seed, rng, rounds=120):
        format_tkprof(parse_trace(text.splitlines()))
        trace_report_json(text.splitlines())


@pytest.mark.parametrize("name", ["blockdump_tde_907.trc", "blockdump_assorted.trc"])
def test_oracle_block_dump_parser_never_raises(name):
    seed = (ORACLE / name).read_text(errors="replace")
    rng = random.Random(name)
    assert parse_blockdump(seed)
    for text in mutations(seed, rng, rounds=120):
        for block in parse_blockdump(text):
            blockdump_to_page(block)
            block.to_json()


def _mutated_bytes(seed: bytes, rng: random.Random, rounds: int = ROUNDS):
    for n in range(rounds):
        buf = bytearray(seed)
        mode = n % 4
        if mode == 0:
            yield rng.randbytes(rng.choice([0, 1, 23, 24, 1024, 8192]))
        elif mode == 1:
            yield bytes(buf[: rng.randrange(len(buf) + 1)])
        else:
            for _ in range(rng.randrange(1, 32)):
                buf[rng.randrange(len(buf))] = rng.getrandbits(8)
            if mode == 3:  # aim at the header and line pointers, where offsets live
                for _ in range(8):
                    buf[rng.randrange(min(len(buf), 200))] = rng.getrandbits(8)
            yield bytes(buf)


@pytest.fixture(scope="module")
def pg_pages(pg_cluster):
    """Real heap pages from the test cluster: a catalog page and a page of a table with text and numbers."""
    pg_cluster.psql("DROP TABLE IF EXISTS fuzzed; CREATE TABLE fuzzed (id int, note text, n numeric, b bytea); "
                    "INSERT INTO fuzzed SELECT g, repeat('x', g % 50), g * 1.5, '\\xdeadbeef' "
                    "FROM generate_series(1, 120) g")
    pages = [bytes.fromhex(pg_cluster.psql(f"SELECT encode(get_raw_page('{rel}', 0), 'hex')").strip())
             for rel in ("pg_class", "fuzzed")]
    columns = (PgColumn("id", "int4", 4, "i"), PgColumn("note", "text", -1, "i"),
               PgColumn("n", "numeric", -1, "i"), PgColumn("b", "bytea", -1, "i"))
    return pages, columns


def test_postgres_page_decoder_never_raises(pg_pages):
    pages, columns = pg_pages
    rng = random.Random(5)
    decoders = (PgPageDecoder(), PgPageDecoder(columns))
    assert decoders[1].decode(pages[1]).cells > 0  # the seed decodes
    for seed in pages:
        for data in _mutated_bytes(seed, rng):
            for dec in decoders:
                page = dec.decode(data, rng.choice([-1, 0, 7]))
                for top in page.fields:
                    for f in top.walk():
                        assert 0 <= f.start <= f.end <= len(data), f


def test_pgp_message_parser_never_raises():
    rng = random.Random(9)
    # a real pgp_sym_encrypt(..., 'cipher-algo=aes256') header: SKESK v4 + SEIPD
    seed = bytes.fromhex("c30d04090302") + rng.randbytes(10) + bytes.fromhex("d23b01") + rng.randbytes(59)
    for data in _mutated_bytes(seed, rng):
        parse_pgp_message(data)


@pytest.fixture
def garbage_gdb(tmp_path):
    """A "gdb" that passes the version check, then answers MI with garbage, some of it almost MI."""
    script = tmp_path / "gdb"
    lines = ['^done,', '*stopped,reason="', '1^error,msg="unterminated', '=thread-group-exited,id=', '~"\\',
             '\x00\x01\x02 binary junk \xff', '12^done,value={a=[', '(gdb) ', '&"log line']
    body = "\n".join(f"printf '%s\\n' {line!r}" for line in lines)
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = "--version" ]; then echo "GNU gdb (GDB) 13.1"; exit 0; fi\n'
        f"{body}\n"
        "read line\n"
        "printf '%s\\n' '1^done,bkpt={number=\"1\"' '^^^^' '1^garbage'\n"
        "exit 3\n"
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_mi_reader_survives_garbage_and_reports_one_line(garbage_gdb):
    session = GdbSession(garbage_gdb, timeout=5)
    with pytest.raises(GdbError) as info:
        session.start()
    session.close()
    message = str(info.value)
    assert "\n" not in message and message, message
    assert not session.alive


def test_cli_with_a_garbage_gdb_is_one_line(garbage_gdb, sqlcipher_app):
    app = sqlcipher_app()  # uses sqlcipher: the capture gets as far as starting gdb
    env = {**os.environ, "PATH": f"{Path(garbage_gdb).parent}:{os.environ['PATH']}"}
    result = run_tdescope("capture", "--backend", "gdb", "--pid", str(app.pid), "--count", "1", "--timeout", "3",
                          env=env)
    assert_one_line_error(result, "gdb")
    assert tracer_pid(app.pid) == 0
