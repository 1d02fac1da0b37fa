"""The one ssh connection tries AES-GCM first where nobody chose a cipher, and keeps any choice made
(``app/remote/ssh_cipher.py``): real ``ssh -G`` and the real test sshd (tests/ssh_fixture.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tdescope.app.remote.ssh import SshHost
from tdescope.app.remote.ssh_cipher import GCM, cipher_words, cpu_has_aes


def _negotiated(host: SshHost) -> str:
    """The cipher the master agreed on, from its own debug log (``-E`` in its 0700 folder)."""
    log = (Path(host.control_path).parent / "master.log").read_text(errors="replace")
    lines = [line for line in log.splitlines() if "kex: server->client cipher:" in line]
    assert lines, log[-2000:]
    return lines[-1].split("cipher:")[1].split()[0]


def test_only_the_order_changes_and_only_when_nobody_chose(tmp_path):
    words = cipher_words(["ssh", "-F", "none"], "db1", aes=True)
    assert words[0] == "-o" and words[1].startswith("Ciphers=" + ",".join(GCM))
    default = cipher_words(["ssh", "-F", "none"], "db1", aes=True)[1].split("=", 1)[1].split(",")
    assert len(default) == len(set(default)) > len(GCM)
    # the same members as ssh's own default list: nothing added, nothing removed
    import subprocess
    own = subprocess.run(["ssh", "-F", "none", "-G", "db1"], capture_output=True, text=True).stdout
    listed = next(line.split()[1] for line in own.splitlines() if line.startswith("ciphers "))
    assert sorted(listed.split(",")) == sorted(default)
    # a choice on the command line, in a config file, or a CPU without AES: left alone
    assert cipher_words(["ssh", "-F", "none", "-o", "Ciphers=chacha20-poly1305@openssh.com"], "db1", aes=True) == ()
    config = tmp_path / "config"
    config.write_text("Host db1\n  Ciphers aes256-ctr\n")
    assert cipher_words(["ssh", "-F", str(config)], "db1", aes=True) == ()
    assert cipher_words(["ssh", "-F", str(config)], "other", aes=True)  # that Host block is not this host
    assert cipher_words(["ssh", "-F", "none"], "db1", aes=False) == ()


def test_cpu_flags_are_read_from_cpuinfo(tmp_path):
    x86, arm, none = tmp_path / "x86", tmp_path / "arm", tmp_path / "none"
    x86.write_text("processor\t: 0\nflags\t\t: fpu sse2 aes avx2\n")
    arm.write_text("processor\t: 0\nFeatures\t: fp asimd aes pmull\n")
    none.write_text("processor\t: 0\nflags\t\t: fpu sse2 aesx\n")
    assert cpu_has_aes(str(x86)) and cpu_has_aes(str(arm))
    assert not cpu_has_aes(str(none)) and not cpu_has_aes(str(tmp_path / "missing"))


@pytest.mark.skipif(not cpu_has_aes(), reason="this CPU has no AES instructions: nothing is reordered")
def test_the_connection_agrees_on_aes_gcm_unless_the_user_chose(sshd):
    with SshHost("ops", (*sshd.options, "-o", "LogLevel=DEBUG1")) as host:
        assert _negotiated(host) == GCM[0]
        assert host.run(["true"]) == ""
    chosen = (*sshd.options, "-o", "Ciphers=chacha20-poly1305@openssh.com", "-o", "LogLevel=DEBUG1")
    with SshHost("ops", chosen) as host:
        assert _negotiated(host) == "chacha20-poly1305@openssh.com"
