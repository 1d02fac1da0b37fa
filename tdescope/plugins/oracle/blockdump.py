"""The text of ``alter system dump datafile F block B`` parsed into typed blocks.

Handles the sections Oracle writes for a data block: the cache header
(``buffer tsn:``, ``scn: ... tail:``, ``frmt: ... type:``), the optional
``Dump of memory from ... to ...`` hex dump, the block header with its ITL
table, the data header, table and row directories, and the row dump with its
columns. A header-only dump of an encrypted block (``Encrypted block <5, 907>
content will not be dumped``) is kept as such. A file may hold several blocks.
Unknown lines are ignored; the parser never raises.
"""

from __future__ import annotations

import os

from tdescope.plugins.oracle._dump_grammar import parse_blocks
from tdescope.plugins.oracle._dump_records import (
    BlockDump,
    DataHeader,
    DumpBlockHeader,
    DumpCacheHeader,
    DumpColumn,
    DumpRow,
    ItlEntry,
    RowDirEntry,
    TableDirEntry,
    scn_value,
)

__all__ = [
    "BlockDump",
    "DataHeader",
    "DumpBlockHeader",
    "DumpCacheHeader",
    "DumpColumn",
    "DumpRow",
    "ItlEntry",
    "RowDirEntry",
    "TableDirEntry",
    "blockdump_report_json",
    "parse_blockdump",
    "parse_blockdump_file",
    "scn_value",
]


def parse_blockdump(text: str, byteorder: str = "little") -> list[BlockDump]:
    """Every block dumped in ``text`` (a whole trace file or an excerpt), in order.

    ``byteorder`` is that of the platform that wrote the dump (its hex memory
    lines print native 32-bit words): ``"little"`` for Linux x86-64.
    """
    return parse_blocks(text.splitlines(), byteorder)


def parse_blockdump_file(path: str | os.PathLike[str], byteorder: str = "little") -> list[BlockDump]:
    """:func:`parse_blockdump` on a file; raises ``OSError`` when it cannot be read."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        return parse_blockdump(fh.read(), byteorder)


def blockdump_report_json(text: str) -> dict:
    """The ``parse-blockdump --json`` document: ``{"blocks": [...]}``."""
    return {"blocks": [b.to_json() for b in parse_blockdump(text)]}
