"""The agent's wire format: typed frames over a byte stream, never pickle.

Stdlib only and Python 3.9-clean: the agent (``agent_main``) runs this file on
the database host's own ``python3``; the workbench's client imports it too, so
the layout and the kinds exist once.

A frame is a 9-byte ``<2sBHI`` prefix (magic ``b"td"``, :class:`Kind`, JSON
header length, payload length), a UTF-8 JSON object (the header) and the
payload bytes (a ``CAPTURES`` frame's payload is one fixed-size binary row per capture, then the page
bytes: each capture's ``before`` then ``after``; no JSON per capture).
Unpickling what a remote root process sends would be code execution on the
laptop; a JSON object and raw bytes are only data. Sizes are bounded, and a
frame with a wrong magic, an unknown kind or a header that is not a JSON object
is a :class:`ProtocolError` (one line) at once.
"""

import enum
import json
import struct
import zlib

__all__ = ["CAPTURE_ROW", "MAX_HEADER", "MAX_PAYLOAD", "PREFIX", "PROTOCOL_VERSION", "REQUESTS", "Kind",
           "ProtocolError", "encode", "encode_parts", "pack_fields", "read_frame", "unpack_fields", "widen_pipe",
           "write_frame"]

#: Bumped whenever a kind or a field changes meaning; both ends must speak the same one.
#: 2: a capture row carries its call's context; 3: capture rows are binary (CAPTURE_ROW); 4: limits carry their
#: gdb-only ``stops``, a summary its typed ``counters`` (the probe's tagged by ``kind``), ``guard`` and ``ended_by``.
PROTOCOL_VERSION = 4
PREFIX = struct.Struct("<2sBHI")
MAGIC = b"td"
MAX_HEADER = 60000
#: One capture's row in a ``CAPTURES`` payload: ts, stop_us, seq, pgno, context, len(before), len(after).
CAPTURE_ROW = struct.Struct("<ddqqqII")
MAX_PAYLOAD = 16 << 20
#: A stream event's fields bigger than this travel zlib'd in the payload (``{"zjson": true}`` in the header):
#: a perf window's folded stacks, with DWARF callers, run to hundreds of KB.
INLINE_FIELDS = 16000
#: What a packed payload may inflate to (a bound against a decompression bomb).
MAX_FIELDS = 64 << 20
#: The pipe size asked for on the captures' way: the most any user may ask for by default
#: (``/proc/sys/fs/pipe-max-size``); 1 MiB of kernel memory per agent pipe.
PIPE_BYTES = 1 << 20


class Kind(enum.IntEnum):
    """What a frame is: a closed set. Requests go to the agent; the rest come back."""

    HELLO = 1  #: ``version``: the workbench's protocol version
    LIST_TARGETS = 2  #: ``critical`` rules; optional ``symbols``/``library``: which processes map the function
    ARM = 3  #: ``pid``, ``recipe``, ``limits``, ``engine``, ``critical``, ``allow_critical``, ``backend``
    DISARM = 4  #: ``reason``; optional ``drain``: deliver what the probe caught before ending
    HOTSPOTS_START = 5  #: ``pid``, ``frequency``, ``window_s``, ``callgraph``: perf on the host
    HOTSPOTS_STOP = 6
    WAITS_START = 7  #: ``pid``, ``source`` (``proc``: ``hz``; ``ebpf``: ``interval_s``): OS waits on the host
    WAITS_STOP = 8  #: optional ``source`` (``proc`` or ``ebpf``): that sampler only; without: every one running
    READ_FUNCTION = 9  #: ``path`` (an ELF file on the host), ``symbol``
    BYE = 10
    PROCESSES = 11  #: ``pids``: a list (at most 4096), or null for every process: the host's process table
    PING = 32  #: the workbench is still there (no reply); from the first, the agent leaves after a silence

    WELCOME = 64  #: ``version``, ``python``, ``tools`` (what the host has), ``euid``, ``pid``, ``spool``
    TARGETS = 65  #: ``processes``: list of ``{pid, comm, cmdline, critical, maps}``
    STATE = 66  #: one :class:`~tdescope.app.events.CaptureWindowState`'s fields
    CAPTURES = 67  #: a batch of page captures: ``n`` and the shared fields; payload = ``n`` CAPTURE_ROWs, then pages
    SUMMARY = 68  #: the window's :class:`~tdescope.app.probe.window.CaptureSummary` fields
    FUNCTION = 69  #: ``symbol``, ``address``, ``size``; payload = the function's bytes
    REFUSED = 70  #: ``message``: one line; ``request``: the kind refused (None: unreadable)
    GOODBYE = 71
    WAITS = 72  #: one tick of OS wait samples: ``rows`` of ``[ts, pid, tid, source, wait_class, event, detail]``
    NOTICE = 73  #: ``source`` (``"waits"``, ``"exact"``, ``"hotspots"``), ``message``: one line from a running sampler
    HOTSPOTS = 74  #: one perf window: a :class:`~tdescope.app.events.HotspotWindow`'s fields
    WAIT_TOTALS = 75  #: exact waits (eBPF), cumulative: ``rows`` of ``[nr, flags, size, count, total_ns, max_ns, lat]``
    WAIT_SPANS = 76  #: sampled long calls (eBPF): ``rows`` of ``[start, duration_s, tid, nr, flags, size]``
    PROCESS_ROWS = 77  #: ``rows`` of ``[pid, ppid, title]``: the processes asked for that exist


#: The kinds the agent accepts; anything else it refuses.
REQUESTS = frozenset(k for k in Kind if k < 64)


class ProtocolError(Exception):
    """The stream is not this protocol (garbage, a wrong kind, an oversized frame): one line."""


def widen_pipe(fd, size=PIPE_BYTES):
    """Ask for a ``size``-byte pipe behind ``fd`` (False when it is no pipe, or the kernel says no).

    A 64 KiB pipe holds 8 page pairs: a megabyte frame then crosses in 16 turns of writer and
    reader, each a wake-up on a machine whose cores ssh, sshd and the target want too."""
    try:
        import fcntl  # POSIX only: a workbench elsewhere keeps its pipes as they are
        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), size)  # the name is Python 3.10+
        return True
    except (ImportError, OSError):
        return False


def pack_fields(fields):
    """``(header, payload)`` for a stream event's fields: inline when small, else zlib'd JSON in the payload."""
    text = json.dumps(fields, separators=(",", ":")).encode()
    if len(text) <= INLINE_FIELDS:
        return fields, b""
    payload = zlib.compress(text, 1)
    if len(payload) > MAX_PAYLOAD:
        raise ProtocolError("event too large even compressed")
    return {"zjson": True}, payload


def unpack_fields(header, payload):
    """The fields :func:`pack_fields` packed (``header`` itself when they travelled inline)."""
    if not header.get("zjson"):
        return header
    inflate = zlib.decompressobj()
    try:
        text = inflate.decompress(payload, MAX_FIELDS)
    except zlib.error as exc:
        raise ProtocolError(f"packed fields do not inflate: {exc}") from None
    if inflate.unconsumed_tail:
        raise ProtocolError("packed fields inflate past the bound")
    try:
        fields = json.loads(text)
    except ValueError:
        raise ProtocolError("packed fields are not JSON") from None
    if not isinstance(fields, dict):
        raise ProtocolError("packed fields are not a JSON object")
    return fields


def encode(kind, header=None, payload=b""):
    """The bytes of one frame."""
    return encode_parts(kind, header, (payload,))


def encode_parts(kind, header, parts):
    """The bytes of one frame whose payload is ``parts`` joined: one copy of them, not two."""
    head = json.dumps(header or {}, separators=(",", ":")).encode()
    plen = sum(len(part) for part in parts)
    if len(head) > MAX_HEADER or plen > MAX_PAYLOAD:
        raise ProtocolError(f"{Kind(kind).name} frame too large")
    return b"".join((PREFIX.pack(MAGIC, int(kind), len(head), plen), head, *parts))


def write_frame(stream, kind, header=None, payload=b""):
    """Write one frame to a binary stream and flush it."""
    stream.write(encode(kind, header, payload))
    stream.flush()


def _read_exact(stream, n):
    chunks, left = [], n
    while left:
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(stream):
    """The next ``(Kind, header dict, payload bytes)`` from a binary stream; None at a clean end.

    Raises
    ------
    ProtocolError
        The bytes are not a frame of this protocol, or the stream ends inside one.
    """
    prefix = _read_exact(stream, PREFIX.size)
    if prefix is None:
        return None
    magic, kind, hlen, plen = PREFIX.unpack(prefix)
    if magic != MAGIC:
        raise ProtocolError(f"not a tdescope agent frame (starts {prefix[:2]!r})")
    try:
        kind = Kind(kind)
    except ValueError:
        raise ProtocolError(f"unknown frame kind {kind}") from None
    if hlen > MAX_HEADER or plen > MAX_PAYLOAD:
        raise ProtocolError(f"{kind.name} frame too large ({hlen} + {plen} bytes)")
    head = _read_exact(stream, hlen) if hlen else b""
    payload = _read_exact(stream, plen) if plen else b""  # read apart: no copy of a megabyte to split it off
    if head is None or payload is None:
        raise ProtocolError(f"the stream ended inside a {kind.name} frame")
    try:
        header = json.loads(head.decode()) if hlen else {}
    except (UnicodeDecodeError, ValueError):
        raise ProtocolError(f"{kind.name} frame header is not JSON") from None
    if not isinstance(header, dict):
        raise ProtocolError(f"{kind.name} frame header is not a JSON object")
    return kind, header, payload
