"""What `make dist` ships (issue 26): the wheel, the sdist, the agent zipapp and its .deb, and the version.

The artifacts are built once for the module (packaging/make-dist.sh into a temporary folder: about 15 s),
never into the checkout's dist/.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import tdescope
from tdescope.app.remote.agent_build import agent_hash, build_agent
from tdescope.app.system.build_info import checkout_commit

ROOT = Path(__file__).resolve().parent.parent
VERSION = tdescope.__version__
BPF = ("tdescope/app/probe/ebpf/capture.bpf.o", "tdescope/app/waits/ebpf/waits.bpf.o")
AGENT = "tdescope/resources/agent/tdescope-agent.pyz"


@pytest.fixture(scope="module")
def dist(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run(["bash", "packaging/make-dist.sh", sys.executable], cwd=ROOT, capture_output=True,
                          text=True, timeout=600, env={**os.environ, "DIST": str(out)})
    assert done.returncode == 0, done.stderr + done.stdout
    return out


def test_the_wheel_carries_the_bpf_objects_the_agent_and_the_resources(dist):
    with zipfile.ZipFile(dist / f"tdescope-{VERSION}-py3-none-any.whl") as whl:
        names = set(whl.namelist())
        for rel in BPF:
            assert whl.read(rel) == (ROOT / rel).read_bytes(), rel
        assert whl.read(AGENT) == (dist / "tdescope-agent.pyz").read_bytes()
        assert "tdescope/resources/templates/report.html.j2" in names
        assert "tdescope/resources/lessons/cold-warm.toml" in names
        assert "tdescope/app/gdb/_probe_helper.py" in names
        for rel in ("org.tdescope.tdescope.desktop", "org.tdescope.tdescope.metainfo.xml", "tdescope-session.xml",
                    "org.tdescope.tdescope.svg", "icons/256x256/org.tdescope.tdescope.png"):
            assert f"tdescope/resources/desktop/{rel}" in names, rel  # what desktop-install copies
        meta = whl.read(f"tdescope-{VERSION}.dist-info/METADATA").decode()
        entry = whl.read(f"tdescope-{VERSION}.dist-info/entry_points.txt").decode()
    assert f"\nVersion: {VERSION}\n" in meta
    assert "tdescope = tdescope.cli:main" in entry and "sqlcipher = tdescope.plugins.sqlcipher:ENGINE" in entry


def test_the_shipped_agent_is_the_one_these_sources_build(dist, tmp_path):
    """Reproducible: the agent in the wheel and the .deb is byte for byte what `--ssh` would build and copy."""
    assert agent_hash(dist / "tdescope-agent.pyz") == agent_hash(build_agent(tmp_path / "again.pyz"))


def test_the_sdist_builds_a_wheel_without_clang(dist):
    with tarfile.open(dist / f"tdescope-{VERSION}.tar.gz") as sdist:
        names = set(sdist.getnames())
    for rel in (*BPF, AGENT, "tdescope/app/probe/ebpf/capture.bpf.c", "pyproject.toml"):
        assert f"tdescope-{VERSION}/{rel}" in names, rel


def test_the_agent_deb_installs_the_zipapp_and_a_wrapper(dist, tmp_path):
    deb = dist / f"tdescope-agent_{VERSION}_amd64.deb"
    fields = subprocess.run(["dpkg-deb", "-f", str(deb), "Package", "Version", "Depends", "Architecture"],
                            capture_output=True, text=True, check=True).stdout
    assert "Package: tdescope-agent" in fields and f"Version: {VERSION}" in fields
    assert "Depends: python3 (>= 3.9), gdb | libbpf1, linux-perf" in fields
    subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp_path)], check=True)
    pyz = tmp_path / "usr/lib/tdescope-agent/tdescope-agent.pyz"
    assert pyz.read_bytes() == (dist / "tdescope-agent.pyz").read_bytes()
    wrapper = tmp_path / "usr/bin/tdescope-agent"
    assert os.stat(wrapper).st_mode & 0o777 == 0o755
    assert "exec /usr/bin/python3 -I /usr/lib/tdescope-agent/tdescope-agent.pyz" in wrapper.read_text()
    listing = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
    assert listing.splitlines()[0].startswith("drwxr-xr-x root/root"), listing  # not mktemp's 0700


def test_version_from_a_checkout_names_the_commit():
    out = subprocess.run([sys.executable, "-m", "tdescope", "--version"], capture_output=True, text=True,
                         timeout=60, cwd="/")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=12", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert out.returncode == 0 and out.stderr == ""
    assert re.fullmatch(rf"tdescope {re.escape(VERSION)} \(git {head}(-dirty)?\)\n", out.stdout), out.stdout


def test_version_of_an_installed_wheel_names_the_commit_it_was_built_from(dist, tmp_path):
    with zipfile.ZipFile(dist / f"tdescope-{VERSION}-py3-none-any.whl") as whl:
        whl.extractall(tmp_path)
    assert checkout_commit(tmp_path) is None  # no .git: not a checkout
    built = (tmp_path / "tdescope/resources/build-commit.txt").read_text().strip()
    assert built == checkout_commit(ROOT)
    out = subprocess.run([sys.executable, "-m", "tdescope", "--version"], capture_output=True, text=True,
                         timeout=60, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert out.stdout == f"tdescope {VERSION} (built from git {built})\n", out.stdout + out.stderr
