"""``capture --ssh DEST --backend gdb``: the agent carries gdb's probe helper out of its zipapp into its 0700
spool, and the host's gdb probes the target read-only, under the agent's watchdog, as it does here (issue 28).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from conftest import TDESCOPE, run_tdescope, tracer_pid, wait_for
from ssh_fixture import kill_quietly
from test_ssh_capture import _agents
from tdescope.app.gdb.guard import text_mismatches


def _ssh(sshd) -> list[str]:
    return ["--ssh", "ops", "--ssh-config", str(sshd.config)]


def test_capture_over_ssh_with_gdb(sshd, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    result = run_tdescope("capture", *_ssh(sshd), "--backend", "gdb", "--pid", str(app.pid), "--count", "3", "--json",
                          timeout=120)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    pages, summary = lines[:-1], lines[-1]
    assert len(pages) == 3 and summary["backend"] == "gdb" and summary["captures"] == 3, summary
    assert all(p["page_type"] for p in pages)  # decoded here from the bytes gdb read there
    assert "capturing on ops via ssh" in result.stderr
    wait_for(lambda: tracer_pid(app.pid) == 0, 5, what="the agent's gdb detaching")
    assert not _agents(sshd)
    assert text_mismatches(app.pid) == []  # no breakpoint byte left in the target's code
    app.stop()
    code, out, _ = app.finish()
    assert code == 0 and out.startswith("ok")


def test_kill_9_of_the_local_tdescope_mid_gdb_capture(sshd, sqlcipher_app):
    """The agent sees its stdin close: it disarms, gdb detaches, the target runs on with its code whole."""
    app = sqlcipher_app()
    app.go()
    proc = subprocess.Popen([*TDESCOPE, "capture", *_ssh(sshd), "--backend", "gdb", "--pid", str(app.pid),
                             "--count", "100000", "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        assert proc.stdout.readline()  # a page came through ssh: gdb is attached and armed there
        agent = wait_for(lambda: _agents(sshd), 10, what="the agent on the host")[0]
        assert tracer_pid(app.pid) != 0
        proc.kill()
        proc.wait()
        wait_for(lambda: not Path(f"/proc/{agent}").exists(), 5, what="the agent exiting after kill -9")
        wait_for(lambda: tracer_pid(app.pid) == 0, 5, what="gdb detaching")
        assert app.proc.poll() is None and text_mismatches(app.pid) == []
        app.stop()
        code, out, _ = app.finish()
        assert code == 0 and out.startswith("ok")
    finally:
        kill_quietly(proc.pid)


def test_the_backend_over_ssh_is_chosen_from_what_the_host_has():
    from argparse import Namespace

    import pytest

    from tdescope.app.errors import UserError
    from tdescope.commands._ssh import remote_backend
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    def args(backend):
        return Namespace(backend=backend, sample=1, max_mb_per_s=0.0, ring_mb=None)

    both = {"tools": {"libbpf": "libbpf.so.1", "gdb": "/usr/bin/gdb"}}
    gdb_only = {"tools": {"libbpf": None, "gdb": "/usr/bin/gdb"}}
    bpf_only = {"tools": {"libbpf": "libbpf.so.1", "gdb": None}}
    assert remote_backend(args("auto"), DECRYPT, "db1", both) == (("ebpf", {"sample_every": 1, "max_bytes_per_s": 0.0}),
                                                                  None)
    assert remote_backend(args("auto"), DECRYPT, "db1", gdb_only) == (("gdb", {}),
                                                                      "probing with gdb on db1: it has no libbpf")
    assert remote_backend(args("gdb"), DECRYPT, "db1", both) == (("gdb", {}), None)
    with pytest.raises(UserError, match="^db1 has no gdb: install gdb there, or probe with --backend ebpf$"):
        remote_backend(args("gdb"), DECRYPT, "db1", bpf_only)
    with pytest.raises(UserError, match="^db1 has no libbpf: install libbpf1 there, or probe with --backend gdb$"):
        remote_backend(args("ebpf"), DECRYPT, "db1", gdb_only)
