"""Frames perf could not name: shown once as their library, and what to install so they get names."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from tdescope.app.hotspots.profile import Profile
from tdescope.app.system.child_env import PERF, child_env

__all__ = ["debug_symbols_hint", "perf_has_debuginfod", "row_label", "unsymbolized"]


def _is_library_label(symbol: str, dso: str) -> bool:
    return symbol == "[" + os.path.basename(dso.replace(" (deleted)", "")) + "]"


def row_label(symbol: str, dso: str) -> str:
    """``symbol  [library]``, or the library once when perf had no name for the frame."""
    if not dso or _is_library_label(symbol, dso):
        return symbol
    return f"{symbol}  [{os.path.basename(dso)}]"


def unsymbolized(profile: Profile, min_pct: float = 5.0) -> list[tuple[str, float]]:
    """``(dso path, self %)`` of the libraries whose unnamed frames took at least ``min_pct`` of the samples."""
    out = []
    for symbol, count in profile.self_counts.items():
        dso = profile.dsos.get(symbol, "")
        pct = 100.0 * count / (profile.samples or 1)
        if dso.startswith("/") and _is_library_label(symbol, dso) and pct >= min_pct:
            out.append((dso, pct))
    return sorted(out, key=lambda d: -d[1])


@functools.lru_cache(maxsize=1)
def perf_has_debuginfod() -> bool:
    """True when the installed perf was built with debuginfod (then ``DEBUGINFOD_URLS`` fetches symbols)."""
    try:
        out = subprocess.run(["perf", "version", "--build-options"], capture_output=True, text=True,
                             timeout=10, env=child_env(PERF)).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return any("debuginfod" in line and "on" in line.split("#")[0] for line in out.splitlines())


def _codename() -> str:
    try:
        with open("/etc/os-release") as fh:
            fields = dict(line.rstrip("\n").split("=", 1) for line in fh if "=" in line)
    except OSError:
        return ""
    return fields.get("VERSION_CODENAME", "").strip('"')


def debug_symbols_hint(dso: str, pct: float) -> str:
    """One line: ``dso``'s frames (``pct`` % of the samples) have no names, and what to install
    (Debian: its package's ``-dbgsym`` from the debug archive; debuginfod when perf can use it)."""
    name = os.path.basename(dso)
    package = None
    if shutil.which("dpkg-query"):
        try:
            out = subprocess.run(["dpkg-query", "-S", dso], capture_output=True, text=True, timeout=10,
                                 env=child_env()).stdout
            package = out.split(":", 1)[0].strip() or None
        except (OSError, subprocess.SubprocessError):
            package = None
    suite = _codename()
    archive = f"deb http://deb.debian.org/debian-debug {suite}-debug main" if suite else "deb.debian.org/debian-debug"
    fix = f"install {package}-dbgsym (Debian debug archive: {archive})" if package else \
        "install its debug symbols (Debian: the package's -dbgsym)"
    if perf_has_debuginfod():
        fix += " or set DEBUGINFOD_URLS=https://debuginfod.debian.net"
    return f"{pct:.0f} % of samples are in {name} without a function name (no debug symbols): {fix}"
