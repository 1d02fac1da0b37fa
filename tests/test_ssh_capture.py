"""``tdescope capture --ssh DEST --pid PID`` through a real sshd: the agent runs on the "host" (this machine,
through the test sshd) under ``sudo -n`` with the system python3 and no virtualenv, probes a SQLCipher app
with eBPF and sends the pages back (issue 28, part B).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from conftest import TDESCOPE, assert_one_line_error, run_tdescope, wait_for
from ssh_fixture import kill_quietly
from tdescope.app.remote.over_ssh import tools_problem


def _ssh(sshd, dest: str = "ops") -> list[str]:
    return ["--ssh", dest, "--ssh-config", str(sshd.config)]


def _agents(sshd) -> list[int]:
    """Agents running from the cache of one of ``sshd``'s accounts (``python3 -I /home/ACCOUNT/.cache/tdescope/
    agent-*.pyz``), as root. Only this sshd's: the machine is shared, and another test run's agents are not ours."""
    homes = tuple(f"/home/{name}/".encode() for name in sshd.accounts.values())
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if (cmd[:2] == [b"python3", b"-I"] and len(cmd) > 2 and b"/.cache/tdescope/agent-" in cmd[2]
                    and cmd[2].startswith(homes)):
                found.append(int(entry.name))
    return found


def _bpf_prog_ids_of(pid: int) -> set[int]:
    """The ids of the eBPF programs process ``pid`` holds open (its fds' ``prog_id``; this bpftool
    cannot list a program's holders)."""
    ids = set()
    for info in Path(f"/proc/{pid}/fdinfo").iterdir():
        try:
            text = info.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            if line.startswith("prog_id:"):
                ids.add(int(line.split()[1]))
    return ids


def _loaded(ids: set[int]) -> set[int]:
    """Which of the program ids ``bpftool prog show`` still lists."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    return ids & {p["id"] for p in json.loads(out or "[]")}


def test_capture_over_ssh_on_the_sqlcipher_app(sshd, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    result = run_tdescope("capture", *_ssh(sshd), "--pid", str(app.pid), "--count", "5", "--json", timeout=90)
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    pages, summary = lines[:-1], lines[-1]
    assert len(pages) == 5 and summary["summary"] and summary["backend"] == "ebpf" and summary["captures"] == 5
    assert "capturing on ops via ssh" in result.stderr
    assert app.proc.poll() is None  # the target runs on
    assert not _agents(sshd)  # the agent said goodbye and went


def test_kill_9_of_the_local_tdescope_mid_capture(sshd, sqlcipher_app):
    """The agent exits on the host within 2 s (its stdin closed), nothing stays attached, the target survives."""
    app = sqlcipher_app()
    app.go()
    proc = subprocess.Popen([*TDESCOPE, "capture", *_ssh(sshd), "--pid", str(app.pid), "--count", "100000",
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline()  # a page arrived through ssh: the probe is armed
        agent = wait_for(lambda: _agents(sshd), 10, what="the agent on the host")[0]
        progs = wait_for(lambda: _bpf_prog_ids_of(agent), 5, what="the agent's programs")
        assert _loaded(progs) == progs  # the check below can fail: the agent's probe is in the kernel now
        proc.kill()
        proc.wait()
        wait_for(lambda: not Path(f"/proc/{agent}").exists(), 2, what="the agent exiting after kill -9")
        wait_for(lambda: not _loaded(progs), 2, what="the kernel dropping the agent's programs")
        assert app.proc.poll() is None
        app.stop()
        code, out, _ = app.finish()
        assert code == 0 and out.startswith("ok")  # every row verified: the target ran on unharmed
    finally:
        kill_quietly(proc.pid)


def test_a_dropped_connection_mid_capture_is_one_line_and_the_agent_goes(sshd, sqlcipher_app):
    """The ssh client carrying the connection (the master) is killed mid-capture."""
    app = sqlcipher_app()
    app.go()
    proc = subprocess.Popen([*TDESCOPE, "capture", *_ssh(sshd), "--pid", str(app.pid), "--count", "100000",
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline()
        agent = wait_for(lambda: _agents(sshd), 10, what="the agent on the host")[0]
        progs = wait_for(lambda: _bpf_prog_ids_of(agent), 5, what="the agent's programs")
        masters = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit() and _is_master(p, proc.pid)]
        assert len(masters) == 1
        os.kill(masters[0], signal.SIGKILL)
        wait_for(lambda: not Path(f"/proc/{agent}").exists(), 2, what="the agent exiting after the drop")
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 2
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("capturing on")]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert lines[0] == "tdescope: connection to ops lost (the ssh connection ended)", lines[0]
        wait_for(lambda: not _loaded(progs), 2, what="the kernel dropping the agent's programs")
        assert app.proc.poll() is None
    finally:
        kill_quietly(proc.pid)


def _is_master(entry: Path, parent: int) -> bool:
    try:
        cmd = (entry / "cmdline").read_bytes().split(b"\0")
        ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return False
    return ppid == parent and cmd[0] == b"ssh" and b"-M" in cmd


@pytest.mark.parametrize("dest, fragment", [("unreachable", "cannot reach unreachable: connect to host"),
                                            ("refused", "refused refused the login"),
                                            ("nosudo", "sudo on nosudo needs a password"),
                                            ("nopython", "nopython has no python3"),
                                            ("oldpython", "oldpython has Python 3.8")])
def test_each_bad_host_is_one_line(sshd, dest, fragment):
    assert_one_line_error(run_tdescope("capture", *_ssh(sshd, dest), "--pid", "1", "--count", "1", timeout=60),
                          fragment)


def test_what_is_not_carried_over_ssh_is_one_line(sshd):
    assert_one_line_error(run_tdescope("capture", *_ssh(sshd), "--lab", "--count", "1"),
                          "--ssh does not start a lab on the host")
    assert_one_line_error(run_tdescope("capture", "--ssh-option", "Port=22", "--pid", "1"),
                          "--ssh-option and --ssh-config need --ssh DEST")
    assert_one_line_error(run_tdescope("capture", "--ssh=-oProxyCommand=x", "--pid", "1"), "not a host")


def test_a_host_with_neither_libbpf_nor_gdb_is_one_line():
    """From the agent's welcome (a host without both cannot be made here: the agent runs on this machine)."""
    assert tools_problem("db1", {"tools": {"libbpf": None, "gdb": None, "perf": "/usr/bin/perf"}}) == \
        "db1 has neither libbpf nor gdb: install libbpf1 (eBPF probes) or gdb there"
    assert tools_problem("db1", {"tools": {"libbpf": "libbpf.so.1", "gdb": None}}) is None


def test_record_over_ssh_then_report_here(sshd, sqlcipher_app, tmp_path):
    """``record --ssh``: captures, perf hotspots and OS waits come through the agent into a .tds file here,
    and ``report`` reads it."""
    from tdescope.app.session.reader import SessionReader

    app = sqlcipher_app()
    app.go()
    out = tmp_path / "remote.tds"
    # 6 s: perf's 1 s windows are unwound by a niced `perf script` on the host, slow on a busy machine
    result = run_tdescope("record", *_ssh(sshd), "--pid", str(app.pid), "--captures", "20", "--seconds", "6",
                          "-o", str(out), timeout=90)
    assert result.returncode == 0, result.stderr
    assert "(20 captures)" in result.stderr.splitlines()[-1]
    with SessionReader(out, writable=False) as reader:
        summary = reader.summary()
    assert summary.meta.params["host"] == "ops via ssh"
    assert summary.counts["capture"] == 20
    assert summary.counts["hotspot_window"] >= 1 and summary.counts["wait_sample"] >= 20  # perf and /proc there
    html = tmp_path / "remote.html"
    report = run_tdescope("report", str(out), "-o", str(html))
    assert report.returncode == 0, report.stderr
    assert html.stat().st_size > 1000
    assert app.proc.poll() is None and not _agents(sshd)


def test_a_cut_network_mid_capture_is_one_line_and_the_agent_goes(sshd, sshd_cut, sqlcipher_app):
    """The link to the host goes down mid-capture (a netns sshd, its veth taken down): keepalives notice on
    both sides (1 s here), the agent's session ends so it disarms and exits, tdescope says one line."""
    app = sqlcipher_app()
    app.go()
    proc = subprocess.Popen([*TDESCOPE, "capture", *_ssh(sshd, "cut"), "--ssh-option", "ServerAliveInterval=1",
                             "--ssh-option", "ServerAliveCountMax=2", "--pid", str(app.pid), "--count", "100000",
                             "--timeout", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline()
        agent = wait_for(lambda: _agents(sshd), 10, what="the agent on the host")[0]
        progs = wait_for(lambda: _bpf_prog_ids_of(agent), 5, what="the agent's programs")
        sshd_cut.cut()
        wait_for(lambda: not Path(f"/proc/{agent}").exists(), 10, what="the agent exiting after the cut")
        wait_for(lambda: not _loaded(progs), 2, what="the kernel dropping the agent's programs")
        out, err = proc.communicate(timeout=30)
        lines = [ln for ln in err.strip().splitlines() if not ln.startswith("capturing on")]
        assert proc.returncode == 2 and len(lines) == 1 and "Traceback" not in err, err
        assert lines[0] == "tdescope: connection to cut lost (the ssh connection ended)", lines[0]
        assert app.proc.poll() is None
    finally:
        kill_quietly(proc.pid)


def test_a_recording_over_ssh_matches_one_made_on_the_host(sshd, sqlcipher_app, tmp_path):
    """The same app recorded on the host (local ``record``, eBPF) and over ssh: the same kinds of events,
    the same capture fields, page sizes and decoded page types, the same counters' meaning."""
    from tdescope.app.events import HotspotWindow, PageCapture, WaitSample
    from tdescope.app.session.reader import SessionReader
    from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

    app = sqlcipher_app()
    app.go()
    files = {}
    for how, extra in (("local", ["--backend", "ebpf", "--keep-plaintext"]), ("ssh", [*_ssh(sshd), "--keep-plaintext"])):
        files[how] = tmp_path / f"{how}.tds"
        result = run_tdescope("record", *extra, "--pid", str(app.pid), "--captures", "30", "--seconds", "6",
                              "-o", str(files[how]), timeout=90)
        assert result.returncode == 0, (how, result.stderr)
    seen = {}
    decoder = SqlitePageDecoder()
    for how, path in files.items():
        with SessionReader(path, writable=False) as reader:
            counts = reader.summary().counts
            caps = list(reader.events([PageCapture]))
            kinds = {type(e).__name__ for e in reader.events([PageCapture, HotspotWindow, WaitSample],
                                                              with_bytes=False)}
        seen[how] = {"kinds": kinds, "captures": len(caps),
                     "fields": {(c.symbol, c.direction, c.engine, c.plaintext_side, len(c.before), len(c.after))
                                for c in caps},
                     "types": {decoder.decode(c.after, c.pgno).page_type for c in caps},
                     "seq": [c.seq for c in caps], "counts": set(counts)}
    assert seen["ssh"]["kinds"] == seen["local"]["kinds"] == {"PageCapture", "HotspotWindow", "WaitSample"}
    assert seen["ssh"]["captures"] == seen["local"]["captures"] == 30
    assert seen["ssh"]["fields"] == seen["local"]["fields"]
    assert seen["ssh"]["seq"] == seen["local"]["seq"] == list(range(1, 31))
    assert "table leaf" in seen["ssh"]["types"] and seen["ssh"]["types"] <= seen["local"]["types"] | {"table leaf",
                                                                                                      "table interior"}
    assert seen["ssh"]["counts"] >= {"capture", "hotspot_window", "wait_sample"}
    assert app.proc.poll() is None
