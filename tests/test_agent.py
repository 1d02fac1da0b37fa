"""``tdescope agent`` on the system python3 with no virtualenv: the zipapp, its protocol, its refusals.

The agent runs as ``/usr/bin/python3 -I tdescope-agent.pyz`` (isolated: no venv, no site packages),
so these prove the zipapp carries what it needs. The eBPF tests capture from a real sqlcipher3 app.
"""

import os
import re
import random
import subprocess
import zipfile

import pytest

from conftest import wait_for
from tdescope.app.errors import UserError
from tdescope.app.remote.agent_build import FORBIDDEN, agent_hash, build_agent
from tdescope.app.remote.client import AgentClient, local_argv
from tdescope.app.remote.protocol import PREFIX, PROTOCOL_VERSION, Kind, encode, read_frame
from tdescope.app.system.critical import process_title


@pytest.fixture(scope="module")
def agent(tmp_path_factory):
    return build_agent(tmp_path_factory.mktemp("agent") / "tdescope-agent.pyz")


def start(agent_path):
    return subprocess.Popen(local_argv(agent_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def one_line(text: bytes) -> str:
    lines = text.decode().strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in text.decode(), text
    return lines[0]


def test_the_zipapp_is_small_reproducible_and_carries_no_heavy_imports(agent, tmp_path):
    names = zipfile.ZipFile(agent).namelist()
    assert "__main__.py" in names and "tdescope/app/probe/ebpf/capture.bpf.o" in names
    assert "elftools/elf/elffile.py" in names and "tdescope/app/remote/agent_main.py" in names
    assert not [n for n in names if n.startswith(tuple(p.replace(".", "/") for p in FORBIDDEN))]
    assert not [n for n in names if n.startswith(("tdescope/plugins", "tdescope/ui", "tdescope/app/report"))]
    assert os.path.getsize(agent) < 1_000_000
    assert agent_hash(build_agent(tmp_path / "again.pyz")) == agent_hash(agent)  # its hash names it on a host


def test_hello_and_bye_on_the_isolated_system_python(agent):
    with AgentClient(local_argv(agent)) as client:
        welcome = client.hello()
        assert welcome["version"] == PROTOCOL_VERSION and welcome["euid"] == os.geteuid()
        assert set(welcome["tools"]) == {"libbpf", "gdb", "perf"} and welcome["tools"]["libbpf"]
        assert welcome["pid"] != os.getpid()
        import stat
        assert stat.S_IMODE(os.stat(welcome["spool"]).st_mode) == 0o700  # the one place it writes
    assert client._proc.returncode == 0 and not os.path.exists(welcome["spool"])  # removed on its way out


def test_a_version_mismatch_is_one_clear_line(agent):
    proc = start(agent)
    out, err = proc.communicate(encode(Kind.HELLO, {"version": PROTOCOL_VERSION + 1}), timeout=10)
    import io
    kind, header, _ = read_frame(io.BytesIO(out))
    assert kind is Kind.REFUSED and "agent protocol mismatch" in header["message"]
    assert "protocol mismatch" in one_line(err) and proc.returncode == 0


def test_requests_before_hello_and_replies_sent_as_requests_are_refused_and_the_agent_goes_on(agent):
    with AgentClient(local_argv(agent)) as client:
        client.send(Kind.LIST_TARGETS, {"critical": []})
        with pytest.raises(UserError, match="say hello first"):
            client._reply(Kind.TARGETS)
        client.hello()
        client.send(Kind.WELCOME, {"version": 1})
        with pytest.raises(UserError, match="WELCOME is not a request"):
            client._reply(Kind.WELCOME)
        client.send(Kind.LIST_TARGETS, {"critical": [{"engine": "x", "nonsense": 1}]})
        with pytest.raises(UserError, match="critical rule"):
            client._reply(Kind.TARGETS)
        with pytest.raises(UserError, match="not an ELF file"):
            client.read_function("/etc/passwd", "main")
        with pytest.raises(UserError, match="KeyError"):  # a start request without its pid
            client.send(Kind.HOTSPOTS_START, {})
            client._reply(Kind.WELCOME)
        mine = [p for p in client.targets(critical=()) if p["pid"] == os.getpid()]
        assert mine and mine[0]["cmdline"] == process_title(os.getpid()).cmdline  # the kernel's title (xdist retitles)


@pytest.mark.parametrize("seed", range(4))
def test_garbage_on_stdin_is_refused_in_one_line_and_ends_the_agent(agent, seed):
    rng = random.Random(seed)
    garbage = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 40))),
               PREFIX.pack(b"td", 200, 0, 0),  # an unknown kind
               PREFIX.pack(b"td", int(Kind.HELLO), 5, 0) + b"[1,2]",  # a header that is no object
               PREFIX.pack(b"td", int(Kind.HELLO), 60001, 0)][seed]  # oversized
    proc = start(agent)
    out, err = proc.communicate(encode(Kind.HELLO, {"version": PROTOCOL_VERSION}) + garbage, timeout=10)
    import io
    stream = io.BytesIO(out)
    assert read_frame(stream)[0] is Kind.WELCOME
    kind, header, _ = read_frame(stream)
    assert kind is Kind.REFUSED and header["request"] is None
    assert one_line(err).startswith("tdescope agent: ") and proc.returncode == 2


def test_a_function_is_read_from_an_elf_file_on_the_host(agent):
    libc = "/usr/lib/x86_64-linux-gnu/libc.so.6"
    with AgentClient(local_argv(agent)) as client:
        client.hello()
        head, code = client.read_function(libc, "memcpy")
    assert head["size"] == len(code) > 0 and head["symbol"] == "memcpy"
    from tdescope.app.system.elf import elf_index
    index = elf_index(libc)
    address, size = index.funcs["memcpy"]
    with open(libc, "rb") as fh:
        fh.seek(index.file_offset(address))
        assert fh.read(size) == code
    # the laptop disassembles what the host read: the same instructions as from the file here
    from tdescope.app.hotspots.disasm import disassemble, disassemble_code
    here = disassemble(libc, "memcpy")
    there = disassemble_code(code, head["address"])
    assert [(i.address, i.mnemonic, i.op_str) for i in there] == [(i.address, i.mnemonic, i.op_str) for i in here]


def test_the_host_process_table_comes_as_rows_and_bad_pids_are_refused(agent):
    """``PROCESSES``: what a plugin checks its server's backends against over ssh (pid, parent, title)."""
    from tdescope.app.system.process_table import read_proc

    with AgentClient(local_argv(agent)) as client:
        client.hello()
        rows = client.processes([os.getpid(), 2**22 + 7])  # this process, and a pid nobody has
        assert rows == read_proc(pids=[os.getpid()])
        assert rows[0].ppid == os.getppid()
        everyone = {r.pid for r in client.processes()}
        assert {1, os.getpid(), client.pid} <= everyone
        for bad in (["1"], [True], [-1], list(range(1, 5000))):
            client.send(Kind.PROCESSES, {"pids": bad})
            with pytest.raises(UserError, match="pids must be a list of at most 4096 process ids"):
                client._reply(Kind.PROCESS_ROWS)
        assert client.processes([1])[0].pid == 1  # the agent went on


# -- real eBPF capture through the pipe ----------------------------------------------------------

def _bpf_ids_of(pid: int) -> set:
    """The BPF programs and links process ``pid`` holds (its fds' ``prog_id``/``link_id``), as ``("prog", id)``."""
    ids = set()
    for fd in os.listdir(f"/proc/{pid}/fdinfo"):
        try:
            text = open(f"/proc/{pid}/fdinfo/{fd}").read()
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key in ("prog_id", "link_id"):
                ids.add((key[:4], int(value)))
    return ids


def _in_kernel(ids: set) -> set:
    """Which of ``ids`` the kernel still lists (bpftool): the machine's other probes are not ours."""
    import json
    now = set()
    for what in ("prog", "link"):
        out = subprocess.run(["bpftool", "-j", what, "show"], capture_output=True, text=True, check=True).stdout
        now |= {(what, item["id"]) for item in json.loads(out or "[]")}
    return ids & now


def _freed(held: set) -> None:
    """Wait until the kernel lists none of ``held``: a dead process's programs and links are freed after an RCU
    grace period, which a busy machine stretches (two suites side by side: a program still listed at the
    agent's exit)."""
    wait_for(lambda: not _in_kernel(held), timeout=10.0, what="the kernel freeing the programs and links held")


def _capture(run_window, app_pid, limits):
    import threading
    got, states, summary = [], [], []
    window = run_window(got.append, states.append)
    thread = threading.Thread(target=lambda: summary.append(window.run()))
    thread.start()
    assert window.armed.wait(10), states
    return window, thread, got, states, summary


def test_an_ebpf_capture_through_the_agent_equals_a_local_one(agent, sqlcipher_app):
    from tdescope.app.probe.ebpf.backend import EbpfBackend
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.sqlcipher.engine import DECRYPT
    from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

    app = sqlcipher_app()
    limits = CaptureLimits(max_captures=300, max_seconds=30)
    local = _capture(lambda c, s: CaptureWindow(app.pid, DECRYPT, limits, "sqlcipher", c, s, backend=EbpfBackend()),
                     app.pid, limits)
    app.go()
    local[1].join(30)
    with AgentClient(local_argv(agent)) as client:
        assert client.hello()["euid"] == 0
        window, thread, got, states, summary = _capture(
            lambda c, s: client.window(app.pid, DECRYPT, limits, "sqlcipher", c, s), app.pid, limits)
        held = _bpf_ids_of(client.pid)
        thread.join(30)
        again = []  # the next window, armed as soon as the last one's summary is in
        assert client.window(app.pid, DECRYPT, CaptureLimits(max_captures=5), "sqlcipher", again.append).run().captures == 5
    assert app.proc.poll() is None  # the target runs on
    s, ls = summary[0], local[4][0]
    assert s.reason == ls.reason and s.captures == ls.captures == len(got) == len(local[2]) == 300
    assert s.backend == "ebpf" and s.error is None
    _freed(held)  # (what it held when armed, if it was still armed then: the next test is strict)
    assert states[0].state.value == local[3][0].state.value == "armed"
    assert states[-1].state.value == local[3][-1].state.value == "disarmed" and states[-1].backend == "ebpf"
    assert type(got[0]) is type(local[2][0])
    for mine, theirs in ((got[0], local[2][0]),):
        assert (mine.symbol, mine.direction, mine.engine, mine.plaintext_side) == \
            (theirs.symbol, theirs.direction, theirs.engine, theirs.plaintext_side)
    assert [c.seq for c in got] == list(range(1, 301))
    decoder = SqlitePageDecoder()
    kinds = lambda caps: {decoder.decode(c.after, c.pgno).page_type for c in caps}  # noqa: E731
    assert "table leaf" in kinds(got) <= kinds(local[2])  # the same workload, a later stretch of it
    assert all(len(c.before) == len(c.after) == 4096 for c in got)
    assert any(b"tdescope-marker-row" in c.after and b"tdescope-marker-row" not in c.before for c in got)


def test_stdin_closed_mid_capture_the_agent_disarms_and_exits_within_2_s(agent, sqlcipher_app):
    import time
    from tdescope.plugins.sqlcipher.engine import DECRYPT
    from tdescope.app.probe.window import CaptureLimits

    app = sqlcipher_app()
    app.go()
    client = AgentClient(local_argv(agent))
    spool = client.hello()["spool"]
    window, thread, got, states, summary = _capture(
        lambda c, s: client.window(app.pid, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=60),
                                   "sqlcipher", c, s), app.pid, None)
    wait_for(lambda: len(got) > 10, what="captures through the pipe")
    held = _bpf_ids_of(client.pid)
    assert {w for w, _ in held} == {"prog", "link"} and _in_kernel(held) == held
    t0 = time.monotonic()
    client._proc.stdin.close()  # the connection dropped
    client._proc.wait(2)
    assert time.monotonic() - t0 < 2.0
    thread.join(5)
    # the agent disarmed and said so on its way out (stdout outlives stdin); a cut link says "connection lost"
    assert summary[0].reason == "the workbench went away" or "connection lost" in (summary[0].error or "")
    _freed(held)  # bpftool lists none of its programs or links
    assert not os.path.exists(spool)
    assert app.proc.poll() is None  # the target survives
    app.stop()
    code, out, _ = app.finish()
    assert code == 0 and out.startswith("ok")


def test_os_waits_sampled_on_the_host_arrive_as_wait_samples(agent, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    samples, errors = [], []
    with AgentClient(local_argv(agent)) as client:
        client.hello()
        with pytest.raises(UserError, match="no process 999999999"):
            client.start_waits(999999999)
        client.start_waits(app.pid, hz=50, on_sample=samples.append, on_error=errors.append)
        with pytest.raises(UserError, match="already being sampled"):
            client.start_waits(app.pid)
        wait_for(lambda: len({s.ts for s in samples}) >= 5, what="five ticks of OS waits")
        client.stop_waits()
        stopped_at = len(samples)
        with pytest.raises(UserError, match="no OS wait sampling is running"):
            client.stop_waits()
    assert len(samples) == stopped_at and not errors
    from tdescope.app.events import WaitSample
    assert all(type(s) is WaitSample and s.pid == app.pid and s.source == "os" for s in samples)
    assert {s.wait_class for s in samples} and app.pid in {s.tid for s in samples}


def test_perf_hotspots_on_the_host_arrive_as_hotspot_windows(agent, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    windows, errors = [], []
    with AgentClient(local_argv(agent)) as client:
        client.hello()
        client.start_hotspots(app.pid, frequency=199, window_s=0.5, callgraph="fp", on_window=windows.append,
                              on_error=errors.append)
        wait_for(lambda: windows, timeout=15, what="a perf window through the agent")
        perf = [p for p in client.targets(critical=()) if p["comm"] == "perf"
                and re.search(rf"-p {app.pid}[ ,]", p["cmdline"])]
        assert perf  # perf runs on the host, under the agent
        client.stop_hotspots()
    from tdescope.app.events import HotspotWindow
    w = windows[0]
    assert type(w) is HotspotWindow and w.pid == app.pid and sum(w.stacks.values()) > 0 and w.dsos
    assert not errors
    wait_for(lambda: not any(os.path.exists(f"/proc/{p['pid']}") for p in perf), what="perf gone once stopped")


def test_kill_9_of_the_workbench_mid_capture_the_agent_exits_within_2_s(agent, sqlcipher_app, tmp_path):
    import sys
    import time
    app = sqlcipher_app()
    app.go()
    script = tmp_path / "workbench.py"
    script.write_text(
        "import threading, time\n"
        "from tdescope.app.probe.window import CaptureLimits\n"
        "from tdescope.app.remote.client import AgentClient, local_argv\n"
        "from tdescope.plugins.sqlcipher.engine import DECRYPT\n"
        f"c = AgentClient(local_argv({str(agent)!r})); c.hello()\n"
        f"w = c.window({app.pid}, DECRYPT, CaptureLimits(max_captures=100000, max_seconds=120), 'sqlcipher',\n"
        "             lambda _c: None)\n"
        "threading.Thread(target=w.run, daemon=True).start()\n"
        "w.armed.wait(30); print(c.pid, flush=True); time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    agent_pid = int(parent.stdout.readline())
    held = _bpf_ids_of(agent_pid)
    assert {w for w, _ in held} == {"prog", "link"}
    parent.kill()
    parent.wait()
    t0 = time.monotonic()
    wait_for(lambda: not os.path.exists(f"/proc/{agent_pid}") or
             open(f"/proc/{agent_pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z",
             timeout=2.0, what="the agent gone within 2 s of kill -9 of its workbench")
    assert time.monotonic() - t0 < 2.0
    _freed(held)
    assert app.proc.poll() is None


def test_an_agent_that_never_starts_is_one_line_with_its_last_stderr_line():
    """What ssh or sudo say when they refuse (``sudo: a password is required``) is the line the user sees."""
    argv = ["/usr/bin/python3", "-I", "-c", "import sys; sys.stderr.write('noise\\nsudo: a password is required\\n')"]
    client = AgentClient(argv)
    with pytest.raises(UserError) as err:
        client.hello()
    assert str(err.value) == "connection lost: sudo: a password is required"
    assert client.close() == 0


def test_exact_waits_traced_with_ebpf_on_the_host_arrive_as_wait_totals(agent, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    totals, errors = [], []
    with AgentClient(local_argv(agent)) as client:
        client.hello()
        client.start_exact_waits(app.pid, interval_s=0.2, on_totals=totals.append, on_error=errors.append)
        held = _bpf_ids_of(client.pid)
        wait_for(lambda: len(totals) >= 2 and totals[-1].calls > 0, what="exact waits through the agent")
        client.stop_waits()
    from tdescope.app.waits.exact import WaitTotals
    assert all(type(t) is WaitTotals for t in totals) and totals[-1].calls >= totals[0].calls
    assert totals[-1].aggs and not errors
    assert {w for w, _ in held} == {"prog", "link"}
    _freed(held)


def test_a_big_perf_window_travels_packed_and_a_bomb_is_refused():
    """A 1 s perf window with DWARF callers runs to hundreds of KB of folded stacks: it once failed as
    'HOTSPOTS frame too large' and `record --ssh` kept no hotspots. Big fields travel zlib'd in the payload."""
    import io
    import zlib

    from tdescope.app.remote.protocol import (INLINE_FIELDS, MAX_FIELDS, Kind, ProtocolError, encode, pack_fields,
                                              read_frame, unpack_fields)

    stacks = {";".join(f"frame_{i}_{d}" for d in range(40)): i for i in range(3000)}
    fields = {"start": 1.0, "pid": 7, "stacks": stacks}
    header, payload = pack_fields(fields)
    assert header == {"zjson": True} and payload
    kind, head, body = read_frame(io.BytesIO(encode(Kind.HOTSPOTS, header, payload)))
    assert unpack_fields(head, body) == fields
    small = {"source": "waits", "message": "ok"}
    assert pack_fields(small) == (small, b"") and len(str(small)) < INLINE_FIELDS
    bomb = zlib.compress(b"[" + b" " * (MAX_FIELDS + 10) + b"]", 9)
    with pytest.raises(ProtocolError, match="inflate past the bound"):
        unpack_fields({"zjson": True}, bomb)
    with pytest.raises(ProtocolError, match="not a JSON object"):
        unpack_fields({"zjson": True}, zlib.compress(b"[1, 2]"))
