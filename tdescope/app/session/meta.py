"""What a recorded session says about its run: engine, versions, host, CPU, parameters.

Secrets never enter a session file: every mapping key (and inventory row name)
that looks like a password, key, secret or passphrase is dropped by
:func:`scrub` before anything is written, and statement texts (``sql``,
``query`` parameters) keep their literals masked (a key in
``pgp_sym_decrypt(pan, 'hunter2')`` is a secret too).
"""

from __future__ import annotations

import dataclasses
import os
import platform
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from tdescope import __version__
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.system.secret_names import is_secret_name
from tdescope.app.system.statement_text import dialect_of, mask_literals

__all__ = ["PLAINTEXT_WITHHELD", "SessionMeta", "decoder_catalog", "keeps_plaintext", "scrub", "cpu_flags", "is_secret_name"]

_NOT_STORED = "(not stored)"
#: Parameter names whose values are statement texts: recorded with their literals masked.
_STATEMENT_KEYS = frozenset({"sql", "query", "statement"})


def scrub(value, dialect: str = "postgres"):
    """A copy of ``value`` without secret-looking mapping keys, at any depth.

    Inventory-style rows ``(section, name, value)`` whose name looks secret keep
    their name and lose their value, so "Key state" still says a key was set.
    Statement texts (keys in ``_STATEMENT_KEYS``) keep their shape with literals
    masked (:func:`~tdescope.app.system.statement_text.mask_literals` in ``dialect``).
    """
    if isinstance(value, Mapping):
        return {str(k): mask_literals(v, dialect) if str(k).lower() in _STATEMENT_KEYS and isinstance(v, str)
                else scrub(v, dialect) for k, v in value.items() if not is_secret_name(k)}
    if isinstance(value, (list, tuple)):
        if len(value) == 3 and all(isinstance(v, str) for v in value) and is_secret_name(value[1]):
            return [value[0], value[1], _NOT_STORED]
        return [scrub(v, dialect) for v in value]
    return value


def cpu_flags() -> tuple[str, ...]:
    """The CPU feature flags from /proc/cpuinfo (empty elsewhere)."""
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith(("flags", "Features")):
                    return tuple(sorted(set(line.split(":", 1)[1].split())))
    except OSError:
        pass
    return ()


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()  # processor() runs `uname -p` with the whole environment


#: What replay and reports say when a file holds no decrypted bytes by policy.
PLAINTEXT_WITHHELD = ("plaintext not recorded (target not started by tdescope; "
                      "use --keep-plaintext or an encrypted session)")


def decoder_catalog(decoder) -> dict:
    """What ``decoder`` knows of the server's tables, as JSON data; empty when it keeps no catalog
    (or cannot say it: the server went away)."""
    if not has_ability(decoder, Ability.KEEP_CATALOG):
        return {}
    try:
        return dict(decoder.catalog())
    except Exception:  # noqa: BLE001 - a plugin's failure costs the report its column values, not the recording
        return {}


def keeps_plaintext(session) -> bool:
    """Whether a recording of ``session``'s target keeps decrypted bytes by default.

    Only a target tdescope started itself (``EngineSession.own_target``, a lab)
    does; a customer's process is recorded without plaintext unless the user
    asks (``--keep-plaintext``) or the file is encrypted.
    """
    return session is not None and session.own_target


@dataclass(frozen=True)
class SessionMeta:
    """The run's metadata, stored once per session file.

    Attributes
    ----------
    engine, engine_label : str
        Engine plugin name and display name.
    versions : dict
        Component -> version (engine library, cipher provider, Python, tdescope).
    host, os, cpu : str
        Where it was recorded.
    cpu_flags : tuple of str
        From /proc/cpuinfo; ``aes_ni`` says whether ``aes`` is among them.
    params : dict
        The run's parameters (workload, capture limits), scrubbed of secrets.
    inventory : tuple
        The engine's inventory rows (section, name, value), scrubbed.
    started : float
        Epoch seconds when recording began.
    tdescope_version : str
    title : str
        Free text shown on reports.
    plaintext_withheld : bool
        True when captures were stored with their plaintext side emptied (a
        target tdescope did not start, recorded unencrypted without opt-in).
    decoder : dict
        The catalog of the decoder the window (or ``record``) decoded with
        (:func:`decoder_catalog`): a report made later, with no server, rebuilds that
        decoder from it (the engine's ``decoder_from_catalog``). Empty: the engine's plain one.
    """

    engine: str = ""
    engine_label: str = ""
    versions: dict = field(default_factory=dict)
    host: str = ""
    os: str = ""
    cpu: str = ""
    cpu_flags: tuple[str, ...] = ()
    params: dict = field(default_factory=dict)
    inventory: tuple = ()
    started: float = 0.0
    tdescope_version: str = __version__
    title: str = ""
    plaintext_withheld: bool = False
    decoder: dict = field(default_factory=dict)

    @property
    def aes_ni(self) -> bool:
        """True when the recording CPU has AES instructions."""
        return "aes" in self.cpu_flags

    @classmethod
    def collect(cls, engine: str = "", engine_label: str = "", inventory=(), params: Mapping | None = None,
                versions: Mapping | None = None, title: str = "", decoder: dict | None = None) -> "SessionMeta":
        """Metadata of a run starting now on this host."""
        vers = {"python": platform.python_version(), "tdescope": __version__}
        for section, name, value in inventory or ():
            if "version" in name.lower():
                vers[name] = value
        vers.update(versions or {})
        return cls(
            engine=engine,
            engine_label=engine_label or engine,
            versions=scrub(vers),
            host=socket.gethostname(),
            os=f"{platform.system()} {platform.release()}",
            cpu=f"{_cpu_model()} ({os.cpu_count()} CPUs)",
            cpu_flags=cpu_flags(),
            params=scrub(dict(params or {}), dialect_of(engine)),
            inventory=tuple(tuple(r) for r in scrub([list(r) for r in inventory or ()])),
            started=time.time(),
            title=title,
            decoder=dict(decoder or {}),
        )

    def to_rows(self) -> dict[str, object]:
        """Field name -> JSON-able value, scrubbed (what the meta table holds)."""
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["params"] = scrub(out["params"], dialect_of(self.engine))
        out["versions"] = scrub(out["versions"])
        out["inventory"] = scrub([list(r) for r in self.inventory])
        out["cpu_flags"] = list(self.cpu_flags)
        out["aes_ni"] = self.aes_ni
        return out

    @classmethod
    def from_rows(cls, rows: Mapping[str, object]) -> "SessionMeta":
        """Inverse of :meth:`to_rows`; unknown keys are ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in rows.items() if k in names}
        kw["cpu_flags"] = tuple(kw.get("cpu_flags") or ())
        kw["inventory"] = tuple(tuple(r) for r in kw.get("inventory") or ())
        return cls(**kw)
