"""Build ``tdescope-agent.pyz``: the agent's modules, pyelftools and the BPF objects in one zipapp.

What goes in is what the agent imports (``modulefinder`` from
:mod:`~tdescope.app.remote.agent_main`), restricted to ``tdescope`` and
``elftools``: the host's own ``python3`` brings the standard library. A module
that pulls Qt, numpy, psycopg or a plugin into the agent fails the build. The
archive is byte-for-byte reproducible (fixed timestamps, sorted entries), so its
content hash names it on the host.
"""

from __future__ import annotations

import hashlib
import importlib
import modulefinder
import os
import zipfile
from pathlib import Path

from tdescope.app.errors import UserError

__all__ = ["AGENT_NAME", "agent_hash", "agent_modules", "build_agent"]

AGENT_NAME = "tdescope-agent.pyz"
#: Packages the agent carries; everything else it imports must be the standard library.
CARRIED = ("tdescope", "elftools", "pygdbmi")
#: What must never be in the agent: the host has no Qt, no numpy, no database drivers, no plugins.
FORBIDDEN = ("PySide6", "shiboken6", "numpy", "pyqtgraph", "psycopg", "pymysql", "capstone", "tdescope.plugins",
             "tdescope.ui")
#: Package data the agent needs at run time (copied to its spool, where libbpf and gdb can open them).
DATA = ("tdescope/app/probe/ebpf/capture.bpf.o", "tdescope/app/waits/ebpf/waits.bpf.o",
        "tdescope/app/gdb/_probe_helper.py")  # run by gdb's own Python, next to app/probe/frames.py
#: The zipapp's entry: an old python3 is one line (what it carries is checked for 3.9 by
#: tests/test_agent_python39.py; pyelftools 0.33 would need 3.10, so pyproject keeps it below).
MAIN = """import os, sys
if sys.version_info < (3, 9):
    sys.stderr.write("tdescope agent: needs python3 3.9 or newer, this host has %d.%d\\n" % sys.version_info[:2])
    sys.exit(3)
from tdescope.app.remote.agent_main import main
sys.stdout.flush()
os._exit(main())
"""
_STAMP = (2020, 1, 1, 0, 0, 0)


def _root(package: str) -> Path:
    """The directory that holds ``package``."""
    return Path(importlib.import_module(package).__file__).parent.parent


def _roots() -> list[str]:
    return [str(_root(name)) for name in CARRIED]


def agent_modules() -> dict[str, Path]:
    """Archive name -> source file of every module the agent imports from :data:`CARRIED`."""
    finder = modulefinder.ModuleFinder(path=_roots())
    finder.run_script(str(Path(__file__).with_name("agent_main.py")))
    names = set(finder.modules)
    bad = sorted(n for n in names if n.split(".")[0] in FORBIDDEN or n.startswith(FORBIDDEN))
    if bad:
        raise UserError(f"the agent would import {', '.join(bad)}: keep it to the standard library")
    out = {}
    for name, module in finder.modules.items():
        if name.split(".")[0] not in CARRIED or not module.__file__:
            continue
        src = Path(module.__file__)
        rel = name.replace(".", "/") + ("/__init__.py" if src.name == "__init__.py" else ".py")
        out[rel] = src
    out["tdescope/app/remote/agent_main.py"] = Path(__file__).with_name("agent_main.py")  # ran as __main__
    # every package on the way needs its __init__ (namespace-free imports)
    for rel in list(out):
        parts = rel.split("/")[:-1]
        for i in range(1, len(parts) + 1):
            init = "/".join(parts[:i]) + "/__init__.py"
            if init not in out:
                src = _root(parts[0]) / init
                if src.exists():
                    out[init] = src
    return out


def build_agent(path: str | os.PathLike) -> Path:
    """Write the agent zipapp to ``path`` (a ``.pyz`` file, or a directory: ``path/tdescope-agent.pyz``);
    returns the file."""
    dest = Path(path)
    if dest.suffix != ".pyz":
        dest = dest / AGENT_NAME
    root = _root("tdescope")
    entries = {name: src.read_bytes() for name, src in agent_modules().items()}
    for rel in DATA:
        src = root / rel
        if not src.exists():
            raise UserError(f"{rel} is not built: run make setup")
        entries[rel] = src.read_bytes()
    for package in CARRIED[1:]:  # the bundled libraries' licences travel with them
        for lic in sorted(_root(package).glob(f"{package.replace('elftools', 'pyelftools')}-*.dist-info/**/LICEN[CS]E*")):
            entries[f"{package}/{lic.name}"] = lic.read_bytes()
    entries["__main__.py"] = MAIN.encode()
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        fh.write(b"#!/usr/bin/env python3\n")  # runnable on its own too; offsets stay right (as zipapp does)
        with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for name in sorted(entries):
                info = zipfile.ZipInfo(name, _STAMP)
                info.external_attr = 0o644 << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                zf.writestr(info, entries[name])
    os.chmod(tmp, 0o755)
    os.replace(tmp, dest)
    return dest


def agent_hash(path: str | os.PathLike) -> str:
    """The SHA-256 of the agent file: the name it is cached under on a host."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


if __name__ == "__main__":
    import sys
    print(build_agent(sys.argv[1] if len(sys.argv) > 1 else "dist"))
