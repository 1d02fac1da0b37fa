"""Percona pg_tde 1.0.0-beta2 built against the PostgreSQL 16.2 of the ``pgserver`` wheel, cached.

The wheel (``pgserver==0.1.4``, an extra of the project) carries PostgreSQL's
binaries, server headers and PGXS. :func:`prepared_server` copies its install
tree into the user's cache dir (``$XDG_CACHE_HOME/tdescope/pg-tde/<key>``),
builds pg_tde from its source tarball (or a source folder) with PGXS into that
copy, and returns the copy. The key hashes the source and the wheel's version,
so a second start finds the build and takes no time. The source is never
copied into the project: it is found at ``../shared/vendor/pg_tde`` beside the
repository, in ``$TDESCOPE_PG_TDE_SOURCE``, or wherever the user says.
Facts: ``../shared/research/postgres-tde.md``.
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib.util
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.app.system.child_env import child_env

__all__ = ["PgTdeServer", "SOURCE_ENV", "find_source", "prepared_server"]

#: A pg_tde source (tarball or unpacked folder) given by the user.
SOURCE_ENV = "TDESCOPE_PG_TDE_SOURCE"
TARBALL = "pg_tde-1.0.0-beta2-srconly.tar.gz"
#: Where the vendored source sits, relative to the repository root (the project's parent holds shared/).
_VENDORED = Path(__file__).resolve().parents[3].parent / "shared" / "vendor" / "pg_tde" / TARBALL
_BUILD_VERSION = "1"  # bump when the build steps change: a new cache key


@dataclass(frozen=True)
class PgTdeServer:
    """A PostgreSQL 16.2 install with pg_tde in it (in the cache: treat as read-only)."""

    root: Path
    source: str

    @property
    def bindir(self) -> Path:
        return self.root / "pgserver" / "pginstall" / "bin"

    @property
    def library(self) -> Path:
        """``pg_tde.so``, where the probes look for ``pg_tde_crypt_tuple``."""
        return self.root / "pgserver" / "pginstall" / "lib" / "postgresql" / "pg_tde.so"


def find_source(given: str | os.PathLike | None = None) -> Path:
    """The pg_tde source to build: ``given``, ``$TDESCOPE_PG_TDE_SOURCE``, or the vendored tarball.

    Raises UserError, in one line, naming what is needed when none is there.
    """
    for candidate in (given, os.environ.get(SOURCE_ENV), _VENDORED):
        if candidate:
            path = Path(candidate).expanduser()
            if path.is_dir() and (path / "pg_tde.control").exists():
                return path
            if path.is_file():
                return path
            if candidate is not _VENDORED:
                raise UserError(f"pg-tde lab: {path} is not a pg_tde source tarball or folder")
    raise UserError(f"pg-tde lab: needs Percona pg_tde 1.0.0-beta2's source ({TARBALL}): give --pg-tde-source "
                    f"PATH or set {SOURCE_ENV}")


def _wheel_root() -> Path:
    spec = importlib.util.find_spec("pgserver")  # its files only: importing it would start its own machinery
    if spec is None or spec.origin is None:
        raise UserError("pg-tde lab: needs the pgserver==0.1.4 wheel (PostgreSQL 16.2): "
                        "pip install 'tdescope[pgtde]' (make setup installs it)")
    return Path(spec.origin).resolve().parent.parent


def _digest(source: Path) -> str:
    h = hashlib.sha256(_BUILD_VERSION.encode())
    if source.is_file():
        with open(source, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    else:
        for path in sorted(p for p in source.rglob("*") if p.is_file() and ".git" not in p.parts):
            h.update(str(path.relative_to(source)).encode())
            h.update(path.read_bytes())
    from importlib.metadata import version
    h.update(version("pgserver").encode())
    return h.hexdigest()[:16]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/tdescope/pg-tde`` (``~/.cache`` when unset)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tdescope" / "pg-tde"


def prepared_server(source: str | os.PathLike | None = None,
                    progress: Callable[[str], None] | None = None) -> PgTdeServer:
    """The cached install for this source, built first when missing (~15 s on 2 cores)."""
    say = progress or (lambda _m: None)
    src = find_source(source)
    key = _digest(src)
    root = cache_dir() / key
    done = PgTdeServer(root, str(src))
    if (root / ".complete").exists() and done.library.exists():
        return done
    root.parent.mkdir(parents=True, exist_ok=True)
    with open(root.parent / f".{key}.lock", "a") as lock:  # one builder at a time; the others take its build
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (root / ".complete").exists() and done.library.exists():
            return done
        _build(src, root, say)
    say("pg-tde lab: pg_tde built and cached")
    return done


def _build(src: Path, root: Path, say: Callable[[str], None]) -> None:
    """Build into a temporary folder beside ``root``, then put it in ``root``'s place."""
    key = root.name
    wheel = _wheel_root()
    work = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=root.parent))
    try:
        say("pg-tde lab: copying the pgserver wheel's PostgreSQL 16.2…")
        shutil.copytree(wheel / "pgserver" / "pginstall", work / "pgserver" / "pginstall", symlinks=True)
        shutil.copytree(wheel / "pgserver.libs", work / "pgserver.libs", symlinks=True)
        build = work / "build"
        if src.is_file():
            say(f"pg-tde lab: unpacking {src.name}…")
            with tarfile.open(src) as tar:
                tar.extractall(build, filter="data")
            tops = [p for p in build.iterdir() if p.is_dir()]
            tree = tops[0] if len(tops) == 1 else build
        else:
            tree = build / "pg_tde"
            shutil.copytree(src, tree, symlinks=True, ignore=shutil.ignore_patterns(".git"))
        pg_config = work / "pgserver" / "pginstall" / "bin" / "pg_config"
        args = ["USE_PGXS=1", f"PG_CONFIG={pg_config}"]
        say("pg-tde lab: building pg_tde with PGXS (about 15 s)…")
        _make(tree, ["-j2", *args, "COPT=-g"])
        say("pg-tde lab: installing pg_tde into the cached PostgreSQL…")
        _make(tree, [*args, "install"])
        shutil.rmtree(build)
        os.chmod(work, 0o755)  # mkdtemp made it 0700: a non-root user's server must reach its binaries
        (work / ".complete").write_text(str(src) + "\n")
        shutil.rmtree(root, ignore_errors=True)
        os.replace(work, root)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise


def _make(tree: Path, args: list[str]) -> None:
    if shutil.which("make") is None or shutil.which("gcc") is None:
        raise UserError("pg-tde lab: building pg_tde needs make and gcc (packaging/install-system-tools.sh)")
    done = subprocess.run(["make", "-C", str(tree), *args], capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=900, env=child_env())
    if done.returncode != 0:
        lines = [ln for ln in (done.stderr or done.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower()] or lines
        raise UserError(f"pg-tde lab: building pg_tde failed: {errors[0].strip() if errors else 'no message'} "
                        "(needs libssl-dev and libcurl4-openssl-dev: packaging/install-system-tools.sh)")
