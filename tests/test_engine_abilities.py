"""Declared engine abilities: what each real plugin declares, and broken ones reported, never fatal.

Broken plugins here are small real engine classes; the last tests register
them through a real entry point (a dist-info folder on the path) and run
``tdescope doctor`` as a user does.
"""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import TDESCOPE
from tdescope.app.engines import Ability, abilities, discover_engines, open_session
from tdescope.app.engines.registry import check_engine, check_session, critical_rules
from tdescope.app.errors import UserError
from tdescope.plugins.oracle.session import OracleSession
from tdescope.plugins.postgres.session import PostgresSession
from tdescope.plugins.mariadb.session import MariaDbSession
from tdescope.plugins.sqlcipher.lab import LabSession

A = Ability
ENGINES, ERRORS = discover_engines()


@pytest.mark.parametrize("name, declared, session_class", [
    ("sqlcipher", {A.SUMMARIZE_PAGES}, LabSession),
    ("postgres", {A.PANEL, A.CRITICAL_PROCESSES, A.CHOOSE_TARGET, A.RUN_SQL, A.REQUIRE_EXTENSIONS,
                  A.SAMPLE_COLUMNS, A.FIT_RECIPES, A.FOLLOW_PROCESSES, A.CATALOG_DECODER, A.KEEP_CATALOG,
                  A.RESTORE_DECODER, A.CONNECT_THROUGH, A.TELL_LOST}, PostgresSession),
    ("oracle", {A.PANEL, A.CRITICAL_PROCESSES, A.FIT_RECIPES, A.TELL_LOST}, OracleSession),
    ("mariadb", {A.RUN_SQL, A.SUMMARIZE_PAGES, A.CATALOG_DECODER, A.CRITICAL_PROCESSES, A.REQUIRE_EXTENSIONS,
                 A.KEEP_CATALOG, A.RESTORE_DECODER, A.CONNECT_THROUGH, A.TELL_LOST},
     MariaDbSession),
])
def test_each_real_plugin_declares_what_it_has(name, declared, session_class):
    assert not [e for e in ERRORS if e.name == name]
    engine = ENGINES[name]
    assert engine.abilities == declared
    assert check_session(engine, session_class) == []  # its sessions, checked by class (no server needed)
    has = abilities(engine) | abilities(engine.page_decoder()) | abilities(session_class)
    assert has == declared


def test_critical_rules_come_from_the_engines_that_declare_them():
    assert {r.engine for r in critical_rules(ENGINES.values())} == {"postgres", "oracle", "mariadb"}


class _Decoder:
    def decode(self, data, pgno=-1):
        raise NotImplementedError


class _Engine:
    name = "fake"
    label = "Fake"
    abilities = frozenset()
    decoder = _Decoder

    def connect(self, params):
        return _Session()

    def probe_recipes(self):
        return []

    def page_decoder(self):
        return self.decoder()

    def glossary(self):
        return {}


class _Session:
    closed = False
    own_target = False

    def server_pid(self):
        return os.getpid()

    def close(self):
        self.closed = True


def _engine(declared=(), decoder=_Decoder, **members):
    cls = type("Broken", (_Engine,), {"abilities": frozenset(declared), "decoder": decoder, **members})
    return cls()


def _decoder(**members):
    return type("BrokenDecoder", (_Decoder,), members)


def _rule():
    from tdescope.app.system.critical import CriticalProcess

    return CriticalProcess("fake", "the fake server", r"^fakeserver$")


@pytest.mark.parametrize("engine, problem", [
    (_engine([A.PANEL]), "declares panel, but the engine: missing panel"),
    (_engine([A.PANEL], panel=42), "panel must be 'package.module:function', not 42"),
    (_engine([A.PANEL], panel="tdescope.plugins.fake.panel"), "panel must be 'package.module:function'"),
    (_engine(panel="fake.panel:create_docks"), "the engine has panel, which the engine does not declare"),
    (_engine([A.CRITICAL_PROCESSES], critical_processes=()), "critical_processes must be a non-empty tuple"),
    (_engine([A.CRITICAL_PROCESSES], critical_processes=("postmaster",)), "is not a CriticalProcess rule"),
    (_engine(critical_processes=(_rule(),)), "has critical_processes, which the engine does not declare"),
    (_engine([A.SUMMARIZE_PAGES]), "declares summarize_pages, but its page decoder: missing summarize"),
    (_engine([A.SUMMARIZE_PAGES], decoder=_decoder(summarize="fast")), "summarize is not callable"),
    (_engine([A.SUMMARIZE_PAGES], decoder=_decoder(summarize=lambda self, data, pgno, extra: ("x", 0))),
     "summarize must accept summarize(data: 'bytes', pgno: 'int' = -1)"),
    (_engine(decoder=_decoder(summarize=lambda self: ("x", 0))), "its page decoder half has summarize_pages"),
    (_engine(["panel"]), "abilities must be a frozenset of Ability members"),
])
def test_an_engine_that_breaks_an_ability_is_reported(engine, problem):
    problems = check_engine(engine)
    assert any(problem in p for p in problems), problems


def test_an_engine_without_optional_abilities_is_fine():
    assert check_engine(_engine()) == []
    assert check_engine(_engine([A.PANEL, A.CRITICAL_PROCESSES, A.SUMMARIZE_PAGES], panel="fake.panel:create_docks",
                                critical_processes=(_rule(),),
                                decoder=_decoder(summarize=lambda self, data, pgno=-1: ("x", 0)))) == []


def _session(**members):
    return type("BrokenSession", (_Session,), members)()


def _method(*params):
    return eval(f"lambda self, {', '.join(params)}: None") if params else (lambda self: None)


@pytest.mark.parametrize("declared, session, problem", [
    ([A.CHOOSE_TARGET], _session(targets=_method()), "declares choose_target, but its session: missing choose_target"),
    ([A.CHOOSE_TARGET], _session(targets=_method(), choose_target=_method("sid", "allow_background=False")),
     "choose_target must accept choose_target(pid: 'int', allow_critical: 'bool' = False)"),
    ([A.CHOOSE_TARGET], _session(targets=[], choose_target=_method("pid", "allow_critical=False")),
     "targets is not callable"),
    ([], _session(targets=_method()), "its session half has choose_target: missing choose_target"),
    ([], _session(own_target="yes"), "its session: own_target must be True or False"),
    ([], _session(own_target=None), "its session: own_target must be True or False"),
    ([A.REQUIRE_EXTENSIONS], _session(require_extension=None), "require_extension is not callable"),
    ([A.RUN_SQL], _session(sql_workload=_method()), "sql_workload must accept sql_workload(sql: 'str')"),
    ([], _session(sql_workload=_method("sql")), "its session has run_sql, which the engine does not declare"),
])
def test_a_session_that_breaks_a_declared_ability_is_reported(declared, session, problem):
    problems = check_session(_engine(declared), session)
    assert any(problem in p for p in problems), problems


def test_opening_a_broken_session_is_one_clear_line_and_closes_it():
    session = _session(targets=_method())
    engine = _engine([A.CHOOSE_TARGET], connect=lambda self, params: session)
    broken = "^the fake plugin is broken: declares choose_target, but its session: missing choose_target$"
    with pytest.raises(UserError, match=broken):
        open_session(engine, None)
    assert session.closed


def test_call_sites_see_instance_abilities():
    session = _session()
    assert A.RUN_SQL not in abilities(session)
    session.sql_workload = lambda sql: None
    assert A.RUN_SQL in abilities(session)


def test_owning_its_target_is_a_fact_of_each_session_not_of_its_engine():
    """Issue #25 item 2: MariaDB's lab owns its server, a MariaDB production session does not; both are
    sessions of one engine. The ability it used to be made the lab take the production stop budget."""
    assert "OWN_TARGET" not in A.__members__
    assert check_session(_engine(), _session(own_target=True)) == []
    from tdescope.app.probe.limits import LAB_STOP_BUDGET, stop_budget
    from tdescope.app.session.meta import keeps_plaintext

    lab, production = _session(own_target=True), _session(own_target=False)
    assert stop_budget(lab.own_target) == LAB_STOP_BUDGET != stop_budget(production.own_target)
    assert keeps_plaintext(lab) and not keeps_plaintext(production) and not keeps_plaintext(None)


# -- a broken plugin per ability, registered for real -------------------------------------------------------

_BROKEN = {
    "broken_panel": "panel = 42\n    abilities = frozenset({Ability.PANEL})",
    "broken_critical": "critical_processes = ()\n    abilities = frozenset({Ability.CRITICAL_PROCESSES})",
    "broken_summary": "abilities = frozenset({Ability.SUMMARIZE_PAGES})",
    "undeclared_panel": "panel = 'x.panel:create_docks'",
}


_BASE = """
class Base:
    abilities = frozenset()

    def connect(self, params):
        raise RuntimeError("not for connecting")

    def probe_recipes(self):
        return []

    def page_decoder(self):
        return None

    def glossary(self):
        return {}
"""


@pytest.fixture()
def broken_plugins(tmp_path):
    module = ["from tdescope.app.engines import Ability\n", _BASE]
    for name, body in _BROKEN.items():
        module.append(f"\n\nclass {name.title()}(Base):\n    name = label = {name!r}\n    {body}\n\n\n"
                      f"{name.upper()} = {name.title()}()\n")
    (tmp_path / "tds_broken_plugins.py").write_text("".join(module))
    info = tmp_path / "tds_broken_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tds-broken-plugins\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tdescope.engines]\n" + "".join(
        f"{name} = tds_broken_plugins:{name.upper()}\n" for name in _BROKEN))
    return tmp_path


def test_doctor_reports_each_broken_plugin_and_lists_the_good_ones(broken_plugins):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(broken_plugins), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([*TDESCOPE, "doctor", "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in out.stderr
    checks = {c["name"]: c for c in json.loads(out.stdout)}
    assert checks["engine sqlcipher"]["ok"] is True
    assert checks["engine sqlcipher"]["abilities"] == ["summarize_pages"]
    assert checks["engine postgres"]["abilities"] == ["catalog_decoder", "choose_target", "connect_through",
                                                      "critical_processes", "fit_recipes", "follow_processes",
                                                      "keep_catalog", "panel", "require_extensions",
                                                      "restore_decoder", "run_sql",
                                                      "sample_columns", "tell_lost"]
    for name, fragment in [("broken_panel", "panel must be 'package.module:function', not 42"),
                           ("broken_critical", "critical_processes must be a non-empty tuple"),
                           ("broken_summary", "declares summarize_pages, but its page decoder: missing summarize"),
                           ("undeclared_panel", "has panel, which the engine does not declare")]:
        assert checks[f"engine {name}"]["ok"] is False and fragment in checks[f"engine {name}"]["value"], name
        assert "abilities" not in checks[f"engine {name}"]
    human = subprocess.run([*TDESCOPE, "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert "Traceback" not in human.stderr
    lines = human.stdout.splitlines()
    assert any(ln.startswith("ok") and "engine postgres" in ln and "abilities: catalog_decoder, choose_target" in ln for ln in lines)
    assert any(ln.startswith("FAIL") and "engine broken_panel" in ln for ln in lines)
