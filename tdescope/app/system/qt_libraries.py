"""The system libraries the window's Qt needs and this machine lacks.

The PySide6 wheel brings Qt itself, not the X11, OpenGL and font libraries under
it: on a minimal Debian the window fails to start (an ImportError naming
``libEGL.so.1``, or Qt aborting on the xcb platform plugin). ``ldd`` on that
plugin lists every library it would load, transitively (Qt's own are found beside
it); those "not found" are named with their Debian package. PySide6 is located,
never imported (``app/`` stays free of Qt).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
from pathlib import Path

from tdescope.app.system.child_env import child_env
from tdescope.app.system.runtime_tools import install_line

__all__ = ["PACKAGES", "missing_qt_libraries", "qt_packages", "window_problem", "xcb_plugin"]

#: Debian package of each library the xcb platform plugin loads (PySide6 6.9 on bookworm).
PACKAGES = {
    "libEGL.so.1": "libegl1", "libGL.so.1": "libgl1", "libGLX.so.0": "libglx0", "libGLdispatch.so.0": "libglvnd0",
    "libxkbcommon.so.0": "libxkbcommon0", "libxkbcommon-x11.so.0": "libxkbcommon-x11-0",
    "libxcb.so.1": "libxcb1", "libxcb-cursor.so.0": "libxcb-cursor0", "libxcb-icccm.so.4": "libxcb-icccm4",
    "libxcb-util.so.1": "libxcb-util1", "libxcb-image.so.0": "libxcb-image0", "libxcb-keysyms.so.1": "libxcb-keysyms1",
    "libxcb-randr.so.0": "libxcb-randr0", "libxcb-render-util.so.0": "libxcb-render-util0",
    "libxcb-shm.so.0": "libxcb-shm0", "libxcb-sync.so.1": "libxcb-sync1", "libxcb-xfixes.so.0": "libxcb-xfixes0",
    "libxcb-render.so.0": "libxcb-render0", "libxcb-shape.so.0": "libxcb-shape0", "libxcb-xkb.so.1": "libxcb-xkb1",
    "libX11-xcb.so.1": "libx11-xcb1", "libX11.so.6": "libx11-6", "libXau.so.6": "libxau6", "libXdmcp.so.6": "libxdmcp6",
    "libglib-2.0.so.0": "libglib2.0-0", "libgthread-2.0.so.0": "libglib2.0-0", "libfontconfig.so.1": "libfontconfig1",
    "libfreetype.so.6": "libfreetype6", "libdbus-1.so.3": "libdbus-1-3", "libpng16.so.16": "libpng16-16",
    "libexpat.so.1": "libexpat1", "libbrotlidec.so.1": "libbrotli1", "libbrotlicommon.so.1": "libbrotli1",
}


def xcb_plugin() -> Path | None:
    """The installed PySide6's xcb platform plugin, or None without PySide6."""
    spec = importlib.util.find_spec("PySide6")
    if spec is None or not spec.submodule_search_locations:
        return None
    plugin = Path(next(iter(spec.submodule_search_locations))) / "Qt/plugins/platforms/libqxcb.so"
    return plugin if plugin.exists() else None


def missing_qt_libraries(plugin: Path | None = None) -> list[str]:
    """Sonames the xcb plugin would load and cannot find (empty when all are there, or without PySide6)."""
    plugin = plugin or xcb_plugin()
    if plugin is None:
        return []
    try:
        out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=30, env=child_env(),
                             check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return sorted({ln.split()[0] for ln in out.splitlines() if "=> not found" in ln})


def qt_packages(sonames: list[str]) -> list[str]:
    """The Debian packages that bring ``sonames`` (those the table knows; the others stay named as sonames)."""
    return list(dict.fromkeys(PACKAGES[s] for s in sonames if s in PACKAGES))


def window_problem(env=None) -> str | None:
    """The one line for a window that cannot open on this X display for want of libraries, else None.

    Only for the xcb platform (a ``DISPLAY``, no other ``QT_QPA_PLATFORM``): without a screen the user
    hears about the screen first."""
    env = os.environ if env is None else env
    if env.get("QT_QPA_PLATFORM", "xcb") != "xcb" or not env.get("DISPLAY"):
        return None
    missing = missing_qt_libraries()
    if not missing:
        return None
    packages = qt_packages(missing)
    how = (install_line(packages, sudo=False) if packages else None) or "install them"
    return f"the window cannot start: {', '.join(missing)} not found: {how} (`tdescope doctor` checks every tool)"
