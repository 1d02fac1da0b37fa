"""``tdescope gui --ssh``: the window on a process of an ssh host (the test sshd's "host" is this machine).

The agent runs there under ``sudo -n`` with the system python3; the window's capture, hotspots, OS waits,
target list and disassembly bytes come through it; the host shows in the title, the status bar, the
Engine dock and the report; a bad host is one line; killing the ssh client mid-capture shows
"connection lost", the agent goes, and Reconnect re-arms the same target (issue 28, the window's half).
"""

from __future__ import annotations

import os
import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import run_tdescope, wait_for
from test_ssh_capture import _agents
from tdescope.app.errors import UserError
from tdescope.app.events import HotspotWindow, PageCapture, WaitFigures, WaitSample

pytestmark = pytest.mark.usefixtures("sshd")


def _window(qtbot, qsettings, sshd, pid: int | None, dest: str = "ops"):
    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow
    from tdescope.ui.window.remote_host import host_params

    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    win.connect_engine(host_params(dest, ("-F", str(sshd.config)), pid))
    return win


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def _captures(win) -> int:
    return win.captures_dock.model.rowCount()


def test_gui_over_ssh_shows_the_host_and_captures_through_the_agent(qtbot, qsettings, sshd, sqlcipher_app):
    from tdescope.app.hotspots.disasm import disassemble_code
    from tdescope.app.report.model import build_report, render_html
    from tdescope.app.session.reader import SessionReader

    app = sqlcipher_app()
    app.go()
    win = _window(qtbot, qsettings, sshd, app.pid)
    events: list = []
    win.live.subscribe(events.append)
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=90000)
        assert win.session.server_pid() == app.pid
        agent = win.session.agent.welcome["pid"]  # the agent's pid on the host (this machine)
        assert not _gone(agent)
        assert win.windowTitle() == "tdescope — SQLCipher — ops via ssh"
        assert "ops via ssh" in win.remote.label.text() and win.remote.label.isVisible()
        assert win.engine_dock.title.text() == "<b>SQLCipher on ops via ssh</b>"
        assert win.remote.reconnect_action.isEnabled() and not win.remote.reconnect_button.isVisible()

        targets = win.session.targets()  # the host's processes, the target first
        assert targets[0].pid == app.pid and "python" in targets[0].application
        with pytest.raises(UserError, match="^no process 999999999 on ops$"):
            win.session.choose_target(999999999)
        assert len(targets) > 5 and any(t.application == "sshd" for t in targets)

        win.workload_dock.watch_button.click()
        qtbot.waitUntil(lambda: _captures(win) >= 5, timeout=90000)
        wait_for(lambda: any(isinstance(e, WaitSample) for e in events), 60, what="OS waits from the host")
        # exact waits too, as the local window shows them: the eBPF tracer runs in the agent on the host
        wait_for(lambda: any(isinstance(e, WaitFigures) and e.pid == app.pid for e in events), 60,
                 what="exact (eBPF) waits from the host")
        assert win.observation.observation.exact_source == "ebpf" and not win.observation.waits_dock.exact_note
        wait_for(lambda: any(isinstance(e, HotspotWindow) and e.stacks for e in events), 60,
                 what="a perf window from the host")
        cap = next(e for e in events if isinstance(e, PageCapture))
        assert cap.before and cap.after and cap.before != cap.after

        # disassembly from bytes the agent read on the host
        library = next(line.split()[-1] for line in Path(f"/proc/{app.pid}/maps").read_text().splitlines()
                       if "sqlcipher" in line and line.split()[-1].startswith("/"))
        address, code = win.session.read_function(library, "sqlcipher_page_cipher")
        assert any(i.mnemonic == "ret" for i in disassemble_code(code, address))
        disasm = win.observation.hotspots_dock.disasm  # the Hotspots dock's Disassembly tab reads them the same way
        assert disasm.read_code is not None
        disasm.show_function("sqlcipher_page_cipher", library, "", Counter())
        qtbot.waitUntil(lambda: not disasm.busy, timeout=60000)
        assert disasm.insns and disasm.insns[0].address == address and "instructions" in disasm.title.text()

        win.cancel()
        qtbot.waitUntil(lambda: win.experiment.done.is_set(), timeout=30000)
        win.recording.flush()
        with SessionReader(win.recording.recorder.path, writable=False) as reader:
            assert reader.meta.params["host"] == "ops via ssh"
            html = render_html(build_report(reader, win.decoder))
        assert "ops via ssh (workbench on" in html
    finally:
        win.shutdown()
    wait_for(lambda: _gone(agent), 15, what="the agent saying goodbye")
    assert app.proc.poll() is None  # the target runs on


def test_connect_to_a_bad_host_is_one_line(qtbot, qsettings, sshd):
    win = _window(qtbot, qsettings, sshd, 1, dest="nosudo")
    try:
        qtbot.waitUntil(lambda: "needs a password" in win.engine_dock.target.text(), timeout=60000)
        line = win.engine_dock.target.text()
        assert line.startswith("sudo on nosudo needs a password") and "\n" not in line and "Traceback" not in line
        assert win.session is None and win.remote.progress is None
        win.remote.connect_to("unreachable", ("-F", str(sshd.config)))
        qtbot.waitUntil(lambda: "cannot reach unreachable" in win.engine_dock.target.text(), timeout=60000)
        assert win.session is None
        assert win.windowTitle() == f"tdescope — {win.engine.label}"
    finally:
        win.shutdown()


def test_reconnect_after_the_ssh_client_dies_rearms_the_same_target(qtbot, qsettings, sshd, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    win = _window(qtbot, qsettings, sshd, app.pid)
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=90000)
        win.workload_dock.max_captures.setValue(100000)  # still capturing when the connection goes
        win.workload_dock.watch_button.click()
        qtbot.waitUntil(lambda: _captures(win) >= 3, timeout=90000)
        agent = win.session.agent.welcome["pid"]
        assert not _gone(agent)
        os.kill(win.session.agent.client.pid, signal.SIGKILL)  # the ssh client that carries the agent's stdio
        qtbot.waitUntil(lambda: "connection lost" in win.remote.label.text(), timeout=30000)
        assert win.remote.reconnect_button.isVisible()
        wait_for(lambda: _gone(agent), 15,
                 what="the agent disarming and exiting on the host")
        assert app.proc.poll() is None
        qtbot.waitUntil(lambda: win.experiment.done.is_set(), timeout=30000)

        before, lost = _captures(win), win.experiment
        assert "connection lost" in (lost.error or "")
        win.remote.reconnect_button.click()
        qtbot.waitUntil(lambda: win.session is not None and win.remote.label.text().strip() == "ops via ssh",
                        timeout=90000)
        assert win.session.server_pid() == app.pid and not win.remote.reconnect_button.isVisible()
        qtbot.waitUntil(lambda: _captures(win) >= before + 3, timeout=90000)  # re-armed by itself
        assert win.experiment is not lost and win.experiment.recipe.key == lost.recipe.key
        agent = win.session.agent.welcome["pid"]
    finally:
        win.shutdown()
    wait_for(lambda: _gone(agent), 15, what="the agent saying goodbye")


def test_gui_ssh_arguments_are_checked_before_a_window_opens():
    result = run_tdescope("gui", "--pid", "1", env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 2 and result.stderr.strip() == \
        "tdescope: gui --pid PID needs --ssh DEST (a process on that host); locally use Change target…"
    # --dsn is carried over ssh (tests/test_ssh_gui_dsn.py), but not an engine's that cannot, nor a password
    result = run_tdescope("gui", "--ssh", "db1", "--engine", "sqlcipher", "--dsn", "host=x",
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 2 and result.stderr.strip() == \
        "tdescope: the sqlcipher engine's DSN is not carried over ssh: watch its server process on the host " \
        "(a pid) instead"
    result = run_tdescope("gui", "--ssh", "db1", "--dsn", "host=x password=y",
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 2 and result.stderr.startswith("tdescope: put no password in --dsn")


def _ssh_masters(config: Path) -> list[int]:
    """The master ssh processes started with the fixture's ``-F`` config (ours: the tests run one by one)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if cmd[:1] == ["ssh"] and str(config) in cmd and "-M" in cmd:
                found.append(int(entry.name))
    return found


def test_connect_to_host_dialog_remembers_hosts_and_cancels(qtbot, qsettings, sshd):
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from ssh_fixture import free_port
    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow
    from tdescope.ui.window.remote_host import HostDialog

    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    port = free_port()

    def fill() -> None:
        dialog = next(w for w in QApplication.topLevelWidgets() if isinstance(w, HostDialog) and w.isVisible())
        dialog.dest.setEditText("127.0.0.1")
        dialog.options.setText(f"Port={port} StrictHostKeyChecking=no")
        dialog.accept()

    try:
        from tdescope.ui.window.menus import Menu

        assert win.remote.connect_action in win.menus[Menu.FILE].actions()
        QTimer.singleShot(300, fill)
        win.remote.connect_action.trigger()
        assert win.remote.progress is not None and win.remote.progress.isVisible()  # off the GUI thread
        qtbot.waitUntil(lambda: "cannot reach 127.0.0.1" in win.engine_dock.target.text(), timeout=60000)
        line = win.engine_dock.target.text()
        assert "Connection refused" in line and "\n" not in line and win.remote.progress is None
        assert win.remote.recent.entries() == [f"127.0.0.1 Port={port} StrictHostKeyChecking=no"]

        again = HostDialog(win.remote.recent.entries())  # the next dialog offers it, options and all
        assert again.dest.currentText() == "127.0.0.1" and again.options.text() == f"Port={port} StrictHostKeyChecking=no"
        again.options.setText("-oProxyCommand=x")
        with pytest.raises(UserError, match="not an ssh option"):
            again.chosen()

        win.remote.connect_to("ops", ("-F", str(sshd.config)))  # then Cancel at once: nothing is kept
        from PySide6.QtWidgets import QPushButton

        next(b for b in win.remote.progress.findChildren(QPushButton) if b.text() == "Cancel").click()
        assert "cancelled" in win.statusBar().currentMessage() and win.remote.progress is None
        qtbot.waitUntil(lambda: win.tasks.running == 0, timeout=90000)  # the attempt ended by itself
        assert win.session is None and not _ssh_masters(sshd.config)  # what it opened, it closed
    finally:
        win.shutdown()


def _descendants(pid: int) -> list[int]:
    out, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = Path(f"/proc/{parent}/task/{parent}/children")
        try:
            kids = [int(k) for k in children.read_text().split()]
        except OSError:
            kids = []
        out += kids
        todo += kids
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def test_the_gui_command_connects_to_the_host_and_ctrl_c_closes_it(sshd, sqlcipher_app):
    """``tdescope gui --ssh ops --pid PID``, as a user types it: the agent starts on the host through ssh,
    and Ctrl+C closes the window cleanly (exit 0, the agent and the ssh connection gone)."""
    import subprocess

    from conftest import TDESCOPE

    app = sqlcipher_app()
    before = set(_agents(sshd))
    proc = subprocess.Popen([*TDESCOPE, "gui", "--ssh", "ops", "--ssh-config", str(sshd.config), "--pid", str(app.pid)],
                            env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        carrier = wait_for(lambda: next((p for p in _descendants(proc.pid) if "agent-" in _cmdline(p)
                                         and "ssh" in _cmdline(p).split()[0]), None), 90,
                           what="the ssh client carrying the agent")
        assert "sudo -n python3 -I" in _cmdline(carrier) and str(sshd.config) in _cmdline(carrier)
        agents = wait_for(lambda: set(_agents(sshd)) - before, 30, what="the agent running on the host")
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err
        assert not Path(f"/proc/{carrier}").exists()
        wait_for(lambda: all(_gone(a) for a in agents), 15, what="the agent exiting on the host")
        assert app.proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_connect_to_host_from_a_lab_window_records_the_hosts_pages_without_plaintext(qtbot, lab_window, sshd,
                                                                                       sqlcipher_app):
    """A lab is tdescope's own target: its recording keeps plaintext. A customer's process on a host is not:
    its pages are recorded with the plaintext side withheld (unless the recording is encrypted)."""
    from tdescope.app.session.reader import SessionReader

    win = lab_window
    win.workload_dock.run_button.click()  # the lab's events go to the autosave, plaintext kept
    qtbot.waitUntil(lambda: win.recording.recorder is not None and win.experiment is not None
                    and win.experiment.done.is_set(), timeout=90000)
    lab_file = win.recording.recorder.path
    app = sqlcipher_app()
    app.go()
    win.remote.connect_to("ops", ("-F", str(sshd.config)), app.pid)
    qtbot.waitUntil(lambda: win.session is not None and win.remote.host == "ops via ssh", timeout=90000)
    watched = time.time()
    win.workload_dock.watch_button.click()
    qtbot.waitUntil(lambda: win.experiment.done.is_set(), timeout=90000)
    win.recording.flush()
    with SessionReader(win.recording.recorder.path, writable=False) as reader:
        from_host = [c for c in reader.events(kinds=[PageCapture]) if c.ts >= watched]
        assert from_host and reader.meta.params.get("host") == "ops via ssh"
        assert all(not c.plaintext for c in from_host)
    assert win.recording.recorder.path != lab_file  # a new file for the host's process


def test_without_pid_the_target_is_the_one_process_running_the_probed_code(sshd, sqlcipher_app):
    """``gui --ssh ops`` with no ``--pid``: the agent searches the host's processes for the engine's probed
    functions; exactly one (off the deny-list) is the target, none or several is one line."""
    from tdescope.app.engines import discover_engines
    from tdescope.app.remote.host_engine import open_host_session
    from tdescope.app.remote.host_session import running_the_code

    app = sqlcipher_app()
    engine = discover_engines()[0]["sqlcipher"]
    session = open_host_session(engine, "ops", ("-F", str(sshd.config)), app.pid)
    try:
        found = session.search()  # the real search, through the agent
    finally:
        session.close()
    ours = next(p for p in found if p["pid"] == app.pid)
    assert ours["maps"] is True and not ours["critical"]
    assert all(p["maps"] is False for p in found if p["comm"] == "sshd")
    alone = [p for p in found if p["pid"] == app.pid or not p["maps"]]
    assert running_the_code(alone, "ops", "SQLCipher") == app.pid
    with pytest.raises(UserError, match=r"^no process on ops maps SQLCipher's probed functions: give --pid PID$"):
        running_the_code([p for p in found if not p["maps"]], "ops", "SQLCipher")
    twice = alone + [{**ours, "pid": 1}]
    with pytest.raises(UserError, match=rf"^2 processes on ops map .* \({app.pid}, 1\): give --pid PID$"):
        running_the_code(twice, "ops", "SQLCipher")


def test_a_cut_network_mid_capture_shows_connection_lost_and_reconnect_says_one_line(qtbot, qsettings, sshd,
                                                                                     sshd_cut, sqlcipher_app):
    """The link to the host goes down mid-capture (a netns sshd, its veth taken down): keepalives notice (1 s),
    the window says "connection lost", the agent disarms and exits there; Reconnect to the cut host is one line."""
    from tdescope.app.engines import discover_engines
    from tdescope.ui.window.main_window import MainWindow
    from tdescope.ui.window.remote_host import host_params

    app = sqlcipher_app()
    app.go()
    win = MainWindow(discover_engines()[0]["sqlcipher"], qsettings)
    qtbot.addWidget(win)
    win.show()
    keepalive = ("-F", str(sshd.config), "-o", "ServerAliveInterval=1", "-o", "ServerAliveCountMax=2",
                 "-o", "ConnectTimeout=3")
    win.connect_engine(host_params("cut", keepalive, app.pid))
    try:
        qtbot.waitUntil(lambda: win.session is not None, timeout=90000)
        win.workload_dock.max_captures.setValue(100000)
        win.workload_dock.watch_button.click()
        qtbot.waitUntil(lambda: _captures(win) >= 3, timeout=90000)
        agent = win.session.agent.welcome["pid"]
        sshd_cut.cut()
        qtbot.waitUntil(lambda: "connection lost" in win.remote.label.text(), timeout=30000)
        assert win.remote.reconnect_button.isVisible() and win.engine_dock.reconnect.isVisible()
        wait_for(lambda: _gone(agent), 15, what="the agent exiting on the host after the cut")
        assert app.proc.poll() is None
        win.remote.reconnect_button.click()
        qtbot.waitUntil(lambda: "cannot reach cut" in win.engine_dock.target.text(), timeout=90000)
        line = win.engine_dock.target.text()
        assert "\n" not in line and "Traceback" not in line and win.session is None
    finally:
        win.shutdown()
