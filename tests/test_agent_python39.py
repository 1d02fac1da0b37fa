"""The agent runs on a host's own ``python3``, 3.9 or newer (issue 28): every module the zipapp carries must
parse as Python 3.9 and must not use, at run time, what came with 3.10 or later.

No Python 3.9 exists on this machine (Debian 12 ships 3.11 and pip installs no interpreters), so this is a
static check of the sources ``agent_build`` puts in the zipapp: ``ast.parse(..., feature_version=(3, 9))``
(``match``, ``except*`` ...) and a walk of each tree for the run-time features a 3.9 interpreter lacks:
``dataclass(slots=...)``/``kw_only``, ``zip(strict=...)``, ``X | Y`` of types evaluated at run time (an
annotation is not, under ``from __future__ import annotations``), and names 3.10+ added to the standard
library. It was not run on a real 3.9.
"""

from __future__ import annotations

import ast
import builtins

import pytest

from tdescope.app.remote.agent_build import DATA, MAIN, _root, agent_modules

#: Names from the standard library that 3.9 lacks, as ``module.name`` (``builtins.name`` for builtins).
NEWER = {"itertools.pairwise", "typing.TypeAlias", "typing.ParamSpec", "typing.Concatenate", "typing.TypeGuard",
         "typing.Self", "typing.Never", "typing.LiteralString", "typing.assert_never", "typing.reveal_type",
         "enum.StrEnum", "enum.verify", "datetime.UTC", "dataclasses.KW_ONLY", "contextlib.aclosing",
         "contextlib.chdir", "inspect.get_annotations", "builtins.aiter", "builtins.anext", "builtins.EncodingWarning",
         "builtins.ExceptionGroup", "builtins.BaseExceptionGroup", "sys.orig_argv", "sys.stdlib_module_names",
         "sys.exception", "fcntl.F_GETPIPE_SZ", "fcntl.F_SETPIPE_SZ", "os.EFD_CLOEXEC", "os.eventfd",
         "os.splice", "mmap.MAP_POPULATE", "types.NoneType", "types.EllipsisType", "types.UnionType"}
NEW_MODULES = {"tomllib", "wsgiref.types"}
#: Methods 3.10+ added to builtin types (called on anything: a false alarm is cheap to rename).
NEW_METHODS = {"bit_count"}
_TYPE_NAMES = {n for n in dir(builtins) if isinstance(getattr(builtins, n), type)}


def _carried() -> dict[str, str]:
    sources = {name: path.read_text() for name, path in agent_modules().items()}
    sources["__main__.py"] = MAIN
    for rel in DATA:  # gdb's probe helper runs in the host's gdb, whose Python may be 3.9 too
        if rel.endswith(".py"):
            sources[rel] = (_root("tdescope") / rel).read_text()
    return sources


def _class_like(name: str) -> bool:
    """``Mapping``, ``PageCapture``: CamelCase, not a constant such as ``O_RDONLY``."""
    return name[:1].isupper() and not name.isupper()


def _looks_like_type(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and node.value is None:
        return True
    if isinstance(node, ast.Name):
        return node.id in _TYPE_NAMES or _class_like(node.id)
    if isinstance(node, ast.Attribute):
        return _class_like(node.attr)
    if isinstance(node, ast.Subscript):
        return _looks_like_type(node.value)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _looks_like_type(node.left) or _looks_like_type(node.right)
    return False


class _Newer(ast.NodeVisitor):
    """Collects ``(line, what)`` for each 3.10+ run-time feature in one module."""

    def __init__(self, future_annotations: bool) -> None:
        self.found: list[tuple[int, str]] = []
        self._future = future_annotations
        self._imported: dict[str, str] = {}  # local name -> module.name

    def _annotation(self, node: ast.AST | None) -> None:
        if node is None:
            return
        if not self._future:  # evaluated when the def or class runs
            for sub in ast.walk(node):
                if isinstance(sub, ast.BinOp) and isinstance(sub.op, ast.BitOr):
                    self.found.append((sub.lineno, "X | Y in an annotation without `from __future__ import annotations`"))

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        self._annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    def visit_FunctionDef(self, node) -> None:
        args = node.args
        for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg):
            if arg is not None:
                self._annotation(arg.annotation)
        self._annotation(node.returns)
        for part in (*node.decorator_list, *args.defaults, *[d for d in args.kw_defaults if d is not None], *node.body):
            self.visit(part)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_BinOp(self, node: ast.BinOp) -> None:
        if isinstance(node.op, ast.BitOr) and _looks_like_type(node.left) and _looks_like_type(node.right):
            self.found.append((node.lineno, "X | Y of types evaluated at run time"))
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        words = {k.arg for k in node.keywords}
        if name == "dataclass" and words & {"slots", "kw_only", "match_args"}:
            self.found.append((node.lineno, f"dataclass({', '.join(sorted(words & {'slots', 'kw_only', 'match_args'}))}=)"))
        if name == "field" and "kw_only" in words:
            self.found.append((node.lineno, "field(kw_only=)"))
        if name == "zip" and "strict" in words:
            self.found.append((node.lineno, "zip(strict=)"))
        if name in ("bisect", "bisect_left", "bisect_right", "insort", "insort_left", "insort_right") and "key" in words:
            self.found.append((node.lineno, f"{name}(key=)"))
        if isinstance(func, ast.Attribute) and func.attr in NEW_METHODS:
            self.found.append((node.lineno, f".{func.attr}()"))
        self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.name in NEW_MODULES:
                self.found.append((node.lineno, f"import {alias.name}"))
            self._imported[alias.asname or alias.name.split(".")[0]] = alias.name.split(".")[0] if not alias.asname else alias.name

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.module in NEW_MODULES:
            self.found.append((node.lineno, f"from {node.module} import"))
        for alias in node.names:
            if f"{node.module}.{alias.name}" in NEWER:
                self.found.append((node.lineno, f"from {node.module} import {alias.name}"))

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.value, ast.Name):
            module = self._imported.get(node.value.id)
            if module and f"{module}.{node.attr}" in NEWER:
                self.found.append((node.lineno, f"{module}.{node.attr}"))
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Load) and f"builtins.{node.id}" in NEWER:
            self.found.append((node.lineno, node.id))

    def visit_Match(self, node) -> None:  # also refused by the 3.9 parse; kept for a clear message
        self.found.append((node.lineno, "match statement"))


def newer_than_39(source: str, name: str = "<source>") -> list[tuple[int, str]]:
    """``(line, what)`` for everything in ``source`` a Python 3.9 interpreter would not run."""
    try:
        ast.parse(source, name, feature_version=(3, 9))
    except SyntaxError as exc:
        return [(exc.lineno or 0, f"not Python 3.9 syntax: {exc.msg}")]
    tree = ast.parse(source, name)
    future = any(isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations"
                                                                                 for a in n.names)
                 for n in tree.body)
    visitor = _Newer(future)
    visitor.visit(tree)
    return sorted(set(visitor.found))


@pytest.mark.parametrize("snippet, what", [
    ("match x:\n    case 1:\n        pass\n", "not Python 3.9 syntax"),
    ("from dataclasses import dataclass\n@dataclass(frozen=True, slots=True)\nclass A:\n    x: int\n", "dataclass(slots=)"),
    ("for a, b in zip(x, y, strict=True):\n    pass\n", "zip(strict=)"),
    ("from __future__ import annotations\nOptional = int | None\n", "X | Y of types evaluated at run time"),
    ("isinstance(x, Path | PurePath)\n", "X | Y of types evaluated at run time"),
    ("def f(x: int | None) -> None:\n    pass\n", "X | Y in an annotation"),
    ("import itertools\nitertools.pairwise([1, 2])\n", "itertools.pairwise"),
    ("from typing import TypeAlias\n", "from typing import TypeAlias"),
    ("n = (5).bit_count()\n", ".bit_count()"),
])
def test_the_checker_finds_what_39_lacks(snippet, what):
    found = newer_than_39(snippet)
    assert any(what in text for _, text in found), found


def test_the_checker_lets_39_code_pass():
    ok = ("from __future__ import annotations\nfrom dataclasses import dataclass\n@dataclass(frozen=True)\n"
          "class A:\n    x: int | None = None\n    y: list[str] | None = None\n"
          "def f(a: dict[str, int] | None = None) -> tuple[int, ...] | None:\n    return flags | 4\n"
          "flags = 1 | 2\nmode = os.O_RDONLY | os.O_CLOEXEC\n")
    assert newer_than_39(ok) == []


def test_every_module_the_agent_carries_runs_on_python_39():
    assert "tdescope/app/gdb/_probe_helper.py" in _carried()
    problems = [f"{name}:{line}: {what}" for name, source in sorted(_carried().items())
                for line, what in newer_than_39(source, name)]
    assert not problems, "\n".join(problems)


def test_the_zipapp_entry_and_the_host_check_say_39():
    from tdescope.app.remote.ssh import MIN_PYTHON

    assert MIN_PYTHON == (3, 9)
    assert "sys.version_info < (3, 9)" in MAIN and "3.9 or newer" in MAIN
