"""The desktop (issue 26): the entry, icons, AppStream metadata and the ``.tds`` type pass the freedesktop
validators, `tdescope desktop-install` puts them in place, and the entry opens a session as a replay."""

from __future__ import annotations

import os
import shlex
import shutil
import struct
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tdescope
from conftest import TDESCOPE, wait_for
from test_xvfb_window import xvfb  # noqa: F401 - the fixture: a real X server
from tdescope.app.events import PageCapture
from tdescope.app.session.file import SessionRecorder
from tdescope.app.session.meta import SessionMeta
from tdescope.app.system.desktop_files import APP_ID

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "tdescope/resources/desktop"
BIN = str(Path(sys.executable).parent)  # the venv's bin/, where its `tdescope` command is


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: `make test` installs it (packaging/install-system-tools.sh)")
    return path


def _png_size(path: Path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


@pytest.fixture
def installed(tmp_path):
    home = tmp_path / "share"
    done = subprocess.run([*TDESCOPE, "desktop-install", "--data-home", str(home)], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"})
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return home, done.stdout


def test_the_entry_and_the_metadata_pass_the_validators(installed):
    home, _ = installed
    for entry in (SRC / f"{APP_ID}.desktop", home / "applications" / f"{APP_ID}.desktop"):
        out = subprocess.run([_tool("desktop-file-validate"), str(entry)], capture_output=True, text=True)
        assert out.returncode == 0 and out.stdout.strip() == "", out.stdout  # not even a hint
    out = subprocess.run([_tool("appstreamcli"), "validate", "--no-net", str(SRC / f"{APP_ID}.metainfo.xml")],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "E:" not in out.stdout and "W:" not in out.stdout, out.stdout


def test_the_metadata_names_this_release_and_the_screenshots_in_docs():
    root = ET.parse(SRC / f"{APP_ID}.metainfo.xml").getroot()
    assert root.find("releases/release").get("version") == tdescope.__version__  # newest first
    images = root.findall("screenshots/screenshot/image")
    assert len(images) >= 3
    for image in images:
        png = ROOT / "docs/screenshots" / image.text.rsplit("/", 1)[1]
        assert _png_size(png) == (int(image.get("width")), int(image.get("height"))), png
    assert root.find("launchable").text == f"{APP_ID}.desktop"


def test_the_png_icons_are_the_svg_at_their_sizes():
    ET.parse(SRC / f"{APP_ID}.svg")  # well-formed
    sizes = sorted(int(d.name.split("x")[0]) for d in (SRC / "icons").iterdir())
    assert sizes == [16, 24, 32, 48, 64, 128, 256]
    for n in sizes:
        assert _png_size(SRC / f"icons/{n}x{n}/{APP_ID}.png") == (n, n)


def test_desktop_install_puts_the_files_in_place_and_registers_the_tds_type(installed):
    home, stdout = installed
    _tool("update-mime-database")
    entry = (home / "applications" / f"{APP_ID}.desktop").read_text()
    assert f"Exec={BIN}/tdescope %f\n" in entry and f"TryExec={BIN}/tdescope\n" in entry
    for rel in (f"metainfo/{APP_ID}.metainfo.xml", "mime/packages/tdescope-session.xml",
                f"icons/hicolor/scalable/apps/{APP_ID}.svg", f"icons/hicolor/48x48/apps/{APP_ID}.png"):
        assert os.stat(home / rel).st_mode & 0o777 == 0o644, rel
        assert str(home / rel) in stdout
    assert "application/x-tdescope-session:*.tds" in (home / "mime/globs2").read_text()
    assert "update-mime-database: indexed" in stdout
    if shutil.which("update-desktop-database"):
        cache = (home / "applications/mimeinfo.cache").read_text()
        assert f"application/x-tdescope-session={APP_ID}.desktop;" in cache


def test_a_path_with_a_space_is_one_argument_of_exec(tmp_path):
    from tdescope.app.system.desktop_files import install_desktop_files

    install_desktop_files(tmp_path, command="/home/a trainer/.local/bin/tdescope")
    entry = (tmp_path / "applications" / f"{APP_ID}.desktop").read_text()
    assert 'Exec="/home/a trainer/.local/bin/tdescope" %f\n' in entry
    out = subprocess.run([_tool("desktop-file-validate"), str(tmp_path / "applications" / f"{APP_ID}.desktop")],
                         capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "", out.stdout


@pytest.mark.xvfb
def test_opening_a_tds_with_the_entry_replays_it(installed, xvfb, tmp_path):  # noqa: F811
    """What a double-click does: the entry's Exec with %f = the file, on a real X server."""
    home, _ = installed
    session = tmp_path / "lesson one.tds"
    with SessionRecorder(session, SessionMeta.collect("sqlcipher", "SQLCipher (embedded lab)")) as rec:
        rec.record(PageCapture(1_700_000_000.0, 1, "sqlcipher_page_cipher", "decrypt", 7, os.urandom(1024),
                               bytes(1024), 20.0, "sqlcipher"))
    exec_line = next(ln for ln in (home / "applications" / f"{APP_ID}.desktop").read_text().splitlines()
                     if ln.startswith("Exec="))[5:]
    argv = [str(session) if a == "%f" else a for a in shlex.split(exec_line)]
    env = {**os.environ, "DISPLAY": xvfb, "XDG_DATA_HOME": str(tmp_path / "data")}
    env.pop("QT_QPA_PLATFORM", None)
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def replay_window():
            assert proc.poll() is None, proc.communicate()
            out = subprocess.run([_tool("xdotool"), "search", "--name", "REPLAY — lesson one.tds"], env=env,
                                 capture_output=True, text=True)
            return out.stdout.strip()
        wait_for(replay_window, timeout=90, interval=0.5, what="the replay window")
    finally:
        proc.terminate()
        proc.wait(30)
