"""Runtime system tools are checked, never installed (issue 26): doctor's one install line, each command's
one line naming the doctor, and the window's system libraries found by real ``ldd``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest

from tdescope.app.system import qt_libraries
from tdescope.app.system.qt_libraries import missing_qt_libraries, qt_packages, window_problem
from tdescope.app.system.runtime_tools import apt_family, install_line
from tests.conftest import TDESCOPE, assert_one_line_error

DEBIAN = {"ID": "debian", "VERSION_ID": "12"}
UBUNTU = {"ID": "ubuntu", "ID_LIKE": "debian"}
FEDORA = {"ID": "fedora"}


@pytest.fixture
def no_tools_path(tmp_path):
    """A PATH on which no gdb, perf or Xvfb is found (python is run by its absolute path)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    return {**os.environ, "PATH": str(empty)}


def test_doctor_names_what_is_missing_and_prints_one_install_line(no_tools_path):
    out = subprocess.run([*TDESCOPE, "doctor"], capture_output=True, text=True, env=no_tools_path, timeout=120)
    lines = out.stdout.splitlines()
    assert out.returncode == 1  # gdb and perf are checks that fail
    gdb = next(ln for ln in lines if ln.split()[1:2] == ["gdb"])
    assert gdb.startswith("FAIL") and "not found" in gdb and "package gdb" in gdb
    installs = [ln for ln in lines if "apt-get install" in ln]
    sudo = "" if os.geteuid() == 0 else "sudo "
    assert installs == [f"to install what is missing: {sudo}apt-get install gdb linux-perf xvfb"], lines
    assert installs[0] == lines[-1]


def test_doctor_json_gives_the_packages_and_the_install_line(no_tools_path):
    out = subprocess.run([*TDESCOPE, "doctor", "--json"], capture_output=True, text=True, env=no_tools_path,
                         timeout=120)
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["gdb"]["packages"] == ["gdb"] and checks["perf"]["packages"] == ["linux-perf"]
    assert checks["Xvfb"]["ok"] is None  # headless screenshots only: not a failure
    assert checks["install"]["packages"] == ["gdb", "linux-perf", "xvfb"]
    assert "packages" not in checks["Python"]


def test_a_command_that_needs_a_missing_tool_says_so_in_one_line_naming_the_doctor(no_tools_path):
    result = subprocess.run([*TDESCOPE, "capture", "--backend", "gdb", "--lab", "--count", "1"],
                            capture_output=True, text=True, env=no_tools_path, timeout=180)
    assert_one_line_error(result, "gdb not found: ")
    assert "apt-get install gdb" in result.stderr and "`tdescope doctor`" in result.stderr


def test_the_install_line_is_for_this_distribution():
    assert apt_family(DEBIAN) == "debian" and apt_family(UBUNTU) == "ubuntu" and apt_family(FEDORA) is None
    assert install_line(["gdb", "linux-perf"], DEBIAN, sudo=True) == "sudo apt-get install gdb linux-perf"
    assert install_line(["gdb", "linux-perf"], UBUNTU, sudo=False) == "apt-get install gdb linux-tools-generic"
    assert install_line(["gdb"], FEDORA) is None


@pytest.fixture
def plugin_missing_libraries(tmp_path, monkeypatch):
    """A shared object linked against two libraries that are then deleted: what ``ldd`` shows for the xcb
    plugin on a machine without them. The table knows one of them (as it knows libxcb-cursor.so.0, which is
    installed here and so cannot be missing), not the other."""
    if shutil.which("gcc") is None:
        pytest.fail("gcc is missing: `make test` installs it (packaging/install-system-tools.sh)")
    src = tmp_path / "x.c"
    src.write_text("int f(void) { return 0; }\n")
    libs = []
    monkeypatch.setitem(qt_libraries.PACKAGES, "libtdescope-known.so.0", "libtdescope-known0")
    for soname in ("libtdescope-known.so.0", "libtdescope-absent.so.3"):
        lib = tmp_path / soname
        subprocess.run(["gcc", "-shared", "-fPIC", f"-Wl,-soname,{soname}", "-o", str(lib), str(src)], check=True)
        libs.append(str(lib))
    plugin = tmp_path / "libqxcb.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(plugin), str(src), "-Wl,--no-as-needed", *libs], check=True)
    for lib in libs:
        os.unlink(lib)
    return plugin


def test_ldd_names_the_missing_libraries_and_their_packages(plugin_missing_libraries):
    missing = missing_qt_libraries(plugin_missing_libraries)
    assert missing == ["libtdescope-absent.so.3", "libtdescope-known.so.0"]
    assert qt_packages(missing) == ["libtdescope-known0"]  # an unknown soname is no package name
    assert qt_packages(["libxcb-cursor.so.0", "libEGL.so.1", "libgthread-2.0.so.0", "libglib-2.0.so.0"]) == [
        "libxcb-cursor0", "libegl1", "libglib2.0-0"]


def test_the_installed_qt_finds_its_libraries_here():
    plugin = qt_libraries.xcb_plugin()
    assert plugin is not None and plugin.name == "libqxcb.so"
    assert missing_qt_libraries() == []  # make setup installs them (packaging/install-system-tools.sh)


def test_the_window_refuses_in_one_line_when_a_library_is_missing(plugin_missing_libraries, monkeypatch):
    monkeypatch.setattr(qt_libraries, "xcb_plugin", lambda: plugin_missing_libraries)
    line = window_problem({"DISPLAY": ":99"})
    assert line.startswith("the window cannot start: libtdescope-absent.so.3, libtdescope-known.so.0 not found: ")
    assert "apt-get install libtdescope-known0 (" in line and "tdescope doctor" in line
    assert window_problem({}) is None  # no screen: the display line comes first (tdescope.ui.app)
    assert window_problem({"DISPLAY": ":99", "QT_QPA_PLATFORM": "offscreen"}) is None


def test_doctor_reports_missing_window_libraries(plugin_missing_libraries, monkeypatch):
    from tdescope.app import doctor

    monkeypatch.setattr(qt_libraries, "xcb_plugin", lambda: plugin_missing_libraries)
    checks = {c.name: c for c in doctor.run_checks()}
    assert checks["Qt libraries"].ok is False
    assert checks["Qt libraries"].packages == ("libtdescope-known0",)
    assert "libtdescope-absent.so.3" in checks["Qt libraries"].value
    assert checks["install"].value.endswith("apt-get install libtdescope-known0")


def test_the_window_without_a_display_names_xvfb_and_its_package_when_missing(no_tools_path):
    env = {k: v for k, v in no_tools_path.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    result = subprocess.run([*TDESCOPE, "gui"], capture_output=True, text=True, env=env, timeout=120)
    assert_one_line_error(result, "no display (DISPLAY is not set): run it under `xvfb-run` (apt-get install xvfb),")
