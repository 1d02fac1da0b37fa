"""The Oracle engine plugin: connect with python-oracledb, probe the server process by registers."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from functools import cache

from tdescope.app.engines.api import ConnectParams, PageDecoder, ProbeRecipe
from tdescope.app.engines.capabilities import Ability
from tdescope.app.errors import UserError
from tdescope.plugins.oracle.target import CRITICAL_PROCESSES

__all__ = ["OracleEngine", "spec_from_params"]


def spec_from_params(params: ConnectParams):
    """:class:`~tdescope.plugins.oracle.connection.OracleConnectSpec` from generic ConnectParams.

    ``params.dsn`` is EZConnect, a descriptor or a TNS alias; when empty,
    ``options`` ``host``/``port``/``service`` (or ``sid``) build one. Options:
    ``user`` (required), ``mode`` (normal/sysdba/syskm), ``timeout``, ``thick``,
    ``config_dir``.
    """
    from tdescope.plugins.oracle.connection import OracleConnectSpec, build_dsn

    opts = params.options
    dsn = params.dsn or (build_dsn(str(opts["host"]), int(opts.get("port", 1521)), opts.get("service"),
                                   opts.get("sid")) if opts.get("host") else "")
    user = str(opts.get("user") or "")
    if not user:
        raise UserError("Oracle: no user name given")
    return OracleConnectSpec(dsn=dsn, user=user, mode=str(opts.get("mode", "normal")).lower(),
                             timeout=float(opts.get("timeout", 10.0)), thick=opts.get("thick"),
                             config_dir=opts.get("config_dir"))


class OracleEngine:
    """Engine plugin for Oracle Database 12.1-19 on Linux x86-64."""

    name = "oracle"
    label = "Oracle Database (python-oracledb)"
    #: Where the Qt docks live, imported only by a UI that wants them (``module:factory``).
    panel = "tdescope.plugins.oracle.panel:create_docks"
    #: Background processes a probe refuses without --allow-critical (app/system/critical.py).
    critical_processes = CRITICAL_PROCESSES
    abilities = frozenset({Ability.PANEL, Ability.CRITICAL_PROCESSES, Ability.FIT_RECIPES, Ability.TELL_LOST})

    def connect(self, params: ConnectParams):
        """Open the workload and monitor connections; pick the target session.

        The password comes from ``params.password``, else the OS keyring, else
        a prompt on a terminal. It is used for the two logons and dropped.
        """
        if params.lab:
            raise UserError("Oracle has no lab of its own here: connect to a server with --dsn user@host:port/service")
        from tdescope.plugins.oracle.connection import open_connection, resolve_password
        from tdescope.plugins.oracle.session import OracleSession

        spec = spec_from_params(params)
        password = params.password
        if password is None:
            if params.prompt is not None:
                prompt = params.prompt  # the GUI asks in a dialog
            elif not sys.stdin.isatty():
                prompt = _no_prompt(spec.keyring_name)
            else:
                prompt = None
            password = resolve_password(spec, prompt)
        work = open_connection(spec, password)
        try:
            monitor = open_connection(spec, password)
        except UserError:
            work.close()
            raise
        del password
        try:
            return OracleSession(work, monitor, params.options.get("target_sid"),
                                 bool(params.options.get("allow_background", False)))
        except Exception:
            work.close()
            monitor.close()
            raise

    def probe_recipes(self) -> list[ProbeRecipe]:
        """Register-based recipes from seed 003 (the decrypted block first)."""
        from tdescope.plugins.oracle.recipes import oracle_recipes

        return oracle_recipes()

    def page_decoder(self) -> PageDecoder:
        """Raw Oracle data blocks: cache header, tail, checksum, transaction and row layers."""
        from tdescope.plugins.oracle.blocks import OracleBlockDecoder

        return OracleBlockDecoder()

    @cache
    def glossary(self) -> Mapping[str, str]:
        """Oracle kernel functions named in the seeds, plus the OpenSSL/glibc ones seen alongside."""
        from tdescope.app.hotspots.glossary import load_glossary

        return load_glossary("openssl", "oracle")


def _no_prompt(who: str):
    def prompt(_text: str) -> str:
        raise UserError(f"Oracle: no password for {who} in the OS keyring and no terminal to ask on")
    return prompt
