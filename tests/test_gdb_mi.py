"""GdbSession against real gdb and a real process: tokens, the read-only guard, clean detach."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import proc_state, tracer_pid, wait_for
from tdescope.app.gdb import mi
from tdescope.app.gdb.allowlist import HELPER_FUNCTIONS, HELPER_PATH
from tdescope.app.gdb.mi import GdbError, GdbSession, check_command

HELPER = str(Path(mi.__file__).resolve().with_name("_probe_helper.py"))


def console(text: str) -> str:
    """``text`` as GdbSession.console_command sends it (an MI C string)."""
    return '-interpreter-exec console "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


#: Console commands (through ``-interpreter-exec console``) that must never reach gdb.
REFUSED_CONSOLE = [
    # memory writes through gdb's Python API, smuggled through a helper call or not
    "python _tdescope_probe.arm(gdb.selected_inferior().write_memory(0, b'x'))",
    "python gdb.selected_inferior().write_memory(0, b'x')",
    "python import os",
    "python _tdescope_probe.resume(); import os",
    "python _tdescope_probe.resume()\nimport os",  # a real newline
    "python _tdescope_probe.resume()\\nimport os",  # a backslash-n in the text
    "python _tdescope_probe.resume()\rimport os",
    "python _tdescope_probe.resume()\ngdb.execute('call abort()')",
    "python _tdescope_probe.resume()\\ngdb.execute('call abort()')",
    "python  _tdescope_probe.resume()",
    "python _tdescope_probe.resume() ",
    "python-interactive _tdescope_probe.resume()",
    "pi _tdescope_probe.resume()",
    # helper calls whose arguments are not literals, or that are not the helper's functions
    "python _tdescope_probe.arm(spec)",
    "python _tdescope_probe.arm(open('/etc/passwd').read())",
    "python _tdescope_probe.arm(__import__('os').system('ls'))",
    "python _tdescope_probe.arm('/tmp/' + 'x.json')",
    "python _tdescope_probe.arm(f'{gdb}')",
    "python _tdescope_probe.arm(*['/tmp/x.json'])",
    "python _tdescope_probe.arm(path=open('/tmp/x'))",
    "python _tdescope_probe.arm(lambda: 0)",
    "python _tdescope_probe.arm([gdb.execute('call abort()')])",
    "python _tdescope_probe.arm({'a': gdb.parse_and_eval('x=1')})",
    "python _tdescope_probe.arm('/tmp/x.json').__class__",
    "python _tdescope_probe.arm('/tmp/x.json')('again')",
    "python _tdescope_probe.spawn()",
    "python _tdescope_probe.__class__",
    "python _tdescope_probe.arm.__globals__['gdb'].execute('call abort()')",
    "python _tdescope_probe.resume('/tmp/x.json')",  # resume takes no argument
    # inferior calls, assignments, jumps
    "call f()",
    "call abort()",
    "print x=1",
    "print x = 1",
    "p x=1",
    "output x=1",
    "set var x=1",
    "set variable x = 1",
    "set x=1",
    "set $pc=0",
    "jump *0x1000",
    "return",
    "compile code x = 1",
    "kill",
    # other files than the packaged helper
    "source /tmp/evil.py",
    "source /tmp/evil/_probe_helper.py",
    "source x" + HELPER,
    "source " + HELPER + ".bak",
    "source -v " + HELPER,
    "source " + HELPER + "\ncall abort()",
    # shells, pipes, signals other than passing on SIGINT
    "shell ls",
    "!ls",
    "pipe print 1 | sh",
    "| print 1 | sh",
    "signal SIGKILL &",
    "signal SIGINT",
    "signal SIGINT & ",
    "signal 9 &",
    "queue-signal SIGTERM",
    # info with free text evaluates expressions
    "info symbol (x=1)",
    "info line *(x=1)",
    "info registers",
    "define hook-stop",
]

#: Raw MI command lines that must never reach gdb.
REFUSED_MI = [
    "-gdb-set may-write-memory on",
    "-gdb-set may-write-registers on",
    "-gdb-set may-call-functions on",
    "-gdb-set may-insert-breakpoints on",
    "-gdb-set observer off",
    "-gdb-set auto-load on",
    "-gdb-set mi-async off",
    "-gdb-set breakpoint pending",
    "-gdb-set var x=1",
    "-gdb-set variable x=1",
    "-gdb-set x=1",
    "-gdb-set $pc=0",
    "-gdb-set $rip = 0",
    "-gdb-set pagination off x=1",
    "-gdb-set pagination off\n-data-write-memory-bytes 0x1000 cc",
    "-gdb-show pagination\n-exec-jump *0x1000",
    "-gdb-show $pc=0",
    "-data-evaluate-expression x=1",
    "-data-evaluate-expression 1",
    "-data-write-memory-bytes 0x1000 cc",
    "-data-write-memory 0x1000 x 1 1",
    "-data-write-register-values x 0 1",
    "-var-create - * x=1",
    "-var-assign v 1",
    "-exec-jump *0x1000",
    "-exec-return",
    "-exec-run",
    "-exec-continue --reverse",
    "-target-download",
    "-break-insert -c \"x=1\" main",
    "-break-insert -c x=1 main",
    "-break-insert \"main if x=1\"",
    "-break-insert *(x=1)",
    "-break-insert *0x1000 -c x=1",
    "-break-condition 1 x=1",
    "-break-commands 1 \"set var x=1\"",
    "-dprintf-insert main \"%d\" x=1",
    "-break-watch x",
    "-data-read-memory-bytes *(int*)p=1 4",
    "-data-read-memory-bytes p 4",
    "-data-read-memory-bytes \"*(int*)p=1\" 4",
    "-data-read-memory-bytes 0x1000 (x=1)",
    "-data-read-memory-bytes -o x=1 0x1000 4",
    "-target-attach 123 x=1",
    "-target-attach $pid",
    "-interpreter-exec mi \"-data-write-memory-bytes 0x1000 cc\"",
    "-interpreter-exec console \"python _tdescope_probe.resume()\" \"call abort()\"",
    "-interpreter-exec console \"python _tdescope_probe.resume()\\nimport os\"",
    "-interpreter-exec console \"python _tdescope_probe.resume()\\012import os\"",
    "-interpreter-exec console \"python _tdescope_probe.resume()\\ngdb.execute('call abort()')\"",
    "-interpreter-exec console \"signal SIGINT \\046\"",
    "-interpreter-exec console python _tdescope_probe.resume()",
    "call abort()",  # CLI commands straight on the MI channel
    "print x=1",
    " -gdb-exit",
    "",
]


@pytest.mark.parametrize("command", [console(t) for t in REFUSED_CONSOLE] + REFUSED_MI)
def test_guard_refuses_commands_that_could_change_the_target(command):
    with pytest.raises(GdbError, match="read-only guard"):
        check_command(command)


#: Every command tdescope sends (grep "command(" and "console_command(") must pass, exactly as sent.
ALLOWED = [
    *(f"-gdb-set {s}" for s in ("mi-async on", "pagination off", "confirm off", "breakpoint pending on",
                                 "may-call-functions off", "may-write-memory off", "auto-load off",
                                 "print thread-events off", "auto-solib-add off")),
    "-gdb-show pagination",
    "-target-attach 123",
    "-target-detach",
    "-exec-continue",
    "-exec-interrupt",
    "-break-insert nanosleep",
    "-break-insert sqlcipher_page_cipher",
    "-break-insert *0x7f3a2b1c0d40",
    "-break-delete",
    "-break-delete 1 2",
    "-data-read-memory-bytes 0x7f3a2b1c0d40 16",
    "-gdb-exit",
    console("source " + HELPER),
    console('python _tdescope_probe.arm("/tmp/x/spec.json")'),
    console('python _tdescope_probe.arm("/tmp/tdescope-a b\\\'c/spec.json")'),
    console("python _tdescope_probe.arm({'max': [1, -2.5, True, None], 'name': \"x\"})"),
    console("python _tdescope_probe.resume()"),
    console("python _tdescope_probe.disarm()"),
    console("signal SIGINT &"),
]


@pytest.mark.parametrize("command", ALLOWED)
def test_guard_allows_what_tdescope_sends(command):
    check_command(command)


def test_helper_path_is_the_packaged_helper():
    assert HELPER_PATH == HELPER and Path(HELPER_PATH).is_file()


def test_helper_functions_are_exactly_what_the_helper_exposes():
    tree = ast.parse(Path(HELPER_PATH).read_text())
    exposed = next(node.value for node in tree.body if isinstance(node, ast.Assign)
                   and getattr(node.targets[0], "id", None) == "_tdescope_probe")
    names = [key.value for key in exposed.args[2].keys]  # type(name, bases, {"arm": ..., ...})
    arity = {f.name: len(f.args.args) for f in tree.body if isinstance(f, ast.FunctionDef)}
    assert {name: arity[name] for name in names} == HELPER_FUNCTIONS


def test_refusal_is_one_line():
    with pytest.raises(GdbError) as err:
        check_command("-gdb-show pagination\n-exec-jump *0x1000")
    assert "read-only guard" in str(err.value) and "\n" not in str(err.value)


@pytest.fixture
def ticker():
    """A process that calls clock_nanosleep every 5 ms."""
    proc = subprocess.Popen([sys.executable, "-c", "import time\nwhile True: time.sleep(0.005)"],
                            start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


@pytest.mark.parametrize("settings, fires", [((), True), (("may-write-memory off",), False)])
def test_may_write_memory_off_would_also_keep_breakpoints_out(ticker, settings, fires):
    """Why GdbSession leaves may-write-memory on: with it off, gdb inserts no breakpoint at all.

    gdb refuses writes through its Python API then too, but it refuses its own int3
    as well (the location falls back to <PENDING>), so no probe would ever fire.
    """
    with GdbSession() as gdb:
        for setting in settings:
            gdb.command(f"-gdb-set {setting}")
        gdb.attach(ticker.pid)
        gdb.command("-break-insert clock_nanosleep")
        gdb.resume()
        stop = gdb.wait_event(lambda r: r.type == "notify" and r.message == "stopped", timeout=3.0)
        assert (stop is not None) == fires
        assert gdb.interrupt()
    assert ticker.poll() is None


@pytest.fixture
def sleeper():
    proc = subprocess.Popen(["sleep", "60"], start_new_session=True)
    yield proc
    proc.kill()
    proc.wait()


def test_attach_breakpoint_detach_leaves_target_running_untraced(sleeper):
    with GdbSession() as gdb:
        gdb.attach(sleeper.pid)
        assert tracer_pid(sleeper.pid) == gdb._proc.pid
        bp = gdb.command("-break-insert nanosleep")
        assert bp.payload["bkpt"]["number"] == "1"
        gdb.resume()
        assert gdb.interrupt()
        gdb.command("-break-delete")
        gdb.detach()
    assert tracer_pid(sleeper.pid) == 0
    assert proc_state(sleeper.pid) in "RS"
    assert sleeper.poll() is None


def test_replies_are_matched_by_token_under_concurrency(sleeper):
    import threading

    with GdbSession() as gdb:
        gdb.attach(sleeper.pid)
        results = {}

        def ask(i):
            results[i] = gdb.command("-gdb-show pagination").payload

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 20 and all(r == {"value": "off"} for r in results.values())


def test_gdb_error_is_one_line(sleeper):
    with GdbSession() as gdb:
        with pytest.raises(GdbError) as err:
            gdb.attach(999_999)
        assert "gone" in str(err.value) and "\n" not in str(err.value)


def test_closing_stdin_while_armed_detaches_and_target_survives(sleeper):
    """The workbench dying closes gdb's stdin: gdb must detach by itself (mi-async on)."""
    gdb = GdbSession().start()
    gdb.attach(sleeper.pid)
    gdb.command("-break-insert nanosleep")
    gdb.resume()
    gdb._proc.stdin.close()  # what the kernel does when the workbench is killed
    gdb._proc.wait(timeout=10)
    wait_for(lambda: tracer_pid(sleeper.pid) == 0, timeout=20, what="the sleeper untraced")
    assert proc_state(sleeper.pid) in "RS"
