"""The read-only guard's grammar: the only commands tdescope may send gdb.

gdb changes a target in many ways that look like reads: ``print x=1``,
``set var x=1``, ``-gdb-set var x=1`` (MI's ``-gdb-set`` is the console's
``set``), a breakpoint condition, an address in a memory read (gdb evaluates
it as an expression), a second command in one ``-interpreter-exec``, a ``\\n``
escape inside an MI string, or Python run inside gdb. So nothing here is matched
loosely: a command passes only when it is, exactly, one of

- an MI command in :data:`_ARGUMENTS` whose arguments match that command's
  pattern: numbers, hex addresses, plain symbols, breakpoint numbers, never an
  expression;
- ``-gdb-set NAME VALUE`` or ``-gdb-show NAME`` for a setting in
  :data:`_SETTINGS`, and only to the one safe value listed there;
- ``-interpreter-exec console "TEXT"`` with one MI string argument (escapes
  ``\\\\`` and ``\\"`` only) whose TEXT is ``source HELPER_PATH``,
  ``signal SIGINT &`` (passing on a SIGINT someone else sent the target), or
  ``python _tdescope_probe.FN(ARGS)`` where FN is one of the helper's functions
  and every argument is a literal, checked on its Python syntax tree.

:func:`refusal` is pure: it says why a command is refused, or None.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

__all__ = ["HELPER_FUNCTIONS", "HELPER_PATH", "helper_path", "refusal"]

#: The gdb-side probe helper, the only file tdescope lets gdb ``source``.
HELPER_PATH = str(Path(__file__).resolve().with_name("_probe_helper.py"))
#: Where the agent put the helper it carries (a zipapp's data is no file gdb can source); None: the package's.
HELPER_OVERRIDE: str | None = None


def helper_path() -> str:
    """The helper gdb sources: the agent's copy in its 0700 spool when it carries one, else the package's."""
    return HELPER_OVERRIDE if HELPER_OVERRIDE is not None else HELPER_PATH

#: The functions the helper exposes on ``_tdescope_probe``, and how many arguments each takes.
HELPER_FUNCTIONS = {"arm": 1, "pause": 1, "resume": 0, "reinsert": 0, "disarm": 0}

_NUMBER = r"[0-9]+"
_ADDRESS = r"0x[0-9a-fA-F]+"
_SYMBOL = r"[A-Za-z_][A-Za-z0-9_]*"

#: MI commands with a pattern their arguments must match in full (after one space).
_ARGUMENTS = {
    "-gdb-exit": "",
    "-target-attach": _NUMBER,
    "-target-detach": "",
    "-exec-continue": "",
    "-exec-interrupt": "",
    "-break-insert": rf"\*{_ADDRESS}|{_SYMBOL}",
    "-break-delete": rf"(?:{_NUMBER}(?: {_NUMBER})*)?",
    "-data-read-memory-bytes": rf"(?:{_ADDRESS}|{_NUMBER}) {_NUMBER}",
}

#: Settings tdescope sets or shows, each with the one value it sets: the other
#: value would weaken the target's safety (``mi-async off``: no detach when the
#: workbench dies; ``auto-load on``: scripts from the target's files run in gdb;
#: ``may-call-functions on``).
_SETTINGS = {
    "mi-async": "on",
    "pagination": "off",
    "confirm": "off",
    "breakpoint pending": "on",
    "may-call-functions": "off",
    "may-write-memory": "off",  # not set by GdbSession (gdb then inserts no breakpoint), but safe
    "auto-load": "off",
    "auto-solib-add": "off",
    "print thread-events": "off",
}

#: ``-interpreter-exec console`` with exactly one MI string argument.
_CONSOLE = re.compile(r'-interpreter-exec console "((?:[^"\\]|\\[\\"])*)"')
_SIGINT = "signal SIGINT &"


def refusal(command: str) -> str | None:
    """Why the read-only guard refuses ``command``, or None when it may be sent.

    Parameters
    ----------
    command : str
        One MI command line as :class:`~tdescope.app.gdb.mi.GdbSession` sends it, without token.

    Returns
    -------
    str or None
        One line naming what is not allowed.
    """
    if not command.isprintable():
        return f"control characters in {command[:80]!r}"
    head, _, rest = command.partition(" ")
    if head == "-interpreter-exec":
        m = _CONSOLE.fullmatch(command)
        if m is None:
            return f"only one console command in one MI string: {command[:80]!r}"
        return _console_refusal(re.sub(r'\\([\\"])', r"\1", m.group(1)))
    if head == "-gdb-set":
        name, _, value = rest.rpartition(" ")
        if _SETTINGS.get(name) != value:
            return f"-gdb-set {rest[:60]!r} is not a setting tdescope may change"
        return None
    if head == "-gdb-show":
        return None if rest in _SETTINGS else f"-gdb-show {rest[:60]!r} is not a setting tdescope reads"
    pattern = _ARGUMENTS.get(head)
    if pattern is None:
        return f"{head[:40]!r} is not an MI command tdescope sends"
    if not re.fullmatch(pattern, rest, re.ASCII):
        return f"{head} does not take {rest[:60]!r} (only numbers, addresses or plain symbols)"
    return None


def _console_refusal(text: str) -> str | None:
    if text in (f"source {helper_path()}", _SIGINT):
        return None
    if text.startswith("python ") and _is_helper_call(text[len("python "):]):
        return None
    return (f"console command {text[:60]!r} is not source of the helper, {_SIGINT!r}, "
            "or a helper call with literal arguments")


def _is_helper_call(code: str) -> bool:
    """True when ``code`` is ``_tdescope_probe.FN(literal, ...)`` and nothing else."""
    if not code.startswith("_tdescope_probe.") or code != code.rstrip() or ";" in code:
        return False
    try:
        call = ast.parse(code, mode="eval").body
    except SyntaxError:
        return False
    return (
        isinstance(call, ast.Call)
        and isinstance(call.func, ast.Attribute)
        and isinstance(call.func.value, ast.Name)
        and call.func.value.id == "_tdescope_probe"
        and HELPER_FUNCTIONS.get(call.func.attr) == len(call.args)
        and not call.keywords
        and all(_is_literal(arg) for arg in call.args)
    )


def _is_literal(node: ast.AST) -> bool:
    """A number, string, True/False/None, a negative number, or a list/tuple/dict of literals."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return isinstance(node.operand, ast.Constant) and type(node.operand.value) in (int, float)
    if isinstance(node, (ast.List, ast.Tuple)):
        return all(_is_literal(e) for e in node.elts)
    if isinstance(node, ast.Dict):
        return all(k is not None and _is_literal(k) for k in node.keys) and all(map(_is_literal, node.values))
    return False
