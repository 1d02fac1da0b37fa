"""Every recipe's copy length comes from the probed call or from the server, never from a constant.

Review of every engine's recipes (issue 27 item 6): a length is a register or stack argument of the call,
a zero-byte marker, or a constant a session replaces with its server's setting before arming
(:data:`Ability.FIT_RECIPES`). PostgreSQL's ``mdread`` passes no length: a real server's
``SHOW block_size`` gives it.
"""

import pytest

from tdescope.app.engines.api import ConnectParams, Constant, Read, Register
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.engines.registry import discover_engines
from tdescope.app.experiment import CaptureSpec, Experiment
from tdescope.app.probe.window import CaptureLimits
from tdescope.plugins.postgres import ENGINE as POSTGRES
from tdescope.plugins.postgres.recipes import EVP_DECRYPT, PAGE_READ, PGP_DECRYPT

ENGINES = discover_engines()[0]


def test_no_recipe_copies_a_constant_length_its_session_does_not_fit():
    for name, engine in ENGINES.items():
        fits = Ability.FIT_RECIPES in engine.abilities
        for recipe in engine.probe_recipes():
            length = recipe.length
            if not isinstance(length, Constant) or length.value == 0:
                continue
            assert fits, f"{name}: {recipe.key} copies a constant {length.value} bytes"


def test_postgres_page_reads_copy_the_servers_block_size(pg_cluster):
    session = POSTGRES.connect(ConnectParams(dsn=pg_cluster.dsn()))
    try:
        assert has_ability(session, Ability.FIT_RECIPES)
        block = int(session.control.execute("SHOW block_size").fetchone()[0])
        fitted = session.fit_recipe(PAGE_READ)
        assert fitted.length == Constant(fitted.max_length) and fitted.max_length == fitted.max_length == block
        assert session.fit_recipe(PGP_DECRYPT) is PGP_DECRYPT and session.fit_recipe(EVP_DECRYPT) is EVP_DECRYPT
        exp = Experiment(session, "postgres", lambda _e: None, capture=CaptureSpec(recipe=PAGE_READ, limits=CaptureLimits()),
                         pid=session.server_pid())
        assert exp.recipe == fitted  # what every caller (capture, record, the GUI, lessons) arms
    finally:
        session.close()


class _RecordedMonitor:
    """V$PARAMETER's row for db_block_size as an instance answers it, or the error of a role without the grant."""

    def __init__(self, value):
        self.value, self.calls = value, []

    def __call__(self, sql, **binds):
        self.calls.append(sql)
        if isinstance(self.value, Exception):
            raise self.value
        return [(self.value,)]


def _oracle_session(monitor):
    from tdescope.plugins.oracle.session import OracleSession

    session = OracleSession.__new__(OracleSession)  # no instance here: only the recipe-fitting state
    session.monitor, session._block_size = monitor, None
    return session


@pytest.mark.parametrize("value", ["16384", "4096", "32768"])
def test_oracle_block_recipes_copy_the_instances_db_block_size(value):
    from tdescope.plugins.oracle.recipes import BLOCK_SIZE_SQL

    monitor = _RecordedMonitor(value)
    session = _oracle_session(monitor)
    recipes = {r.key: r for r in ENGINES["oracle"].probe_recipes()}
    size = int(value)
    for key in ("oracle.block_decrypted", "oracle.block_encrypted"):
        fitted = session.fit_recipe(recipes[key])
        assert fitted.length == Constant(fitted.max_length) and fitted.max_length == fitted.max_length == size, key
    copy = session.fit_recipe(recipes["oracle.block_copy"])
    assert copy.condition[1] == copy.max_length == size and copy.length == Read(Register("rdx"))
    assert session.fit_recipe(recipes["oracle.wait_begin"]) is recipes["oracle.wait_begin"]
    assert monitor.calls == [BLOCK_SIZE_SQL]  # read once


@pytest.mark.parametrize("value", [RuntimeError("ORA-00942: table or view does not exist"), "12345", "65536"])
def test_an_unreadable_or_odd_db_block_size_keeps_the_recipe(value):
    session = _oracle_session(_RecordedMonitor(value))
    recipe = next(r for r in ENGINES["oracle"].probe_recipes() if r.key == "oracle.block_decrypted")
    assert session.fit_recipe(recipe) is recipe
