"""``tdescope agent`` on the system python3 with no virtualenv: the zipapp, its protocol, its refusals.

The agent runs as ``/usr/bin/python3 -I tdescope-agent.pyz`` (isolated: no venv, no site packages),
so these prove the zipapp carries what it needs. The eBPF tests capture from a real sqlcipher3 app.
"""

import os
import random
import subprocess
import zipfile

import pytest

from conftest import wait_for
from tdescope.app.errors import UserError
from tdescope.app.remote.agent_build import FORBIDDEN, agent_hash, build_agent
from tdescope.app.remote.client import AgentClient, local_argv
from tdescope.app.remote.protocol import PREFIX, PROTOCOL_VERSION, Kind, encode, read_frame


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
    assert client._proc.returncode == 0


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
        with pytest.raises(UserError, match="is not carried by this agent yet"):
            client.send(Kind.HOTSPOTS_START, {})
            client._reply(Kind.WELCOME)
        mine = [p for p in client.targets(critical=()) if p["pid"] == os.getpid()]
        assert mine and "python" in mine[0]["cmdline"]


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
