"""Startup as a user sees it: ``tdescope gui`` launched to its window mapped on an X server.

Each launch spawns ``python -m tdescope gui`` on a private Xvfb display and
polls ``xdotool search --onlyvisible --name tdescope`` every 20 ms; the time
from spawn to the first visible window is the figure (median over launches).
The process is then closed with SIGTERM, as the Xvfb test does.

Run alone: ``python -m bench.bench_startup [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench._report import goal

goal("startup_s", "launch (`python -m tdescope gui`) to window mapped on Xvfb, median", "≤ 3", lambda v: v <= 3)


def _free_display() -> int:
    for n in range(150, 200):
        if not Path(f"/tmp/.X11-unix/X{n}").exists() and not Path(f"/tmp/.X{n}-lock").exists():
            return n
    raise RuntimeError("no free X display number")


def _launch(env: dict) -> float:
    t0 = time.perf_counter()
    gui = subprocess.Popen([sys.executable, "-m", "tdescope", "gui"], env=env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        while time.perf_counter() - t0 < 60:
            found = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "tdescope"], env=env,
                                   capture_output=True, text=True).stdout.split()
            if found:
                return time.perf_counter() - t0
            if gui.poll() is not None:
                raise RuntimeError(f"tdescope gui exited with {gui.returncode} before showing its window")
            time.sleep(0.02)
        raise RuntimeError("the tdescope window never appeared")
    finally:
        gui.terminate()  # SIGTERM: Qt closes; the lab worker goes with it
        try:
            gui.wait(20)
        except subprocess.TimeoutExpired:
            gui.kill()


def run(quick: bool) -> dict:
    if not (shutil.which("Xvfb") and shutil.which("xdotool")):
        raise RuntimeError("Xvfb and xdotool are needed (make system-tools)")
    n = _free_display()
    xvfb = subprocess.Popen(["Xvfb", f":{n}", "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    times = []
    try:
        deadline = time.time() + 10
        while not Path(f"/tmp/.X11-unix/X{n}").exists() and time.time() < deadline:
            time.sleep(0.05)
        with tempfile.TemporaryDirectory(prefix="tdescope-bench-startup-") as tmp:
            env = {**os.environ, "DISPLAY": f":{n}", "QT_QPA_PLATFORM": "xcb", "XDG_CONFIG_HOME": tmp}
            for _ in range(3 if quick else 5):
                times.append(_launch(env))
                time.sleep(0.5)
    finally:
        xvfb.terminate()
        xvfb.wait(5)
    return {"startup_s": round(statistics.median(times), 2), "startup_all_s": [round(t, 2) for t in times]}


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
