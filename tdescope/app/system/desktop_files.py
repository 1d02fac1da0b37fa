"""``tdescope desktop-install``: the desktop entry, icons, AppStream metadata and the ``.tds`` type, per user.

The files ship in the package (``resources/desktop``; ``packaging/desktop`` is the
same folder) so a pipx install has them. They go under ``$XDG_DATA_HOME``
(``~/.local/share``), the desktop entry's ``Exec`` naming the installed command by
its full path (pipx's ``~/.local/bin`` is often not on a desktop session's PATH).
Then the desktop's own tools index them, when installed: ``update-mime-database``
(so a ``.tds`` file is a tdescope session and a double-click replays it) and
``update-desktop-database``; a missing one is said, not installed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from tdescope.app.system.child_env import child_env

__all__ = ["APP_ID", "DesktopInstall", "data_home", "install_desktop_files", "tdescope_command"]

APP_ID = "org.tdescope.tdescope"
MIME_FILE = "tdescope-session.xml"


@dataclass(frozen=True, slots=True)
class DesktopInstall:
    """What ``install_desktop_files`` wrote, and what the desktop's index tools said (or that they are missing)."""

    written: tuple[Path, ...]
    notes: tuple[str, ...]


def data_home(env=None) -> Path:
    """``$XDG_DATA_HOME``, else ``~/.local/share``."""
    env = os.environ if env is None else env
    return Path(env.get("XDG_DATA_HOME") or Path(env.get("HOME") or Path.home()) / ".local/share")


def tdescope_command() -> str:
    """The full path of the ``tdescope`` command running now (pipx's shim), else the one on PATH, else the name."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "tdescope" and os.access(argv0, os.X_OK):
        return str(argv0.resolve() if not argv0.is_absolute() else argv0)
    return shutil.which("tdescope") or "tdescope"


def _exec_quoted(command: str) -> str:
    """``command`` as one argument of an Exec key (the desktop entry spec's quoting, then its string escapes)."""
    if not any(c in command for c in " \t\n\"'\\><~|&;$*?#()`"):
        return command
    inner = "".join("\\" + c if c in '"`$\\' else c for c in command)
    return ('"' + inner + '"').replace("\\", "\\\\")


def _desktop_entry(text: str, command: str) -> str:
    command = _exec_quoted(command)
    out = []
    for line in text.splitlines():
        if line.startswith("Exec="):
            line = f"Exec={command} %f"
        elif line.startswith("TryExec="):
            line = f"TryExec={command}"
        out.append(line)
    return "\n".join(out) + "\n"


def _index(tool: list[str], package: str) -> str:
    if shutil.which(tool[0]) is None:
        return f"{tool[0]} not found: the desktop indexes it at next login, or apt-get install {package}"
    done = subprocess.run(tool, capture_output=True, text=True, timeout=120, env=child_env(), check=False)
    if done.returncode != 0:
        return f"{tool[0]} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}"
    return f"{tool[0]}: indexed"


def install_desktop_files(home: Path | None = None, command: str | None = None) -> DesktopInstall:
    """Put the desktop files under ``home`` (default :func:`data_home`), the entry running ``command``."""
    home = home or data_home()
    src = resources.files("tdescope.resources").joinpath("desktop")
    command = command or tdescope_command()
    files = {
        home / "applications" / f"{APP_ID}.desktop":
            _desktop_entry(src.joinpath(f"{APP_ID}.desktop").read_text(), command).encode(),
        home / "metainfo" / f"{APP_ID}.metainfo.xml": src.joinpath(f"{APP_ID}.metainfo.xml").read_bytes(),
        home / "mime" / "packages" / MIME_FILE: src.joinpath(MIME_FILE).read_bytes(),
        home / "icons/hicolor/scalable/apps" / f"{APP_ID}.svg": src.joinpath(f"{APP_ID}.svg").read_bytes(),
    }
    for size in src.joinpath("icons").iterdir():
        files[home / "icons/hicolor" / size.name / "apps" / f"{APP_ID}.png"] = size.joinpath(f"{APP_ID}.png").read_bytes()
    for path, data in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_bytes(data)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    notes = (_index(["update-mime-database", str(home / "mime")], "shared-mime-info"),
             _index(["update-desktop-database", str(home / "applications")], "desktop-file-utils"))
    return DesktopInstall(tuple(sorted(files)), notes)
