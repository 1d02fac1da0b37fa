"""Which tdescope this is: the version (one source, :data:`tdescope.__version__`) and the git commit.

Run from a checkout, the commit is asked of git (``git describe``-like: the short
hash, ``-dirty`` with uncommitted changes). An installed wheel carries the commit
it was built from in ``resources/build-commit.txt``, written by ``make dist``.
Neither: the version alone.
"""

from __future__ import annotations

import subprocess
from importlib import resources
from pathlib import Path

import tdescope
from tdescope.app.system.child_env import child_env

__all__ = ["BUILD_COMMIT_FILE", "checkout_commit", "version_line"]

#: Written into the package by ``make dist`` (gitignored): the commit a wheel was built from.
BUILD_COMMIT_FILE = "build-commit.txt"


def _git(root: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                             env=child_env(), check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def checkout_commit(root: Path | None = None) -> str | None:
    """The commit of the checkout tdescope runs from (``abc123def456`` or ``abc123def456-dirty``), or None
    when it does not run from one (an installed wheel) or git cannot say."""
    root = root or Path(tdescope.__file__).resolve().parent.parent
    if not (root / ".git").exists():  # a worktree's .git is a file
        return None
    commit = _git(root, "rev-parse", "--short=12", "HEAD")
    if not commit:
        return None
    dirty = _git(root, "status", "--porcelain", "--untracked-files=no")
    return commit + ("-dirty" if dirty else "")


def _built_commit() -> str | None:
    try:
        text = resources.files("tdescope.resources").joinpath(BUILD_COMMIT_FILE).read_text().strip()
    except OSError:
        return None
    return text or None


def version_line() -> str:
    """What ``tdescope --version`` prints: ``tdescope 0.1.0 (git abc123def456)``, the commit left out when
    unknown."""
    commit = checkout_commit()
    where = f"git {commit}" if commit else None
    if where is None and (built := _built_commit()):
        where = f"built from git {built}"
    return f"tdescope {tdescope.__version__}" + (f" ({where})" if where else "")
