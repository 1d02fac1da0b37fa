"""The pg-tde engine: PostgreSQL with Percona pg_tde, its lab, and its tuple decrypt caught in the backend."""

from __future__ import annotations

from tdescope.app.engines.api import ConnectParams, PageDecoder, ProbeRecipe
from tdescope.app.engines.capabilities import Ability
from tdescope.plugins.postgres.engine import PostgresEngine, processes_option

__all__ = ["PgTdeEngine"]


class PgTdeEngine(PostgresEngine):
    """PostgreSQL with pg_tde: the PostgreSQL engine plus a lab and pg_tde's decrypt recipes."""

    name = "pg-tde"
    label = "PostgreSQL + pg_tde"
    abilities = PostgresEngine.abilities

    def connect(self, params: ConnectParams):
        """``params.lab``: start the private pg_tde server (``options["pg_tde_source"]``: its source);
        otherwise connect to the user's pg_tde server like the PostgreSQL engine does."""
        opts = params.options or {}
        if params.lab:
            from tdescope.plugins.pgtde.session import PgTdeLabSession

            return PgTdeLabSession(opts.get("progress"), opts.get("pg_tde_source"))
        from tdescope.plugins.pgtde.session import PgTdeSession
        from tdescope.plugins.postgres.connection import spec_from_params

        return PgTdeSession(spec_from_params(params), params.prompt, params.pid, params.allow_critical,
                            **processes_option(opts))

    def probe_recipes(self) -> list[ProbeRecipe]:
        """pg_tde's tuple decrypt (the default), its page-level decrypt, then the PostgreSQL recipes."""
        from tdescope.plugins.pgtde.recipes import RECIPES

        return [*RECIPES, *super().probe_recipes()]

    def page_decoder(self, columns=None) -> PageDecoder:
        """Heap tuples (pg_tde's decrypt buffers) and pages; attributes when ``columns`` are given."""
        from tdescope.plugins.pgtde.tuples import PgTupleDecoder

        return PgTupleDecoder(columns)

    def decoder_from_catalog(self, catalog: dict) -> PageDecoder:
        """The window's tuple decoder again, from the relation and columns a recording kept."""
        from tdescope.plugins.pgtde.tuples import PgTupleDecoder

        return PgTupleDecoder.from_catalog(catalog or {})
