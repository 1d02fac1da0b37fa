"""Optional engine abilities, declared as small Protocols and checked by shape.

The required contract is :mod:`tdescope.app.engines.api`. Beyond it a plugin
may offer optional abilities: an engine names Qt docks of its own or the
processes a probe must refuse, a session lets the user pick another target,
a decoder reads a page's type cheaply. Each ability is one runtime-checkable
Protocol here and one :class:`Ability` member; an engine lists the abilities
of its plugin (its own, its sessions' and its decoder's) in its ``abilities``
attribute. :func:`ability_problems` says what an object lacks to have one
(a member missing, not callable, with a signature the callers cannot use, or
of the wrong kind), and :func:`abilities` which it has. Call sites ask
:func:`has_ability`, never ``hasattr``.
"""

from __future__ import annotations

import enum
import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tdescope.app.engines.api import ConnectParams, Inventory, PageDecoder, ProbeRecipe, TargetChoice, Workload
from tdescope.app.events import WorkloadResult
from tdescope.app.slots import SLOTS

__all__ = [
    "Ability",
    "ChoosesTargets",
    "ConnectsThrough",
    "DecodesWithCatalog",
    "FitsRecipes",
    "FollowsProcesses",
    "KeepsCatalog",
    "HasPanel",
    "ListsCriticalProcesses",
    "RequiresExtensions",
    "RestoresDecoder",
    "Role",
    "RunsSql",
    "SamplesColumns",
    "ShowsInventory",
    "ShowsResults",
    "SummarizesPages",
    "TellsLostConnections",
    "abilities",
    "ability_problems",
    "has_ability",
    "partial_abilities",
]


class Role(enum.Enum):
    """Which plugin object carries an ability."""

    ENGINE = "engine"
    SESSION = "session"
    DECODER = "decoder"


@runtime_checkable
class TellsLostConnections(Protocol):
    """A session that can tell, from its driver's error, that its connection to the database is gone."""

    def connection_lost(self, exc: BaseException) -> bool:
        """True when ``exc`` (raised by this session's workload or queries) means the connection is gone:
        the window then offers Reconnect. Told by the driver's error class or code, or the connection's own
        state, never by the message's words (issue #25, item 1)."""
        ...


@runtime_checkable
class ChoosesTargets(Protocol):
    """A session that lets the user probe another server process than its own connection's."""

    def targets(self) -> list[TargetChoice]:
        """The processes the user may pick (server backends), this session's own among them."""
        ...

    def choose_target(self, pid: int, allow_critical: bool = False) -> None:
        """Probe ``pid`` from now on; UserError (one line) for a process it must not stop."""
        ...


@runtime_checkable
class RequiresExtensions(Protocol):
    """A session that can say whether a database extension a recipe needs is installed."""

    def require_extension(self, name: str) -> None:
        """UserError (one line, with the fix) when extension ``name`` is missing."""
        ...


@runtime_checkable
class RunsSql(Protocol):
    """A session that runs the user's own SQL as a workload (``--sql``)."""

    def sql_workload(self, sql: str) -> Workload:
        """``sql`` as a workload on the probed connection."""
        ...


@runtime_checkable
class SamplesColumns(Protocol):
    """A session whose inventory can also sample user tables (pgcrypto columns): an explicit action,
    never done by :meth:`~tdescope.app.engines.api.EngineSession.inventory` itself."""

    def sampling_reads(self) -> str:
        """What :meth:`sample_columns` will read (tables, columns, rows), said before it reads it."""
        ...

    def sample_columns(self) -> Inventory:
        """The inventory with the sampled columns' findings."""
        ...


@runtime_checkable
class DecodesWithCatalog(Protocol):
    """A session whose page decoder knows this database's tables (column definitions from its catalog)."""

    def catalog_decoder(self) -> PageDecoder:
        """A decoder that turns records into column values for this database's tables."""
        ...


@runtime_checkable
class FitsRecipes(Protocol):
    """A session that fits a probe recipe to its server's settings before it is armed: a length the
    probed call does not pass (a block size) comes from the server, read at connect, not a constant."""

    def fit_recipe(self, recipe: ProbeRecipe) -> ProbeRecipe:
        """``recipe`` with this server's lengths (itself when nothing changes)."""
        ...


@runtime_checkable
class SummarizesPages(Protocol):
    """A page decoder that reads a page's type and cell count without a full decode."""

    def summarize(self, data: bytes, pgno: int = -1) -> tuple[str, int]:
        """``(page_type, cells)`` of ``data``, as :meth:`PageDecoder.decode` would say, cheaply."""
        ...


@runtime_checkable
class FollowsProcesses(Protocol):
    """A session whose server runs a probed function in other processes than the target too
    (PostgreSQL 18's I/O workers): a capture window probes them beside it (eBPF)."""

    def probe_followers(self, pid: int, recipe: ProbeRecipe) -> tuple[int, ...]:
        """The processes to probe beside ``pid`` for ``recipe``, found without SQL (empty: none)."""
        ...


@runtime_checkable
class KeepsCatalog(Protocol):
    """A page decoder that knows the server's catalog (column definitions) and can say it as JSON data.

    The window's decoder is the session's (:class:`DecodesWithCatalog`); its catalog goes into the
    recording's metadata so that a report made later, with no server, decodes the same way.
    """

    def catalog(self) -> dict:
        """What the decoder knows of the server's tables, JSON-able (no secrets: names and types)."""
        ...


@runtime_checkable
class RestoresDecoder(Protocol):
    """An engine that rebuilds a page decoder from a :class:`KeepsCatalog` decoder's ``catalog()``."""

    def decoder_from_catalog(self, catalog: dict) -> PageDecoder:
        """The decoder the recording had; the plain ``page_decoder()`` for an empty or unknown catalog."""
        ...


@runtime_checkable
class HasPanel(Protocol):
    """An engine with Qt docks of its own, imported by name only when a window opens on it."""

    panel: str
    """``"package.module:create_docks"``; ``create_docks(window)`` returns QDockWidgets, each of which may
    be a :class:`ShowsInventory` and a :class:`ShowsResults`: what the window feeds it."""


@runtime_checkable
class ShowsInventory(Protocol):
    """A :class:`HasPanel` dock that the window gives the session's inventory when it connects."""

    def show_inventory(self, inventory: Inventory) -> None:
        """Show ``inventory`` (on the GUI thread)."""
        ...


@runtime_checkable
class ShowsResults(Protocol):
    """A :class:`HasPanel` dock that the window gives every workload result; it shows those it knows."""

    def show_result(self, result: WorkloadResult) -> None:
        """Show ``result`` if it is one of this dock's (on the GUI thread)."""
        ...


@runtime_checkable
class ListsCriticalProcesses(Protocol):
    """An engine whose processes a probe must refuse without an override (postmaster, LGWR...)."""

    critical_processes: Sequence[Any]
    """``tdescope.app.system.critical.CriticalProcess`` rules: each has ``match(title)``."""


@runtime_checkable
class ConnectsThrough(Protocol):
    """An engine whose ``--dsn`` can be carried over ``--ssh``: its connections go through a forward on the
    ssh connection (the server need not listen beyond its host's localhost) and its session looks the
    server's processes up on that host (the agent), not in this machine's /proc."""

    def through(self, params: ConnectParams, forward: Any, processes: Any) -> ConnectParams:
        """``params`` rewritten to connect through ``forward(remote, local_socket) -> local socket path``
        (``remote``: where the server listens as its host sees it, a unix socket path or ``(host, port)``),
        with ``processes`` (a :class:`~tdescope.app.system.process_table.ProcessTable`) for its checks.
        UserError (one line) for a DSN that cannot be carried (several hosts, ``hostaddr``)."""
        ...


class Ability(enum.Enum):
    """The optional abilities, named as ``tdescope doctor`` shows them."""

    CHOOSE_TARGET = "choose_target"
    REQUIRE_EXTENSIONS = "require_extensions"
    RUN_SQL = "run_sql"
    SAMPLE_COLUMNS = "sample_columns"
    CATALOG_DECODER = "catalog_decoder"
    FIT_RECIPES = "fit_recipes"
    SUMMARIZE_PAGES = "summarize_pages"
    PANEL = "panel"
    CRITICAL_PROCESSES = "critical_processes"
    KEEP_CATALOG = "keep_catalog"
    FOLLOW_PROCESSES = "follow_processes"
    RESTORE_DECODER = "restore_decoder"
    CONNECT_THROUGH = "connect_through"
    TELL_LOST = "tell_lost"

    @property
    def protocol(self) -> type:
        """The Protocol stating this ability."""
        return _SPECS[self].protocol

    @property
    def members(self) -> tuple[str, ...]:
        """The names an object has when it has this ability."""
        return _SPECS[self].members

    @property
    def role(self) -> Role:
        """The object that carries it: the engine, its sessions or its page decoder."""
        return _SPECS[self].role


@dataclass(frozen=True, **SLOTS)
class _Spec:
    protocol: type
    role: Role
    members: tuple[str, ...]


_SPECS: dict[Ability, _Spec] = {
    Ability.CHOOSE_TARGET: _Spec(ChoosesTargets, Role.SESSION, ("targets", "choose_target")),
    Ability.REQUIRE_EXTENSIONS: _Spec(RequiresExtensions, Role.SESSION, ("require_extension",)),
    Ability.RUN_SQL: _Spec(RunsSql, Role.SESSION, ("sql_workload",)),
    Ability.SAMPLE_COLUMNS: _Spec(SamplesColumns, Role.SESSION, ("sampling_reads", "sample_columns")),
    Ability.CATALOG_DECODER: _Spec(DecodesWithCatalog, Role.SESSION, ("catalog_decoder",)),
    Ability.FIT_RECIPES: _Spec(FitsRecipes, Role.SESSION, ("fit_recipe",)),
    Ability.SUMMARIZE_PAGES: _Spec(SummarizesPages, Role.DECODER, ("summarize",)),
    Ability.PANEL: _Spec(HasPanel, Role.ENGINE, ("panel",)),
    Ability.CRITICAL_PROCESSES: _Spec(ListsCriticalProcesses, Role.ENGINE, ("critical_processes",)),
    Ability.KEEP_CATALOG: _Spec(KeepsCatalog, Role.DECODER, ("catalog",)),
    Ability.FOLLOW_PROCESSES: _Spec(FollowsProcesses, Role.SESSION, ("probe_followers",)),
    Ability.RESTORE_DECODER: _Spec(RestoresDecoder, Role.ENGINE, ("decoder_from_catalog",)),
    Ability.CONNECT_THROUGH: _Spec(ConnectsThrough, Role.ENGINE, ("through",)),
    Ability.TELL_LOST: _Spec(TellsLostConnections, Role.SESSION, ("connection_lost",)),
}


def _call_problem(name: str, member: object, stub: object, unbound: bool) -> str | None:
    """Why ``member`` cannot be called the way the Protocol's ``stub`` is, or None.

    ``unbound``: ``member`` is a plain function looked up on a class, which takes ``self`` first.
    """
    if not callable(member):
        return f"{name} is not callable"
    try:
        sig = inspect.signature(member)
    except (TypeError, ValueError):
        return None  # a builtin without a signature: take it on trust
    args: list[object] = [None] if unbound else []
    kwargs: dict[str, object] = {}
    for p in list(inspect.signature(stub).parameters.values())[1:]:  # after self
        if p.default is inspect.Parameter.empty:
            args.append(None)
        else:
            kwargs[p.name] = p.default
    try:
        sig.bind(*args, **kwargs)
    except TypeError:
        wanted = str(inspect.signature(stub)).replace("(self, ", "(").replace("(self)", "()")
        return f"{name} must accept {name}{wanted}"
    return None


def _value_problem(ability: Ability, name: str, value: object) -> str | None:
    """Why the data member ``name`` holds no usable value for ``ability``, or None."""
    if ability is Ability.PANEL:
        module, _, func = value.partition(":") if isinstance(value, str) else ("", "", "")
        if not (module and func.isidentifier()):
            return f"{name} must be 'package.module:function', not {value!r}"
    if ability is Ability.CRITICAL_PROCESSES:
        if not isinstance(value, (tuple, list)) or not value:
            return f"{name} must be a non-empty tuple of CriticalProcess rules"
        if not all(callable(getattr(rule, "match", None)) for rule in value):
            return f"{name} holds something that is not a CriticalProcess rule"
    return None


def ability_problems(obj: object, ability: Ability) -> list[str]:
    """What ``obj`` lacks to have ``ability`` (empty when it has it).

    ``obj`` is an instance or its class (to check a plugin's sessions without
    opening one). A missing member, a method that is not callable or that cannot take the
    Protocol's arguments, and a data member of the wrong kind each give one line.
    """
    spec = _SPECS[ability]
    problems = []
    for name in spec.members:
        try:
            value = inspect.getattr_static(obj, name)
        except AttributeError:
            problems.append(f"missing {name}")
            continue
        unbound = inspect.isclass(obj) and inspect.isfunction(value)
        value = getattr(obj, name)  # resolved: bound method, property value
        stub = inspect.getattr_static(spec.protocol, name, None)
        if inspect.isfunction(stub):
            why = _call_problem(name, value, stub, unbound)
        else:
            why = _value_problem(ability, name, value)
        if why:
            problems.append(why)
    return problems


def abilities(obj: object) -> frozenset[Ability]:
    """Every ability ``obj`` (an engine, a session or a page decoder, or its class) has in full."""
    return frozenset(a for a in Ability if has_ability(obj, a))


def partial_abilities(obj: object, role: Role) -> dict[Ability, list[str]]:
    """Abilities of ``role`` that ``obj`` has some members of, but not right: ability -> problems."""
    out = {}
    for ability, spec in _SPECS.items():
        if spec.role is not role:
            continue
        present = [n for n in spec.members if _has_static(obj, n)]
        problems = ability_problems(obj, ability)
        if present and problems:
            out[ability] = problems
    return out


def _has_static(obj: object, name: str) -> bool:
    try:
        inspect.getattr_static(obj, name)
    except AttributeError:
        return False
    return True


def has_ability(obj: object, ability: Ability) -> bool:
    """True when ``obj`` has ``ability`` in full (a None ``obj`` has none).

    Asked once per capture on a decoder, so the answer is kept per class while
    the instance itself holds none of the ability's members.
    """
    if obj is None:
        return False
    try:
        own = vars(obj)
    except TypeError:
        own = {}
    if inspect.isclass(obj) or any(name in own for name in _SPECS[ability].members):
        return not ability_problems(obj, ability)
    return _class_has(type(obj), ability)


@functools.lru_cache(maxsize=512)
def _class_has(cls: type, ability: Ability) -> bool:
    return not ability_problems(cls, ability)
