"""The PostgreSQL engine: pgcrypto decryption and page reads inside the backend serving a connection."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

from tdescope.app.errors import UserError
from tdescope.app.engines.api import ConnectParams, PageDecoder, ProbeRecipe
from tdescope.app.engines.capabilities import Ability
from tdescope.plugins.postgres.target import CRITICAL_PROCESSES

__all__ = ["PostgresEngine", "processes_option"]


def processes_option(opts) -> dict:
    """The session's ``processes`` keyword when the options name a process table (over ``--ssh``)."""
    return {"processes": opts["processes"]} if opts.get("processes") is not None else {}


class PostgresEngine:
    """Engine plugin for PostgreSQL (psycopg 3), stock or with pgcrypto columns."""

    name = "postgres"
    label = "PostgreSQL"
    panel = "tdescope.plugins.postgres.panel:create_docks"
    #: Processes a probe refuses without --allow-critical (app/system/critical.py).
    critical_processes = CRITICAL_PROCESSES
    abilities = frozenset({Ability.PANEL, Ability.CRITICAL_PROCESSES, Ability.CHOOSE_TARGET, Ability.RUN_SQL,
                           Ability.REQUIRE_EXTENSIONS, Ability.SAMPLE_COLUMNS, Ability.FIT_RECIPES,
                           Ability.FOLLOW_PROCESSES, Ability.CATALOG_DECODER, Ability.KEEP_CATALOG,
                           Ability.RESTORE_DECODER, Ability.CONNECT_THROUGH, Ability.TELL_LOST})

    def connect(self, params: ConnectParams):
        """Open the workload and control connections.

        ``params.dsn`` and/or ``options`` (host, port, dbname, user, sslmode,
        connect_timeout) say where; ``params.pid`` picks another backend as
        the target, ``params.allow_critical`` allows background processes,
        ``params.prompt`` is asked for a password when the server wants one, ``options["processes"]``
        (a ProcessTable) is where the server's processes are checked (this machine's /proc by default).
        """
        if params.lab:
            raise UserError("PostgreSQL has no lab of its own here: connect to a server with --dsn 'host=… port=… "
                            "dbname=…' (--lab sqlcipher and --lab mariadb start a lab)")
        from tdescope.plugins.postgres.connection import spec_from_params
        from tdescope.plugins.postgres.session import PostgresSession

        opts = params.options or {}
        return PostgresSession(spec_from_params(params), params.prompt, params.pid, params.allow_critical,
                               **processes_option(opts))

    def through(self, params: ConnectParams, forward, processes) -> ConnectParams:
        """``--dsn`` over ``--ssh``: the server's socket or port on the host, forwarded to a socket here
        (:mod:`~tdescope.plugins.postgres.tunnel`); its backends checked in the host's ``processes``."""
        from tdescope.plugins.postgres.tunnel import through

        return through(params, forward, processes, processes.where)

    def probe_recipes(self) -> list[ProbeRecipe]:
        """PGP decrypt (the default), raw EVP decrypt, and the page read from disk."""
        from tdescope.plugins.postgres.recipes import RECIPES

        return list(RECIPES)

    def page_decoder(self, columns=None) -> PageDecoder:
        """PostgreSQL pages; heap attributes when ``columns`` (from ``session.columns(rel)``) are given."""
        from tdescope.plugins.postgres.pages import PgPageDecoder

        return PgPageDecoder(columns)

    def decoder_from_catalog(self, catalog: dict) -> PageDecoder:
        """The window's page decoder again, from the relations a recording kept."""
        from tdescope.plugins.postgres.pages import PgPageDecoder

        return PgPageDecoder.from_catalog(catalog or {})

    @cache
    def glossary(self) -> Mapping[str, str]:
        """PostgreSQL, pgcrypto and OpenSSL functions as they show in profiles."""
        from tdescope.app.hotspots.glossary import load_glossary

        return load_glossary("openssl", "postgres")
