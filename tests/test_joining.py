"""A cipher's chunks become one capture per message (app/probe/joining.py): the rules on made-up chunks.

The real thing (pgcrypto's pgp_cfb_decrypt in a PostgreSQL backend, both backends) is in
tests/test_postgres.py::test_one_capture_per_pgp_message_its_chunks_joined.
"""

from tdescope.app.events import ContextKind, PageCapture
from tdescope.app.probe.joining import MessageJoin, joins


def _chunk(seq, block_no, before, after, stop_us=1.0):
    return PageCapture(ts=float(seq), seq=seq, symbol="pgp_cfb_decrypt", direction="decrypt", pgno=-1,
                       before=before, after=after, stop_us=stop_us, engine="postgres", plaintext_side="after",
                       context=block_no, context_kind=ContextKind.CIPHER_BLOCK.value)


def _message(first_seq, text):
    """A message's chunks as pgcrypto makes them: the prefix (block counter 0), header bytes, the data."""
    parts = [(0, b"P" * 18), (2, b"h"), (2, b"h"), (2, text), (4, b"M" * 20)]
    return [_chunk(first_seq + i, n, bytes(len(p)), p) for i, (n, p) in enumerate(parts)]


def test_each_message_is_one_capture_numbered_from_one_with_all_its_bytes():
    out = []
    join = MessageJoin(out.append)
    for c in _message(1, b"first") + _message(6, b"second"):
        join.add(c)
    assert [c.seq for c in out] == [1]  # the second is open until a third starts or the window ends
    join.flush()
    assert [c.seq for c in out] == [1, 2] and join.messages == 2
    assert out[0].after == b"P" * 18 + b"hh" + b"first" + b"M" * 20 and len(out[0].before) == len(out[0].after)
    assert out[1].stop_us == 5.0 and out[1].ts == 6.0  # stopped time summed, stamped at its first call


def test_chunks_before_any_first_call_are_dropped_and_counted():
    out = []
    join = MessageJoin(out.append, first_seq=7)
    for c in _message(1, b"cut")[2:] + _message(10, b"whole"):
        join.add(c)
    join.flush()
    assert [(c.seq, b"whole" in c.after) for c in out] == [(7, True)] and join.partial == 3


def test_the_limit_holds_and_an_unkept_open_message_is_counted():
    out = []
    join = MessageJoin(out.append, limit=1)
    for c in _message(1, b"a") + _message(6, b"b") + _message(11, b"c"):
        join.add(c)
    assert join.full and len(out) == 1
    join.flush(keep=not join.full)
    assert len(out) == 1 and join.partial == 10  # the second and the third, five chunks each


def test_only_cipher_block_contexts_are_joined():
    assert joins(ContextKind.CIPHER_BLOCK.value)
    assert not joins(ContextKind.RELATION.value) and not joins("")
