"""Statement texts with their literals masked, as ``pg_stat_statements`` normalises them.

A watched application's query can carry a secret in a literal
(``pgp_sym_decrypt(pan, 'hunter2')``); what tdescope shows on screen or writes
to a file shows ``pgp_sym_decrypt(pan, $1)`` instead, unless the user asks to
reveal it. One small tokenizer, not a parser: the texts come truncated
(``track_activity_query_size``), in two dialects, and may not parse at all,
and an unterminated literal is masked to the end rather than shown.

What counts as a literal: quoted strings (``'...'`` with ``''``, ``E'...'``
with backslash escapes, ``B''``/``X''``/``N''``/``U&''`` prefixes, PostgreSQL's
``$tag$...$tag$``, MySQL's ``"..."``) and numbers (``42``, ``3.5e-2``,
``0x1F``). Identifiers (``"col"``, backquoted, ``t1``), parameters (``$1``),
keywords and comments are kept as they are (a quote inside a comment starts
nothing).
"""

from __future__ import annotations

import re

__all__ = ["dialect_of", "mask_error", "mask_literals"]

_IDENT_CHAR = re.compile(r"[\w$]")
_NUMBER = re.compile(r"0[xX][0-9A-Fa-f]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_DOLLAR_TAG = re.compile(r"\$(?:[A-Za-z_\x80-\uffff][\w\x80-\uffff]*)?\$")
_PARAM = re.compile(r"\$\d+")
_PREFIXES = ("u&", "e", "b", "x", "n")
_Q_CLOSE = {"[": "]", "(": ")", "{": "}", "<": ">"}


def dialect_of(engine: str) -> str:
    """The :func:`mask_literals` dialect of an engine's statements: ``"mysql"`` for MariaDB, else ``"postgres"``."""
    return "mysql" if engine in ("mariadb", "mysql") else "postgres"


def _quoted_end(text: str, i: int, quote: str, backslash: bool) -> int:
    """Index just past the string opened by ``text[i] == quote`` (len(text) when unterminated)."""
    j = i + 1
    n = len(text)
    while j < n:
        c = text[j]
        if backslash and c == "\\":
            j += 2
            continue
        if c == quote:
            if j + 1 < n and text[j + 1] == quote:  # '' inside a string
                j += 2
                continue
            return j + 1
        j += 1
    return n


def _block_comment_end(text: str, i: int) -> int:
    """Index just past the ``/* */`` comment at ``i`` (PostgreSQL nests them)."""
    depth, j, n = 0, i, len(text)
    while j < n:
        if text.startswith("/*", j):
            depth += 1
            j += 2
        elif text.startswith("*/", j):
            depth -= 1
            j += 2
            if depth == 0:
                return j
        else:
            j += 1
    return n


def mask_literals(text: str, dialect: str = "postgres") -> str:
    """``text`` with every literal replaced by a placeholder.

    Parameters
    ----------
    text : str
        A statement, possibly truncated or not valid SQL.
    dialect : {"postgres", "mysql", "oracle"}
        PostgreSQL: placeholders ``$1, $2...`` numbered after the text's own parameters,
        dollar quoting, ``"..."`` is an identifier. MySQL/MariaDB: placeholder ``?`` (as
        ``performance_schema``'s digests), backslash escapes in every string, ``"..."``
        is a string, ``#`` starts a comment. Oracle: placeholder ``?``, ``q'[...]'``
        alternative quoting (any delimiter), no backslash escapes, no dollar quoting.

    Returns
    -------
    str
        The masked text; ``""`` for empty or None-ish input.
    """
    if not text:
        return ""
    mysql, oracle = dialect == "mysql", dialect == "oracle"
    if mysql or oracle:
        def placeholder() -> str:
            return "?"
    else:
        taken = [int(m.group()[1:]) for m in _PARAM.finditer(text)]
        counter = [max(taken, default=0)]

        def placeholder() -> str:
            counter[0] += 1
            return f"${counter[0]}"
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        prev_ident = i > 0 and _IDENT_CHAR.match(text[i - 1]) is not None
        if text.startswith("--", i) or (mysql and c == "#"):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(text[i:j])
            i = j
            continue
        if text.startswith("/*", i):
            j = _block_comment_end(text, i)
            out.append(text[i:j])
            i = j
            continue
        q = 2 if text[i:i + 2].lower() == "q'" else 3 if text[i:i + 3].lower() == "nq'" else 0
        if oracle and q and not prev_ident and i + q < n:
            close = _Q_CLOSE.get(text[i + q], text[i + q]) + "'"  # q'[...]', q'{...}', q'!...!'
            j = text.find(close, i + q + 1)
            i = n if j < 0 else j + 2
            out.append(placeholder())
            continue
        if not prev_ident:
            low = text[i:i + 3].lower()
            prefix = next((p for p in _PREFIXES if low.startswith(p) and text[i + len(p):i + len(p) + 1] == "'"),
                          None)
            if prefix is not None:
                start = i + len(prefix)
                backslash = mysql or prefix == "e"
                i = _quoted_end(text, start, "'", backslash)
                out.append(placeholder())
                continue
        if c == "'" or (mysql and c == '"'):
            i = _quoted_end(text, i, c, mysql)
            out.append(placeholder())
            continue
        if c == '"' or (mysql and c == "`"):  # a quoted identifier: kept
            j = _quoted_end(text, i, c, False)
            out.append(text[i:j])
            i = j
            continue
        if c == "$" and not (mysql or oracle) and not prev_ident:
            m = _PARAM.match(text, i)
            if m:
                out.append(m.group())
                i = m.end()
                continue
            m = _DOLLAR_TAG.match(text, i)
            if m:
                close = text.find(m.group(), m.end())
                i = n if close < 0 else close + len(m.group())
                out.append(placeholder())
                continue
        if not prev_ident and (c.isdigit() or (c == "." and i + 1 < n and text[i + 1].isdigit())):
            m = _NUMBER.match(text, i)
            if m:
                out.append(placeholder())
                i = m.end()
                continue
        if _IDENT_CHAR.match(c):  # a whole word at once, so digits inside it are never a number
            j = i + 1
            while j < n and _IDENT_CHAR.match(text[j]):
                j += 1
            out.append(text[i:j])
            i = j
            continue
        out.append(c)
        i += 1
    return "".join(out)


_NEAR = re.compile(r'(at or near )"(?:[^"]|"")*"?')
_MYSQL_NEAR = re.compile(r"(near )'.*'( at line \d+)", re.S)


def mask_error(message: str, dialect: str = "postgres") -> str:
    """A driver's error ``message`` about a statement, without the statement's literals.

    MariaDB quotes the rest of the statement unescaped (``near ''secret')' at line 1``),
    PostgreSQL the offending token in double quotes (``at or near "'secret'"``,
    ``"$$secret"``): either may hold a literal or part of one, so the quoted text is left
    out; what remains is masked as a statement would be.
    """
    if dialect == "mysql":
        message = _MYSQL_NEAR.sub(r"\1'…'\2", message)
    else:
        message = _NEAR.sub(r'\1"…"', message)
    return mask_literals(message, dialect)
