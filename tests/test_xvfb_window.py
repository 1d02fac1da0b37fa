"""The real window on a real X server (Xvfb): start, run with capture from the keyboard, screenshot."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.xvfb
ARTIFACTS = Path(os.environ.get("TDESCOPE_ARTIFACTS", Path(__file__).parent.parent / "build" / "screenshots"))


def _free_display() -> int:
    for n in range(90, 140):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise RuntimeError("no free X display number")


@pytest.fixture
def xvfb():
    if not shutil.which("Xvfb"):
        pytest.fail("Xvfb is missing: `make test` installs it (apt-get install xvfb)")
    n = _free_display()
    proc = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while not Path(f"/tmp/.X11-unix/X{n}").exists() and time.time() < deadline:
        time.sleep(0.05)
    yield f":{n}"
    proc.terminate()
    proc.wait(5)


def _colors(png: Path) -> int:
    from PySide6.QtGui import QImage

    img = QImage(str(png))
    seen = set()
    for y in range(0, img.height(), 7):
        for x in range(0, img.width(), 7):
            seen.add(img.pixel(x, y))
    return len(seen)


def test_real_window_runs_the_workload_and_shows_pages(xvfb, tmp_path):
    env = {**os.environ, "DISPLAY": xvfb, "QT_QPA_PLATFORM": "xcb", "XDG_CONFIG_HOME": str(tmp_path)}
    gui = subprocess.Popen([sys.executable, "-m", "tdescope", "gui"], env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        # the window appears (xdotool sees it) within a few seconds
        wid = ""
        deadline = time.time() + 30
        while not wid and time.time() < deadline:
            time.sleep(0.3)
            wid = subprocess.run(["xdotool", "search", "--name", "tdescope"], env=env,
                                 capture_output=True, text=True).stdout.split()
            wid = wid[0] if wid else ""
        assert wid, "the tdescope window never appeared"
        time.sleep(2.0)  # the lab connects in the background
        # no window manager on Xvfb: focus the window ourselves, then type through XTEST
        subprocess.run(["xdotool", "windowfocus", "--sync", wid], env=env, check=False)
        subprocess.run(["xdotool", "key", "ctrl+r"], env=env, check=True)
        time.sleep(12.0)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        shot = ARTIFACTS / "main-window.png"
        subprocess.run([sys.executable, str(Path(__file__).with_name("screengrab.py")), str(shot)],
                       env=env, check=True, timeout=30)
        assert shot.stat().st_size > 20_000
        assert _colors(shot) > 20  # not a blank screen
        assert gui.poll() is None, gui.stdout.read()
    finally:
        gui.terminate()  # SIGTERM: Qt closes; the lab worker and any probe go with it
        try:
            gui.wait(20)
        except subprocess.TimeoutExpired:
            gui.kill()
