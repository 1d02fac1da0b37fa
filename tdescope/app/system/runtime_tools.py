"""The system tools tdescope uses at run time: found, or named with the package that brings them.

Nothing here installs anything (a pipx install must not run ``apt-get`` behind
the user's back; ``make setup``'s ``packaging/install-system-tools.sh`` does, for
developers). ``tdescope doctor`` lists what is missing and prints one install
line for this distribution (:func:`install_line`); a command that needs a missing
tool fails with :meth:`Tool.missing`, one line that names the package and the
doctor.
"""

from __future__ import annotations

import ctypes
import os
import shutil
from dataclasses import dataclass

from tdescope.app.errors import UserError
from tdescope.app.slots import SLOTS

__all__ = ["GDB", "LIBBPF", "PERF", "XVFB", "Tool", "apt_family", "install_line", "os_release"]


@dataclass(frozen=True, **SLOTS)
class Tool:
    """One system tool: a command on PATH or a shared library, and the Debian package that brings it."""

    name: str
    purpose: str
    package: str
    command: str = ""
    library: str = ""

    def present(self) -> bool:
        if self.command:
            return shutil.which(self.command) is not None
        try:
            ctypes.CDLL(self.library)
        except OSError:
            return False
        return True

    def require(self) -> str:
        """The command's path; UserError with :meth:`missing` when it is not on PATH."""
        path = shutil.which(self.command)
        if not path:
            raise UserError(self.missing())
        return path

    def how(self) -> str:
        """How to install it here: ``apt-get install PACKAGE``, or "install NAME" off the Debian family."""
        return install_line([self.package], sudo=False) or f"install {self.name}"

    def missing(self) -> str:
        """The one line a command that needs this tool fails with."""
        return f"{self.name} not found: {self.how()} (`tdescope doctor` checks every tool)"


GDB = Tool("gdb", "read-only breakpoints, where eBPF cannot load", "gdb", command="gdb")
PERF = Tool("perf", "hotspots and flame graphs", "linux-perf", command="perf")
LIBBPF = Tool("libbpf", "eBPF probes and exact waits", "libbpf1", library="libbpf.so.1")
XVFB = Tool("Xvfb", "the window without a screen: xvfb-run, headless screenshots", "xvfb", command="Xvfb")

#: Where a distribution of the Debian family names a package differently.
_RENAMED = {"ubuntu": {"linux-perf": "linux-tools-generic"}}


def os_release(path: str = "/etc/os-release") -> dict[str, str]:
    """``/etc/os-release`` as a dict (empty when unreadable)."""
    out = {}
    try:
        with open(path) as fh:
            for line in fh:
                key, sep, value = line.strip().partition("=")
                if sep:
                    out[key] = value.strip().strip('"')
    except OSError:
        pass
    return out


def apt_family(release: dict[str, str] | None = None) -> str | None:
    """The distribution's id when it installs with apt-get (Debian, Ubuntu and their derivatives), else None."""
    release = os_release() if release is None else release
    ids = [release.get("ID", ""), *release.get("ID_LIKE", "").split()]
    if "debian" in ids or "ubuntu" in ids:
        return release.get("ID") or "debian"
    return None


def install_line(packages, release: dict[str, str] | None = None, sudo: bool | None = None) -> str | None:
    """One ``apt-get install`` line for ``packages`` (Debian names, renamed for this distribution), or None
    when this distribution does not install with apt-get. ``sudo`` defaults to "unless root"."""
    family = apt_family(release)
    if family is None:
        return None
    renamed = _RENAMED.get(family, {})
    names = list(dict.fromkeys(renamed.get(p, p) for p in packages))
    sudo = os.geteuid() != 0 if sudo is None else sudo
    return ("sudo " if sudo else "") + "apt-get install " + " ".join(names)
