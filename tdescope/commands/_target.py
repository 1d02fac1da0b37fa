"""From ``--lab`` / ``--dsn`` / ``--pid`` to what a command observes or probes: one resolution for every command.

``--lab`` starts the engine's lab (a session that owns its target process),
``--dsn`` connects to a server and targets the backend serving tdescope's
connection (or ``--target-pid``), ``--pid`` takes a running process as it is,
with no session at all.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tdescope.app.engines.api import ConnectParams, Engine, EngineSession, Workload
from tdescope.app.engines.capabilities import Ability, has_ability
from tdescope.app.errors import UserError
from tdescope.commands._dsn import open_dsn_session

__all__ = ["CommandTarget", "resolve_target", "run_to_end"]


@dataclass(slots=True)
class CommandTarget:
    """What a command works on.

    Attributes
    ----------
    engine : Engine or None
        None only for ``--pid`` without an engine (``top``, ``waits``).
    session : EngineSession or None
        The open session (``--lab``, ``--dsn``); the command closes it with :meth:`close`.
    pid : int
        The process to probe or observe.
    workload : Workload or None
        What drives the target: ``--workload NAME``, ``--sql`` or the lab's first workload.
    params : mapping
        The workload's parameters.
    own_target : bool
        The session started the target and nobody else's work runs in it (the lab's stop budget).
    """

    engine: Engine | None
    session: EngineSession | None
    pid: int
    workload: Workload | None = None
    params: Mapping[str, Any] = field(default_factory=dict)
    own_target: bool = False
    cleanup: bool = False

    def close(self) -> None:
        """Drop what the workload created when asked (``--cleanup``), then close the session, if there is one."""
        if self.session is None:
            return
        try:
            if self.cleanup and self.workload is not None and self.workload.cleanup is not None:
                try:
                    self.workload.cleanup()
                    print(f"dropped {', '.join(self.workload.creates)}", file=sys.stderr)
                except Exception as exc:  # noqa: BLE001 - the run's outcome stands; say what was left
                    print(f"tdescope: could not drop {', '.join(self.workload.creates)}: "
                          f"{(str(exc).strip().splitlines() or [''])[0]}", file=sys.stderr)
        finally:
            self.session.close()


def _workload(engine: Engine, session: EngineSession, args,
              default: Callable[[list[Workload]], Workload | None] | None = None
              ) -> tuple[Workload | None, Mapping[str, Any]]:
    """``--sql``, ``--workload NAME``, ``default(workloads)``, (lab) the first workload, or (``--dsn``) none:
    watch mode, the target is driven by the server's own clients."""
    sql, name = getattr(args, "sql", None), getattr(args, "workload", None)
    if sql:
        if not has_ability(session, Ability.RUN_SQL):
            raise UserError(f"the {engine.name} engine cannot run --sql")
        w = session.sql_workload(sql)
        return w, w.params
    workloads = session.workloads()
    chosen = default(workloads) if default is not None and not name else None
    if chosen is not None:
        return chosen, chosen.params
    if not name:
        if getattr(args, "dsn", None):
            return None, {}  # watch mode: tdescope runs nothing; the server's own clients drive the target
        return workloads[0], workloads[0].params
    for w in workloads:
        if w.name == name:
            return w, w.params
    raise UserError(f"{engine.name} has no workload {name!r} (has: {', '.join(w.name for w in workloads)})")


def resolve_target(args, engine: Engine | None, probing: bool = False, stops_target: bool = True,
                   default_workload: Callable[[list[Workload]], Workload | None] | None = None,
                   remote=None) -> CommandTarget:
    """Open what ``args`` (``--lab``/``--dsn``/``--pid``, ``--sql``/``--workload``) name, on ``engine``.

    Parameters
    ----------
    args : argparse.Namespace
    engine : Engine or None
        The command's engine; may be None only with ``--pid``.
    probing : bool
        The command will probe the target: a ``--pid`` on any engine's deny-list is
        refused (``--allow-critical`` overrides).
    stops_target : bool
        The probe stops the target (gdb): the rules that only matter then apply too.
    default_workload : callable, optional
        Picks the workload among the session's when no ``--workload``/``--sql`` names one.
    remote : RemoteAgent, optional
        The agent on the ``--ssh`` host: ``--pid`` is a process there (the agent's window checks the
        deny-list), ``--dsn`` a server there reached through the ssh connection.

    Raises
    ------
    UserError
        One line: the process is gone or critical, the connection failed, no such workload.
    """
    if not getattr(args, "dsn", None) and not getattr(args, "lab", None):
        pid = args.pid
        if remote is not None:
            from tdescope.app.remote.over_ssh import HostProcesses

            if not HostProcesses(remote).rows([pid]):
                raise UserError(f"pid {pid} is gone on {remote.label} (no such process)")
            return CommandTarget(engine, None, pid)
        if not os.path.exists(f"/proc/{pid}"):
            raise UserError(f"pid {pid} is gone (no such process)")
        if probing:
            # the capture window refuses it too; asking here first leaves no file or lab behind
            from tdescope.app.probe.targets import refuse_critical_target

            refuse_critical_target(pid, getattr(args, "allow_critical", False), stops_target)
        return CommandTarget(engine, None, pid)
    from tdescope.app.engines.registry import open_session

    if getattr(args, "dsn", None):
        session = open_dsn_session(engine, args, remote)
    else:
        session = open_session(engine, ConnectParams(lab=True))
    try:
        workload, params = _workload(engine, session, args, default_workload)
        if workload is not None and workload.creates:  # someone else's server: say what will be left there
            then = "; --cleanup drops it afterwards" if getattr(args, "cleanup", False) is False else \
                "; dropped afterwards (--cleanup)"
            print(f"{workload.name} creates {', '.join(workload.creates)} on the server{then}", file=sys.stderr)
        return CommandTarget(engine, session, session.server_pid(), workload, params,
                             session.own_target, bool(getattr(args, "cleanup", False)))
    except BaseException:
        session.close()
        raise


def run_to_end(exp, grace_s: float) -> None:
    """Start ``exp`` (an Experiment) and wait for it; Ctrl+C cancels it, waits up to ``grace_s`` for the
    probe to disarm and detach, and goes on as KeyboardInterrupt."""
    exp.start()
    try:
        while not exp.wait(0.2):
            pass
    except KeyboardInterrupt:
        exp.cancel()
        exp.wait(grace_s)
        raise
