"""GdbSession against real gdb and a real process: tokens, the read-only guard, clean detach."""

import subprocess
import time

import pytest

from conftest import proc_state, tracer_pid
from tdescope.app.gdb.mi import GdbError, GdbSession, check_command


@pytest.mark.parametrize(
    "command",
    [
        "-data-write-memory-bytes 0x1000 cc",
        "-data-write-register-values x 0 1",
        "-var-assign v 1",
        "-exec-return",
        "-exec-jump *0x1000",
        '-interpreter-exec console "call abort()"',
        '-interpreter-exec console "set var x = 1"',
        '-interpreter-exec console "print x = 1"',
        '-interpreter-exec console "python gdb.selected_inferior().write_memory(0, b\'x\')"',
        "-gdb-set may-call-functions on",
        "-target-download",
        "-exec-run",
        '-interpreter-exec console "signal SIGKILL &"',
        '-interpreter-exec console "signal SIGINT"',
        '-interpreter-exec console "queue-signal SIGTERM"',
    ],
)
def test_guard_refuses_commands_that_change_the_target(command):
    with pytest.raises(GdbError, match="read-only guard"):
        check_command(command)


@pytest.mark.parametrize(
    "command",
    ["-break-insert sqlcipher_page_cipher", "-target-detach", '-interpreter-exec console "source /x/helper.py"',
     '-interpreter-exec console "python _tdescope_probe.arm(\\"/tmp/s.json\\")"', "-gdb-set pagination off",
     '-interpreter-exec console "signal SIGINT &"'],
)
def test_guard_allows_what_probes_need(command):
    check_command(command)


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
    deadline = time.time() + 2
    while tracer_pid(sleeper.pid) and time.time() < deadline:
        time.sleep(0.01)
    assert tracer_pid(sleeper.pid) == 0
    assert proc_state(sleeper.pid) in "RS"
