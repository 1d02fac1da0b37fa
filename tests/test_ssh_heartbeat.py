"""The agent leaves a workbench that stopped talking (issue 28): the client sends a ``PING`` every
``HEARTBEAT_S``; the agent that hears nothing for ``SILENCE_S`` disarms and exits, even when the ssh connection
itself stands (a frozen or stopped workbench keeps its end of the pipe open, so stdin never ends).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from conftest import TDESCOPE, wait_for
from ssh_fixture import kill_quietly
from test_ssh_capture import _agents, _bpf_prog_ids_of, _loaded
from tdescope.app.remote.agent_main import SILENCE_S
from tdescope.app.remote.client import HEARTBEAT_S

#: What a loaded machine may add to the agent's silence bound before it is gone.
SLACK_S = 8.0


def test_the_bounds_leave_room_for_missed_heartbeats():
    assert 3 * HEARTBEAT_S <= SILENCE_S <= 30


def test_a_stopped_workbench_loses_its_agent_within_the_silence_bound(sshd, sqlcipher_app):
    """SIGSTOP of the local tdescope mid-capture: ssh and the connection stay up, the agent's stdin stays open,
    nothing is read or sent. The agent disarms and exits within SILENCE_S (+ slack), its eBPF programs leave the
    kernel, the target runs on."""
    app = sqlcipher_app()
    app.go()
    proc = subprocess.Popen([*TDESCOPE, "capture", "--ssh", "ops", "--ssh-config", str(sshd.config), "--pid",
                             str(app.pid), "--count", "100000", "--timeout", "120"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline()  # a page arrived through ssh: the probe is armed there
        agent = wait_for(lambda: _agents(sshd), 10, what="the agent on the host")[0]
        progs = wait_for(lambda: _bpf_prog_ids_of(agent), 5, what="the agent's programs")
        assert _loaded(progs) == progs
        os.kill(proc.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        wait_for(lambda: not Path(f"/proc/{agent}").exists(), SILENCE_S + SLACK_S,
                 what="the agent exiting after the workbench fell silent")
        gone = time.monotonic() - stopped
        assert gone >= SILENCE_S - HEARTBEAT_S - 0.5, f"the agent left after {gone:.1f} s: too early"
        wait_for(lambda: not _loaded(progs), 2, what="the kernel dropping the agent's programs")
        assert app.proc.poll() is None
        app.stop()
        code, out, _ = app.finish()
        assert code == 0 and out.startswith("ok")
    finally:
        kill_quietly(proc.pid)
        try:
            os.kill(proc.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
        proc.wait(10)


def test_an_idle_workbench_that_beats_keeps_its_agent(tmp_path):
    """Nothing asked for longer than SILENCE_S: the heartbeats alone keep the agent (a local pipe, no ssh)."""
    from tdescope.app.remote.agent_build import build_agent
    from tdescope.app.remote.client import AgentClient, local_argv

    client = AgentClient(local_argv(build_agent(tmp_path / "tdescope-agent.pyz")))
    try:
        pid = client.hello()["pid"]
        time.sleep(SILENCE_S + 2 * HEARTBEAT_S)
        assert client.lost is None, client.lost  # (a local agent that left would be a zombie: /proc says little)
        assert any(p["pid"] == pid for p in client.targets(critical=()))  # and it still answers
    finally:
        assert client.close() == 0


def test_a_long_answer_is_not_the_workbenchs_silence(monkeypatch):
    """While the agent answers a request (a symbol search read every process's ELF files for over 10 s on a
    loaded machine) it reads nothing: the workbench's heartbeats wait in the pipe. That is not silence."""
    import threading
    import time

    from tdescope.app.remote import agent_stream

    monkeypatch.setattr(agent_stream, "SILENCE_S", 0.5)
    fired = threading.Event()
    silence = agent_stream.Silence(fired.set)
    silence.arm()
    with silence.answering():
        assert not fired.wait(1.5)  # three silence bounds spent answering
    wait_for(fired.is_set, 5, what="the silence after the answer")  # then silence counts again
