"""The agent on a database host over ssh: built here, copied once, started, greeted, its tools checked.

:func:`connect_agent` joins :class:`~tdescope.app.remote.ssh.SshHost` (the connection) and
:class:`~tdescope.app.remote.client.AgentClient` (the protocol): the agent zipapp is built into the
connection's 0700 folder (reproducible bytes, so its content hash and the host's cached copy stay the
same from run to run), copied if the host lacks it, started with ``sudo -n`` unless we log in as root,
and greeted. A host with neither libbpf nor gdb is refused in one line, as is every failure before.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from tdescope.app.errors import UserError
from tdescope.app.remote.agent_build import build_agent
from tdescope.app.remote.client import AgentClient
from tdescope.app.remote.ssh import SshHost
from tdescope.app.system.child_env import SSH, child_env

__all__ = ["HostProcesses", "RemoteAgent", "connect_agent", "tools_problem"]


@dataclass
class RemoteAgent:
    """A running agent on ``host``: its client and what it said in its welcome."""

    host: SshHost
    client: AgentClient
    welcome: dict

    @property
    def label(self) -> str:
        """How the window and the reports name where the target is: ``db1 via ssh``."""
        return f"{self.host.dest} via ssh"

    def close(self) -> None:
        """Say bye to the agent, then close the connection. Safe twice."""
        try:
            self.client.close()
        finally:
            self.host.close()


class HostProcesses:
    """The host's process table, asked of its agent (a :class:`~tdescope.app.system.process_table.ProcessTable`):
    what an engine plugin checks its server's processes against over ``--ssh``."""

    def __init__(self, agent: RemoteAgent) -> None:
        self._client = agent.client
        self.where = agent.label

    def rows(self, pids=None) -> list:
        return self._client.processes(None if pids is None else list(pids))


def tools_problem(dest: str, welcome: dict) -> str | None:
    """The one line for a host the agent can probe nothing on (no libbpf and no gdb), else None."""
    tools = welcome.get("tools") or {}
    if not tools.get("libbpf") and not tools.get("gdb"):
        return f"{dest} has neither libbpf nor gdb: install libbpf1 (eBPF probes) or gdb there"
    return None


def connect_agent(host: SshHost) -> RemoteAgent:
    """Open ``host``, copy the agent if needed, start it and say hello; each failure one line."""
    host.open()
    try:
        pyz = build_agent(os.path.join(os.path.dirname(host.control_path), "tdescope-agent.pyz"))
        remote = host.prepare_agent(pyz)
        client = AgentClient(host.agent_argv(remote), env=child_env(SSH))
        try:
            welcome = client.hello()
            problem = tools_problem(host.dest, welcome)
            if problem:
                raise UserError(problem)
        except BaseException:
            client.close()
            raise
    except BaseException:
        host.close()
        raise
    return RemoteAgent(host, client, welcome)
