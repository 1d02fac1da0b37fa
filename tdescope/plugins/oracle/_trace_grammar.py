"""The line grammar of a raw 10046 SQL trace: one text line -> one typed record.

Formats follow what Oracle 11g-19c writes (and 9i/10g, which lack some
attributes). Cursor numbers are kept as text because 12.2+ writes large
decimal numbers and some builds write hex (``#0x7ff225353470``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__: list[str] = []  # private module: used by trace.py only

_CURSOR = r"#(0x[0-9a-fA-F]+|\d+)"
_PAIR = re.compile(r"(\w+)=('[^']*'|[^\s,]*)")
_PARSING = re.compile(rf"^PARSING IN CURSOR {_CURSOR}\s+(.*)$")
_PARSE_ERROR = re.compile(rf"^PARSE ERROR {_CURSOR}:(.*)$")
_CALL = re.compile(rf"^(PARSE|EXEC|FETCH|CLOSE) {_CURSOR}:(.*)$")
_WAIT = re.compile(rf"^WAIT {_CURSOR}: nam='(.*?)' ela=\s*(-?\d+)(.*)$")
# Wait parameter names may hold spaces and symbols ("driver id", "#bytes",
# "name|mode", "usn<<16 | slot"); values are single tokens.
_WAIT_PARAM = re.compile(r"\s*([^=]+?)=(\S*)")
_STAT = re.compile(rf"^STAT {_CURSOR} (.*?)\s*op='(.*)'\s*$")
_STAT_OP_STATS = re.compile(r"\b(cr|pr|pw|time|str|cost|size|card)=(\d+)")
_XCTEND = re.compile(r"^XCTEND rlbk=(\d+), rd_only=(\d+)(?:, tim=(\d+))?\s*$")
_BINDS = re.compile(rf"^BINDS {_CURSOR}:\s*$")
_ERROR = re.compile(rf"^ERROR {_CURSOR}:err=(\d+)")

#: Records that are real trace content but carry nothing tdescope aggregates.
_KNOWN_UNUSED = (
    "LOBREAD:", "LOBWRITE:", "LOBGETLEN:", "LOBAPPEND:", "LOBARRREAD:", "LOBARRWRITE:",
    "LOBTMPCREATE:", "LOBTMPFREE:", "LOBPGSIZE:", "LOBCOPY:", "LOBERASE:", "LOBTRIM:",
    "RPC CALL:", "RPC BINDS:", "RPC EXEC:", "UNMAP #", "SORT UNMAP #",
    "Dump continued", "Dump file", "kxsbbbfp",
)

_INT_FIELDS = ("c", "e", "p", "cr", "cu", "mis", "r", "dep", "og", "plh", "tim", "type")


@dataclass(frozen=True, slots=True)
class Parsing:
    cursor: str
    depth: int
    uid: int
    sql_id: str
    hash_value: int
    tim: int


@dataclass(frozen=True, slots=True)
class Call:
    kind: str  # PARSE, EXEC, FETCH, CLOSE
    cursor: str
    values: dict[str, int]


@dataclass(frozen=True, slots=True)
class Wait:
    cursor: str
    event: str
    ela: int
    params: tuple[tuple[str, str], ...]
    obj: int | None
    tim: int | None


@dataclass(frozen=True, slots=True)
class Stat:
    cursor: str
    values: dict[str, int]
    op: str
    op_stats: dict[str, int]


@dataclass(frozen=True, slots=True)
class XctEnd:
    rollback: bool
    read_only: bool


@dataclass(frozen=True, slots=True)
class Binds:
    cursor: str


@dataclass(frozen=True, slots=True)
class ParseError:
    cursor: str


@dataclass(frozen=True, slots=True)
class Ignored:
    """A line that is real trace content but not aggregated (separators, timestamps...)."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """A line that starts like a record but does not parse."""


@dataclass(frozen=True, slots=True)
class Unknown:
    """A line matching no record at all (header text, or garbage)."""


Record = Parsing | Call | Wait | Stat | XctEnd | Binds | ParseError | Ignored | Malformed | Unknown

_RECORD_STARTS = ("PARSING IN CURSOR", "PARSE", "EXEC", "FETCH", "CLOSE", "WAIT", "STAT", "XCTEND",
                  "BINDS", "ERROR")


def _int(text: str) -> int:
    text = text.strip("'")
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _pairs(text: str) -> dict[str, str]:
    return {k: v for k, v in _PAIR.findall(text)}


def classify(line: str) -> Record:
    """Turn one trace line (without its newline) into a record; never raises."""
    try:
        return _classify(line)
    except (ValueError, KeyError, IndexError):
        return Malformed()


def _classify(line: str) -> Record:
    if not line.strip() or line.startswith(("***", "====")):
        return Ignored()
    if line.startswith(_KNOWN_UNUSED):
        return Ignored()
    if m := _PARSING.match(line):
        kv = _pairs(m.group(2))
        return Parsing(
            cursor=m.group(1),
            depth=_int(kv["dep"]),
            uid=_int(kv.get("uid", "-1")),
            sql_id=kv.get("sqlid", "").strip("'"),
            hash_value=_int(kv.get("hv", "0")),
            tim=_int(kv.get("tim", "0")),
        )
    if m := _PARSE_ERROR.match(line):
        return ParseError(m.group(1))
    if m := _CALL.match(line):
        values = {k: _int(v) for k, v in _pairs(m.group(3)).items() if k in _INT_FIELDS}
        if m.group(1) != "CLOSE" and not {"c", "e"} <= values.keys():
            return Malformed()
        return Call(m.group(1), m.group(2), values)
    if m := _WAIT.match(line):
        params: list[tuple[str, str]] = []
        obj = tim = None
        for name, value in _WAIT_PARAM.findall(m.group(4)):
            if name == "obj#":
                obj = _int(value)
            elif name == "tim":
                tim = _int(value)
            else:
                params.append((name, value))
        return Wait(m.group(1), m.group(2), int(m.group(3)), tuple(params), obj, tim)
    if m := _STAT.match(line):
        values = {k: _int(v) for k, v in _pairs(m.group(2)).items()}
        if "id" not in values:
            return Malformed()
        op_stats = {k: int(v) for k, v in _STAT_OP_STATS.findall(m.group(3))}
        return Stat(m.group(1), values, m.group(3), op_stats)
    if m := _XCTEND.match(line):
        return XctEnd(rollback=m.group(1) != "0", read_only=m.group(2) != "0")
    if m := _BINDS.match(line):
        return Binds(m.group(1))
    if _ERROR.match(line):
        return Ignored()
    if line.startswith(_RECORD_STARTS):
        return Malformed()
    return Unknown()


def wait_param_int(value: str) -> int | None:
    """A wait parameter value as an integer, or None when it is not one."""
    try:
        return _int(value)
    except ValueError:
        return None
