"""Frames perf could not name: shown once as their library, and what to install so they get names."""

from __future__ import annotations

import os
import shutil
import subprocess

from tdescope.app.hotspots.profile import Profile

__all__ = ["debug_symbols_hint", "row_label", "unsymbolized"]


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


def debug_symbols_hint(dso: str) -> str:
    """One line: ``dso`` has no symbols perf can use, and what to install (Debian: its package's -dbgsym)."""
    name = os.path.basename(dso)
    package = None
    if shutil.which("dpkg-query"):
        try:
            out = subprocess.run(["dpkg-query", "-S", dso], capture_output=True, text=True, timeout=10).stdout
            package = out.split(":", 1)[0].strip() or None if out else None
        except (OSError, subprocess.SubprocessError):
            package = None
    fix = (f"install {package}-dbgsym from the Debian debug archive (deb.debian.org/debian-debug; Ubuntu: "
           f"ddebs.ubuntu.com)" if package else "install its debug symbols package")
    return (f"no symbols for {name}: its frames show as [{name}]; {fix}, or let perf fetch them with "
            f"DEBUGINFOD_URLS=https://debuginfod.debian.net")
