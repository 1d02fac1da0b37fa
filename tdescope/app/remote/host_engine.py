"""A database on an ssh host as the window's session: ``tdescope gui --ssh DEST --dsn DSN``.

:class:`HostEngineSession` is a :class:`~tdescope.app.remote.host_session.HostSession` (the agent
there probes, samples perf and the OS waits, reads a function's bytes) that also holds the engine's
own session, opened through the ssh connection as ``capture --ssh --dsn`` opens it: the DSN is the
server as the host sees it, and the engine's ``CONNECT_THROUGH`` ability points its connections at a
unix socket forwarded into the ssh connection's 0700 folder, its backends checked in the host's
process table. The probe target is that session's target (its own backend, or ``--pid``'s). The
workloads, the engine's waits, the catalog decoder and the other session abilities are the engine
session's; the window cannot tell it from a local server's session but by the host label.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tdescope.app.engines.api import ConnectParams, Engine, Inventory, TargetChoice, Workload
from tdescope.app.engines.capabilities import Ability, Role, has_ability
from tdescope.app.engines.registry import open_session
from tdescope.app.errors import UserError
from tdescope.app.remote.host_session import HostSession, running_the_code
from tdescope.app.remote.over_ssh import HostProcesses, RemoteAgent, connect_agent
from tdescope.app.remote.ssh import SshHost

__all__ = ["HostEngineSession", "open_engine_through", "open_host_session", "refuse_not_through"]

#: What the session answers itself (the host's face), never handed on from the engine session.
_OWN = frozenset({"targets", "choose_target", "sample_columns"})


class HostEngineSession(HostSession):
    """``db``, an engine session reached through ``agent``'s ssh connection, probed on the host.

    ``dsn`` and ``target_pid`` are what was asked (Reconnect opens the same again; a new connection
    has a new backend, so the pid of the old one is not kept)."""

    def __init__(self, agent: RemoteAgent, engine: Engine, db, dsn: str, target_pid: int | None,
                 ssh_options: Sequence[str] = ()) -> None:
        super().__init__(agent, engine, db.server_pid(), ssh_options)
        self.db = db
        self.dsn = dsn
        self.target_pid = target_pid
        for ability in Ability:  # the engine session's abilities are this session's (has_ability reads vars)
            if ability.role is Role.SESSION and has_ability(db, ability):
                for name in set(ability.members) - _OWN:
                    setattr(self, name, getattr(db, name))
        if has_ability(db, Ability.SAMPLE_COLUMNS):
            self.sample_columns = lambda: self._with_host(db.sample_columns())

    @property
    def reopen_pid(self) -> int | None:
        """A new connection has a new backend: Reconnect asks for the pid asked for first (None: its own)."""
        return self.target_pid

    def server_pid(self) -> int:
        self.pid = self.db.server_pid()
        return self.pid

    def inventory(self) -> Inventory:
        return self._with_host(self.db.inventory())

    def _with_host(self, inventory: Inventory) -> Inventory:
        welcome = self.agent.welcome
        tools = ", ".join(name for name, ok in sorted((welcome.get("tools") or {}).items()) if ok) or "none"
        return Inventory(inventory.engine, (
            ("host", "connected to", self.label),
            ("host", "tools on the host", tools),
            ("host", "agent runs as", "root" if welcome.get("euid") == 0 else f"uid {welcome.get('euid')}"),
        ) + tuple(inventory.rows))

    def workloads(self) -> list[Workload]:
        return self.db.workloads()

    def wait_source(self):
        return self.db.wait_source()

    def targets(self) -> list[TargetChoice]:
        """The engine's own list (a server's backends), when it offers one; else the host's processes."""
        return self.db.targets() if has_ability(self.db, Ability.CHOOSE_TARGET) else super().targets()

    def choose_target(self, pid: int, allow_critical: bool = False) -> None:
        """Probe ``pid`` from now on, as the engine checks it (in the host's process table)."""
        if not has_ability(self.db, Ability.CHOOSE_TARGET):
            raise UserError(f"the {self.engine.name} engine has no other target to choose")
        self.db.choose_target(pid, allow_critical)
        self.pid = self.db.server_pid()

    def close(self) -> None:
        """Close the engine session (its forward goes with the ssh connection), then the agent. Safe twice."""
        try:
            self.db.close()
        finally:
            super().close()


def refuse_not_through(engine: Engine) -> None:
    """One line for an engine whose DSN cannot be carried over ssh (no ``CONNECT_THROUGH``)."""
    if not has_ability(engine, Ability.CONNECT_THROUGH):
        raise UserError(f"the {engine.name} engine's DSN is not carried over ssh: watch its server process on "
                        "the host (a pid) instead")


def open_engine_through(agent: RemoteAgent, engine: Engine, dsn: str, prompt: Callable | None,
                        pid: int | None, ssh_options: Sequence[str] = ()) -> HostEngineSession:
    """``engine``'s session on ``dsn`` (as the host sees it) through ``agent``'s ssh connection; one line
    for an engine that cannot be reached so."""
    refuse_not_through(engine)
    params = ConnectParams(dsn=dsn, prompt=prompt, pid=pid)
    db = open_session(engine, engine.through(params, agent.host.forward, HostProcesses(agent)))
    try:
        return HostEngineSession(agent, engine, db, dsn, pid, ssh_options)
    except BaseException:
        db.close()
        raise


def open_host_session(engine: Engine, dest: str, ssh_options: Sequence[str] = (), pid: int | None = None,
                      allow_prompts: bool = False, dsn: str = "", prompt=None) -> HostSession:
    """Connect to ``dest``, start the agent and settle the target; each failure one line. With ``dsn``
    (the server as the host sees it) the engine's session connects through the ssh connection and its
    backend (or ``pid``, checked by the engine) is the target
    (:class:`~tdescope.app.remote.host_engine.HostEngineSession`); ``prompt`` asks for its password."""
    agent = connect_agent(SshHost(dest, ssh_options, allow_prompts=allow_prompts))
    try:
        if dsn:
            return open_engine_through(agent, engine, dsn, prompt, pid, ssh_options)
        session = HostSession(agent, engine, pid or 0, ssh_options)
        if pid is not None:
            session.choose_target(pid, allow_critical=True)  # there? (the deny-list is the window's ARM check)
            return session
        session.pid = running_the_code(session.search(), dest, engine.label.split(" (")[0])
        return session
    except BaseException:
        agent.close()
        raise
