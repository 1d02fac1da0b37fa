"""Which cipher the one ssh connection tries first: AES-GCM where this CPU has AES instructions.

OpenSSH's default list starts with chacha20-poly1305. Captures are the heaviest thing ssh carries for
tdescope (8 KiB a page pair, tens of thousands a second), and with chacha20-poly1305 the ssh client
and sshd spent 19 and 18 µs of CPU on each 4 KiB page pair, with aes128-gcm 12 and 12 (AES-NI and
carry-less multiply do the work; docs/design-notes.md, branch sshfast). On two cores shared with the
target that is what decides how many pages arrive.

Only the order changes, and only when nobody chose: when ``ssh -G`` says the connection's cipher list
is ssh's own default (no ``Ciphers`` in ``~/.ssh/config``, ``/etc/ssh/ssh_config`` or the user's
``--ssh-option``), the AES-GCM ciphers already in it move to the front. Nothing is added, nothing
removed; host keys, key exchange and MACs are untouched, and the server still picks from what it allows.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from tdescope.app.system.child_env import SSH, child_env

__all__ = ["GCM", "cipher_words", "cpu_has_aes"]

#: The ciphers moved to the front, in this order, when the CPU has AES instructions.
GCM = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def cpu_has_aes(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether this machine's CPU lists the ``aes`` flag (x86 AES-NI; arm64 says ``aes`` in Features)."""
    try:
        with open(cpuinfo) as f:
            for line in f:
                if line.startswith(("flags", "Features")) and "aes" in line.split(":", 1)[-1].split():
                    return True
    except OSError:
        pass
    return False


def _ciphers(argv: Sequence[str]) -> list[str] | None:
    """The ``ciphers`` line of ``ssh -G``'s answer (the configuration ssh would use; it connects to nothing)."""
    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=10, env=child_env(SSH),
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in done.stdout.splitlines() if done.returncode == 0 else ():
        key, _, value = line.partition(" ")
        if key == "ciphers":
            return value.split(",")
    return None


def cipher_words(ssh_words: Sequence[str], dest: str, aes: bool | None = None) -> tuple[str, ...]:
    """``("-o", "Ciphers=...")`` that puts AES-GCM first, or ``()`` when the CPU has no AES instructions,
    the user's configuration chose the ciphers, or AES-GCM is first already.

    ``ssh_words`` is the ssh command line before the destination (``ssh`` and the user's options)."""
    if not (cpu_has_aes() if aes is None else aes):
        return ()
    effective = _ciphers([*ssh_words, "-G", dest])
    default = _ciphers([ssh_words[0], "-F", "none", "-G", "localhost"])  # neither the user's nor the system's file
    if effective is None or effective != default:
        return ()
    first = [c for c in GCM if c in effective]
    if not first or effective[:len(first)] == first:
        return ()
    return ("-o", "Ciphers=" + ",".join(first + [c for c in effective if c not in first]))
