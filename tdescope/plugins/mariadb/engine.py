"""The MariaDB engine: InnoDB data-at-rest encryption, pages caught in the server's I/O path."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from tdescope.app.engines.api import ConnectParams, PageDecoder, ProbeRecipe
from tdescope.app.engines.capabilities import Ability
from tdescope.app.system.critical import CriticalProcess

__all__ = ["MariaDbEngine"]


class MariaDbEngine:
    """Engine plugin for MariaDB 10.x with InnoDB encryption (PyMySQL)."""

    name = "mariadb"
    label = "MariaDB (InnoDB encryption)"
    abilities = frozenset({Ability.RUN_SQL, Ability.SUMMARIZE_PAGES, Ability.CATALOG_DECODER,
                           Ability.CRITICAL_PROCESSES, Ability.REQUIRE_EXTENSIONS, Ability.KEEP_CATALOG,
                           Ability.RESTORE_DECODER, Ability.CONNECT_THROUGH, Ability.TELL_LOST})
    #: One process serves every connection: gdb, whose stops halt every thread, needs --allow-critical on
    #: a server others use; eBPF does not stop it. The lab's own server (under tdescope-mariadb-*) is free.
    critical_processes = (CriticalProcess(
        "mariadb", r"^(?!.*tdescope-mariadb-)\S*\b(mariadbd|mysqld)\b",
        "the whole MariaDB server ({0}: one process serves every connection, a gdb stop halts them all)",
        stopping_only=True),)

    def connect(self, params: ConnectParams):
        """``params.lab``: start a private encrypted server (``options["page_size"]``: its
        ``innodb_page_size``, default 16384); else ``params.dsn`` (``host= port= user=
        dbname= socket=`` or ``mariadb://user@host:port/db``), ``params.prompt`` asked for a password;
        ``params.pid`` (``--target-pid``) must be the server's own pid: one process serves every connection."""
        from tdescope.plugins.mariadb.connection import parse_dsn
        from tdescope.plugins.mariadb.session import MariaDbSession

        opts = params.options or {}
        if params.lab:
            return MariaDbSession(parse_dsn(""), lab=True, progress=opts.get("progress"),
                                  lab_page_size=int(opts.get("page_size") or 16384))
        from dataclasses import replace

        spec = parse_dsn(params.dsn)
        if params.password is not None:
            spec = replace(spec, password=params.password)
        if opts.get("socket"):  # over --ssh: the forward's socket here
            spec = replace(spec, socket=str(opts["socket"]), via=str(opts.get("via") or ""))
        return MariaDbSession(spec, params.prompt, target_pid=params.pid, processes=opts.get("processes"))

    def through(self, params: ConnectParams, forward, processes) -> ConnectParams:
        """``--dsn`` over ``--ssh``: the server's socket or port on the host, forwarded to a socket here
        (:mod:`~tdescope.plugins.mariadb.tunnel`); the server found in the host's ``processes``."""
        from tdescope.plugins.mariadb.tunnel import through

        return through(params, forward, processes, processes.where)

    def probe_recipes(self) -> list[ProbeRecipe]:
        """Page decrypt (the default), page encrypt, and the libcrypto-level fallback."""
        from tdescope.plugins.mariadb.recipes import recipes

        return recipes()

    def page_decoder(self) -> PageDecoder:
        from tdescope.plugins.mariadb.pages import InnoDbPageDecoder

        return InnoDbPageDecoder()

    def decoder_from_catalog(self, catalog: dict) -> PageDecoder:
        """The window's decoder again, from the index layouts a recording kept (``catalog()``)."""
        from tdescope.plugins.mariadb.pages import InnoDbPageDecoder
        from tdescope.plugins.mariadb.records import layouts_from_json

        return InnoDbPageDecoder(layouts_from_json((catalog or {}).get("layouts") or {}))

    @cache
    def glossary(self) -> Mapping[str, str]:
        """MariaDB/InnoDB and OpenSSL functions as they show in profiles."""
        from tdescope.app.hotspots.glossary import load_glossary

        return load_glossary("openssl", "mariadb")
