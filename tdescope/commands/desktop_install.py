"""``tdescope desktop-install``: the menu entry, icons and the ``.tds`` type for this user (``~/.local/share``)."""

from __future__ import annotations

from pathlib import Path

from tdescope.commands._stdout import emit

HELP = ("put tdescope in this user's desktop menu (~/.local/share): the entry, its icons, AppStream metadata "
        "and the .tds type, so a double-click on a session replays it")


def add_arguments(parser) -> None:
    parser.add_argument("--data-home", metavar="DIR", type=Path,
                        help="where to install (default: $XDG_DATA_HOME, else ~/.local/share)")


def run(args) -> int:
    from tdescope.app.system.desktop_files import install_desktop_files

    done = install_desktop_files(args.data_home)
    for path in done.written:
        emit(str(path))
    for note in done.notes:
        emit(note)
    return 0
