"""``--ssh`` starts the agent the ``tdescope-agent`` package installed on the host when it is this release's
(same protocol, same tdescope version), and copies its own otherwise: the real test sshd
(tests/ssh_fixture.py), the "host" being this machine. The package's place is a folder of the test's
(``ssh.INSTALLED_AGENT``), not /usr/lib: other engineers' runs share this machine.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import zipfile
from pathlib import Path

import pytest

from tdescope.app.remote import ssh
from tdescope.app.remote.agent_build import build_agent
from tdescope.app.remote.over_ssh import connect_agent
from tdescope.app.remote.protocol import PROTOCOL_VERSION
from tdescope.app.remote.ssh import SshHost


@pytest.fixture
def package_folder():
    """A world-readable folder standing for the host's ``/`` (the agent account reads the package's file)."""
    folder = Path(tempfile.mkdtemp(prefix="tdescope-deb-"))
    folder.chmod(0o755)
    place = folder / "usr" / "lib" / "tdescope-agent"
    place.mkdir(parents=True)
    for d in (folder / "usr", place.parent, place):
        d.chmod(0o755)
    yield place / "tdescope-agent.pyz"
    shutil.rmtree(folder, ignore_errors=True)


def _another_release(path: Path, protocol: int) -> None:
    """A package of another release: what the probe reads of it (its version and protocol), nothing to run."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("tdescope/__init__.py", '__version__ = "0.0.9"\n')
        zf.writestr("tdescope/app/__init__.py", "")
        zf.writestr("tdescope/app/remote/__init__.py", "")
        zf.writestr("tdescope/app/remote/protocol.py", f"PROTOCOL_VERSION = {protocol}\n")
    path.chmod(0o644)


def _started_from(agent) -> str:
    pid = int(agent.welcome["pid"])  # the agent's pid on the host (this machine)
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


def test_the_packaged_agent_of_this_release_is_started_and_another_is_not(sshd, package_folder, monkeypatch,
                                                                           tmp_path):
    monkeypatch.setattr(ssh, "INSTALLED_AGENT", str(package_folder))
    build_agent(package_folder)
    package_folder.chmod(0o644)
    agent = connect_agent(SshHost("ops", sshd.options))
    try:
        assert agent.client.welcome["version"] == PROTOCOL_VERSION
        assert f"-I {package_folder}" in _started_from(agent)  # nothing copied: the package's own file
        assert agent.client.processes([os.getpid()])  # and it answers
    finally:
        agent.close()

    cache = f"/home/{sshd.accounts['ops']}/.cache/tdescope/agent-"
    _another_release(package_folder, PROTOCOL_VERSION - 1)  # an older package: ours is copied and started
    with SshHost("ops", sshd.options) as host:
        assert host.installed_agent() == (PROTOCOL_VERSION - 1, "0.0.9")
    agent = connect_agent(SshHost("ops", sshd.options))
    try:
        assert cache in _started_from(agent) and str(package_folder) not in _started_from(agent)
    finally:
        agent.close()

    package_folder.unlink()  # no package at all
    with SshHost("ops", sshd.options) as host:
        assert host.installed_agent() is None
    package_folder.write_bytes(b"not a zip")  # a damaged one says nothing readable: ours again
    with SshHost("ops", sshd.options) as host:
        assert host.installed_agent() is None
        assert host.prepare_agent(build_agent(tmp_path / "a.pyz")).startswith(cache)
