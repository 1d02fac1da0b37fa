"""``tdescope oracle``: Oracle's own text, read without a database.

``parse-trace FILE`` summarises a raw 10046 SQL trace tkprof-style (``--json``:
``{"statements": [...], "waits": {...}}``); ``parse-blockdump FILE`` reads the
output of ``alter system dump datafile F block B``.
"""

from __future__ import annotations

import json
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.commands._stdout import emit

HELP = "read Oracle 10046 SQL traces and block dumps (no database needed)"

_SNIFF = 65536


def add_arguments(parser) -> None:
    sub = parser.add_subparsers(dest="oracle_command", metavar="ACTION", required=True)
    trace = sub.add_parser("parse-trace", help="tkprof-like summary of a raw 10046 trace file")
    trace.add_argument("file", metavar="FILE")
    trace.add_argument("--json", action="store_true", help="print the summary as JSON")
    trace.add_argument("--show-literals", action="store_true",
                       help="print statements with their literals (masked by default: a trace may hold keys)")
    dump = sub.add_parser("parse-blockdump", help="decode an 'alter system dump datafile' trace")
    dump.add_argument("file", metavar="FILE")
    dump.add_argument("--json", action="store_true", help="print the blocks as JSON")


def _read_text(path: str) -> str:
    """The file as text; UserError for a missing, unreadable or binary file."""
    p = Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, not a trace file") from None
    except OSError as exc:
        raise UserError(f"{path}: cannot read: {exc.strerror}") from None
    head = data[:_SNIFF]
    if b"\0" in head or (head and sum(b < 9 or 13 < b < 32 for b in head) > len(head) // 100):
        raise UserError(f"{path}: binary data, not an Oracle trace file")
    return data.decode("utf-8", errors="replace")


def _parse_trace(args) -> int:
    from tdescope.plugins.oracle.tkprof import format_tkprof
    from tdescope.plugins.oracle.trace import masked_summary, parse_trace

    text = _read_text(args.file)
    summary = parse_trace(text.splitlines())
    if not summary.statements and not summary.waits:
        raise UserError(f"{args.file}: no 10046 trace records (PARSING IN CURSOR, EXEC, WAIT...) found")
    if not args.show_literals:
        summary = masked_summary(summary)
    if args.json:
        emit(json.dumps(summary.to_json(), indent=1))
    else:
        emit(format_tkprof(summary))
    return 0


def _parse_blockdump(args) -> int:
    from tdescope.plugins.oracle.blockdump import parse_blockdump
    from tdescope.plugins.oracle.blockdump_render import format_blockdump

    text = _read_text(args.file)
    blocks = parse_blockdump(text)
    if not blocks:
        raise UserError(f"{args.file}: no block dump found (no 'buffer tsn:' header)")
    if args.json:
        emit(json.dumps({"blocks": [b.to_json() for b in blocks]}, indent=1))
    else:
        emit(format_blockdump(blocks))
    return 0


def run(args) -> int:
    if args.oracle_command == "parse-trace":
        return _parse_trace(args)
    return _parse_blockdump(args)
