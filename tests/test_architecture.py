"""The shape of the code: no import cycles inside tdescope, modules of a readable size."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp

import tdescope

PACKAGE = Path(tdescope.__file__).parent
MAX_LINES = 400
#: The only modules allowed past MAX_LINES; each says why in its docstring ("Long because ..."). A docstring
#: alone no longer lets a module past: ui/views/hexview.py said why and was split instead (issue #25).
LONG_MODULES = frozenset({"app/engines/api.py", "app/gdb/_probe_helper.py"})


def _cycles(graph) -> list[tuple[str, str]]:
    """Pairs (a, b) where a imports b directly and b reaches a again."""
    found = []
    for a in sorted(graph.modules):
        if not a.startswith("tdescope"):
            continue
        for b in sorted(graph.find_modules_directly_imported_by(a)):
            if b.startswith("tdescope") and b != a and graph.chain_exists(importer=b, imported=a):
                found.append((a, b))
    return found


def test_no_module_of_tdescope_imports_another_in_a_circle():
    graph = grimp.build_graph("tdescope")
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle():
    # the check itself can fail: a two-module circle in a throwaway graph
    graph = grimp.ImportGraph()
    for m in ("tdescope.x", "tdescope.y"):
        graph.add_module(m)
    graph.add_import(importer="tdescope.x", imported="tdescope.y")
    graph.add_import(importer="tdescope.y", imported="tdescope.x")
    assert _cycles(graph) == [("tdescope.x", "tdescope.y"), ("tdescope.y", "tdescope.x")]


def _long_modules() -> list[str]:
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().count("\n")
        if lines <= MAX_LINES:
            continue
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        name = path.relative_to(PACKAGE).as_posix()
        if name not in LONG_MODULES or "long because" not in doc.lower():
            out.append(f"{name}: {lines} lines")
    return out


def test_no_module_is_over_400_lines_without_saying_why():
    assert _long_modules() == []


#: A window state compared as a string (`ev.state == "armed"`, `state in ("disarmed", "failed")`), or the
#: capture round told by a parameter (`params.get("round") == "capture"`): both are typed now.
_STATE_AS_TEXT = re.compile(r"""\.state\s*(==|!=|in|not in)\s*\(?\s*["'](armed|paused|disarmed|failed)["']"""
                            r"""|["']round["']\)?\]?\s*(==|!=)\s*["']capture["']""")


def test_window_states_are_compared_as_window_states_not_strings():
    """Issue #25 item 1: `WindowState` (and its `ended`) is the one vocabulary for a capture window's state,
    and `WorkloadResult.capture_round` says a run was untimed."""
    found = [f"{path.relative_to(PACKAGE)}:{n}" for path in sorted(PACKAGE.rglob("*.py"))
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if _STATE_AS_TEXT.search(line) and "older file" not in line]  # reading old files is the exception
    assert found == []
    assert _STATE_AS_TEXT.search('if ev.state in ("disarmed", "failed"):')  # the check can fail
    assert _STATE_AS_TEXT.search('if result.params.get("round") == "capture":')


def test_a_window_state_is_typed_whether_built_or_read_back():
    from tdescope.app.events import CaptureWindowState, WindowState
    from tdescope.app.session.codec import decode, encode

    built = CaptureWindowState(1.0, state="paused", captures=3)
    assert built.state is WindowState.PAUSED and f"{built.state}" == "paused" and not built.state.ended
    enc = encode(CaptureWindowState(2.0, state=WindowState.FAILED))
    back = decode(enc.kind, enc.ts, enc.payload, {})
    assert back.state is WindowState.FAILED and back.state.ended
    payload = encode(built).payload
    assert isinstance(payload, str) and '"paused"' in payload  # short: stored as text
    assert decode(enc.kind, 1.0, payload.replace('"paused"', '"sleepy"'), {}) is None  # a state nobody knows


def _direct_imports(graph, importer_package: str, imported_package: str) -> list[str]:
    """`a -> b` for each module a of importer_package that imports a module b of imported_package itself."""
    return sorted(f"{a} -> {b}" for a in graph.find_descendants(importer_package)
                  for b in graph.find_modules_directly_imported_by(a)
                  if b == imported_package or b.startswith(imported_package + "."))


def test_commands_import_no_plugin_module():
    """Issue #25 item 6: a plugin's own subcommand is its entry point (`tdescope.commands`), reached through
    the registry; `commands/oracle.py` importing `plugins.oracle` was the old shape."""
    graph = grimp.build_graph("tdescope")
    assert _direct_imports(graph, "tdescope.commands", "tdescope.plugins") == []
    assert _direct_imports(graph, "tdescope.ui", "tdescope.plugins") == []
    assert _direct_imports(graph, "tdescope.plugins", "tdescope.app") != []  # the check can fail


def test_commands_reach_ui_only_for_the_pdf_report():
    graph = grimp.build_graph("tdescope")
    found = [line for line in _direct_imports(graph, "tdescope.commands", "tdescope.ui")
             if line != "tdescope.commands.report -> tdescope.ui.export.pdf"]
    assert found == []


#: ``hasattr(x, "name")`` / ``getattr(x, "name", ...)``: asking an object what it can do by trying a name.
_PROBE = re.compile(r"""\b(?:hasattr|getattr)\(\s*([\w.]+)\s*,\s*["'](\w+)["']""")
#: Receivers where a name is rightly tried: argparse namespaces (each subcommand has its own flags), an
#: object's own half-built state in close(), modules whose constants depend on the platform, gdb's Python
#: API (the helper runs in gdb, whose version decides), an exception's args, the ability checker itself.
_MAY_PROBE = {"args", "self", "os", "mmap", "fcntl", "subscriber", "bp", "exc", "err", "rule"}


def _probing(text: str) -> list[str]:
    return [f"{m.group(1)}.{m.group(2)}" for m in _PROBE.finditer(text) if m.group(1) not in _MAY_PROBE]


def test_abilities_are_declared_not_probed_by_name():
    """Issue #25 item 6: plugin docks (ShowsInventory/ShowsResults), probe handles (DetachesAnywhere,
    MetersStops), a backend's stops_target and a host's process table are declared in Protocols; call
    sites ask those, never ``hasattr``/``getattr`` with a name."""
    found = [f"{path.relative_to(PACKAGE)}: {p}" for path in sorted(PACKAGE.rglob("*.py"))
             for p in _probing(path.read_text())]
    assert found == []
    assert _probing('if hasattr(dock, "show_result"):') == ["dock.show_result"]  # the check can fail
    assert _probing('stops = getattr(self._backend, "stops_target", True)') == ["self._backend.stops_target"]


#: What may stand directly in ui/: the package and the GUI's entry point; everything else is in a subpackage.
_UI_TOP = {"__init__.py", "app.py"}
_UI_PACKAGES = {"dialogs", "docks", "export", "gui_thread", "models", "views", "window"}


def _ui_shape(ui: Path) -> tuple[list[str], list[str]]:
    """Modules directly in ``ui`` beyond the entry point, and subpackages beyond the known ones."""
    modules = sorted(p.name for p in ui.glob("*.py") if p.name not in _UI_TOP)
    packages = sorted(p.name for p in ui.iterdir() if (p / "__init__.py").exists() and p.name not in _UI_PACKAGES)
    return modules, packages


def test_ui_modules_stand_in_subpackages_by_kind(tmp_path):
    """Issue #25 item 6: ui/ had 26 flat modules. A new module goes into docks/, views/, models/, dialogs/,
    export/, gui_thread/ or window/ (or a new subpackage, added to the list above on purpose)."""
    assert _ui_shape(PACKAGE / "ui") == ([], [])
    for name in ("__init__.py", "app.py", "hexview.py"):  # the check can fail: a flat module again
        (tmp_path / name).write_text("")
    (tmp_path / "widgets").mkdir()
    (tmp_path / "widgets" / "__init__.py").write_text("")
    assert _ui_shape(tmp_path) == (["hexview.py"], ["widgets"])
