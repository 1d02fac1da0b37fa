"""The eBPF wait tracer on real processes whose syscalls are known: exact counts, sizes, flags.

``clients/known_waits.c`` starts a new thread per "go" (after the tracer attached) that maps and
unmaps exactly N x 128 KiB, preads N x 8 KiB, pwrites N x 4 KiB and madvises N x 1 MiB; the
tracer's figures must say exactly that. "Nothing left behind" is checked from the kernel's side
(bpftool's list of programs) after a kill -9 of the process holding the tracer.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import assert_one_line_error, compile_client, run_tdescope, wait_for
from tdescope.app.waits.ebpf.tracer import PROGRAMS, EbpfWaitTracer
from tdescope.app.events import WaitFigures
from tdescope.app.waits.exact import bytes_p50, figures, format_sizes, merge, percentile_ns, record

pytestmark = pytest.mark.ebpf
N = 300
MAP_PRIVATE_ANON = 0x22
MADV_DONTNEED = 4


def _held(pids: set[int]) -> set[int]:
    """Ids of the BPF programs ``pids`` hold open (their fds' ``prog_id``; this bpftool names no holders)."""
    held = set()
    for pid in pids:
        try:
            for info in Path(f"/proc/{pid}/fdinfo").iterdir():
                held.update(int(line.split()[1]) for line in info.read_text().splitlines()
                            if line.startswith("prog_id:"))
        except OSError:
            continue
    return held


def tracer_programs(holders: set[int] | None = None) -> set[int]:
    """Ids of the programs the kernel holds under the tracer's names; with ``holders``, only those these pids
    hold open: other suites and xdist workers run tracers beside ours."""
    out = subprocess.run(["bpftool", "-j", "prog", "show"], capture_output=True, text=True, check=True).stdout
    ids = {p["id"] for p in json.loads(out or "[]") if p.get("name") in PROGRAMS}
    return ids if holders is None else ids & _held(holders)


def linked_programs() -> set[int]:
    """Ids of the programs the kernel holds a link for: attached, not merely loaded."""
    out = subprocess.run(["bpftool", "-j", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {link["prog_id"] for link in json.loads(out or "[]") if "prog_id" in link}


def all_attached(pid: int) -> bool:
    """True once every program of the tracer ``pid`` holds is attached (loading comes first)."""
    ours = tracer_programs({pid})
    return len(ours) >= len(PROGRAMS) and len(ours & linked_programs()) >= len(PROGRAMS)


@pytest.fixture
def known_waits(tmp_path):
    exe = compile_client("known_waits.c", tmp_path / "known_waits", "-pthread")
    data = tmp_path / "data"
    data.write_bytes(os.urandom(16 * 8192))
    proc = subprocess.Popen([str(exe), str(N), str(data)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    proc.pid_seen = int(proc.stdout.readline())

    def go():
        proc.stdin.write("go\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "done\n"

    proc.go = go
    yield proc
    proc.kill()
    proc.wait()


def by_syscall(totals):
    return {f.syscall: f for f in figures(totals)}


def sizes(f):
    return dict(f.sizes)


def flags(f):
    return dict(f.flags)


def test_counts_sizes_and_flags_are_exact_on_a_thread_started_after_attach(known_waits):
    with EbpfWaitTracer(known_waits.pid) as tracer:
        ours = tracer_programs({os.getpid()})
        assert len(ours) == len(PROGRAMS)
        known_waits.go()
        totals = tracer.read()
        known_waits.go()
        twice = tracer.read()
    rows = by_syscall(totals)
    mmap, munmap = rows["mmap"], rows["munmap"]
    assert mmap.wait_class == munmap.wait_class == "Memory operation"
    assert sizes(mmap)[131072] == N and sizes(munmap)[131072] == N, (mmap.sizes, munmap.sizes)
    assert format_sizes(munmap, 1) == f"131072 B × {N}"
    assert flags(mmap)[MAP_PRIVATE_ANON] >= N
    assert sizes(rows["madvise"])[1 << 20] == N and flags(rows["madvise"])[MADV_DONTNEED] >= N
    assert rows["pread64"].wait_class == "File I/O" and sizes(rows["pread64"]) == {8192: N}
    assert sizes(rows["pwrite64"]) == {4096: N}
    assert bytes_p50(rows["pread64"]) == 8192 and rows["pread64"].count == N
    for f in (mmap, munmap, rows["pread64"]):
        assert 0 < f.p50_us <= f.p99_us <= f.max_us * 2 and f.total_us > 0
        assert sum(f.lat) == f.count
    assert totals.no_room == 0
    # cumulative reads; their difference is the second round alone
    again = by_syscall(twice.minus(totals))
    assert sizes(again["munmap"])[131072] == N and sizes(again["pread64"]) == {8192: N}
    # per-second batches add up to the whole, and the --json record carries the sizes
    halves = [WaitFigures(0.0, known_waits.pid, 1.0, tuple(figures(t))) for t in (totals, twice.minus(totals))]
    both = {f.syscall: f for f in merge(halves)}
    assert sizes(both["munmap"])[131072] == 2 * N and both["pread64"].count == 2 * N
    rec = record(both["munmap"])
    assert rec["source"] == "ebpf" and rec["class"] == "Memory operation" and rec["bytes_top"][0] == [131072, 2 * N]
    assert {"syscall", "count", "total_us", "p50_us", "p99_us", "bytes_p50"} <= set(rec)
    wait_for(lambda: not ours & tracer_programs(), what="the programs unloaded once stopped")


def test_the_reader_hands_over_totals_each_interval_and_says_when_the_process_exits(known_waits):
    got, errors = [], []
    tracer = EbpfWaitTracer(known_waits.pid, interval_s=0.05, on_totals=got.append, on_error=errors.append)
    with tracer:
        known_waits.go()
        wait_for(lambda: any(by_syscall(t).get("pwrite64") for t in got), what="a read after the work")
        known_waits.stdin.close()
        known_waits.wait()
        wait_for(lambda: errors, what="the exit noticed")
    assert errors == [f"process {known_waits.pid} exited; eBPF wait tracing stopped"]
    last = by_syscall(got[-1])
    assert sizes(last["pwrite64"]) == {4096: N}


def test_percentiles_come_from_the_log2_buckets():
    lat = [0] * 40
    lat[10] = 50  # 1024..2047 ns
    lat[20] = 50  # ~1 ms
    assert 1024 <= percentile_ns(lat, 0.5) <= 2048
    assert (1 << 20) <= percentile_ns(lat, 0.99) <= (1 << 21)
    assert percentile_ns([0] * 40, 0.5) == 0.0


def test_kill_9_of_the_tracer_leaves_nothing_attached_and_the_target_whole(known_waits):
    holder = (
        "import sys, time\n"
        "from tdescope.app.waits.ebpf.tracer import EbpfWaitTracer\n"
        f"t = EbpfWaitTracer({known_waits.pid}, interval_s=0.01).start()\n"
        "print('attached', flush=True)\n"
        "time.sleep(600)\n"
    )
    for _ in range(3):
        proc = subprocess.Popen([sys.executable, "-c", holder], stdout=subprocess.PIPE, text=True)
        try:
            assert proc.stdout.readline() == "attached\n"
            ours = tracer_programs({proc.pid})
            assert len(ours) == len(PROGRAMS)
            known_waits.go()  # traced flat out while it dies
        finally:
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            proc.stdout.close()
        wait_for(lambda: not ours & tracer_programs(), what="the kernel removes the programs of a killed tracer")
        assert known_waits.poll() is None
    known_waits.go()
    assert known_waits.poll() is None


def test_cli_waits_json_carries_exact_counts_and_sizes(known_waits):
    cli = subprocess.Popen([sys.executable, "-m", "tdescope", "waits", "--pid", str(known_waits.pid), "--seconds",
                            "3", "--json", "--os-waits", "ebpf"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True)
    try:
        # all three attached, not only loaded: a munmap entered before sys_exit was linked is not counted
        wait_for(lambda: all_attached(cli.pid), timeout=60, what="the tracer attached")
        known_waits.go()
        out, err = cli.communicate(timeout=120)
    finally:
        cli.kill()
    assert cli.returncode == 0, err
    exact = {r["syscall"]: r for r in map(json.loads, out.splitlines()) if "syscall" in r}
    assert exact["munmap"]["source"] == "ebpf" and exact["munmap"]["class"] == "Memory operation"
    assert [131072, N] in exact["munmap"]["bytes_top"] and exact["pread64"]["bytes_top"] == [[8192, N]]
    assert exact["pread64"]["count"] == N and exact["pread64"]["bytes_p50"] == 8192
    assert exact["pwrite64"]["p50_us"] <= exact["pwrite64"]["p99_us"]


def test_cli_waits_without_ebpf_rights_is_one_line_or_falls_back_to_proc(tmp_path):
    """As an unprivileged user: --os-waits ebpf refuses in one line; auto gives /proc figures, said so."""
    setpriv = shutil.which("setpriv")
    assert setpriv
    env = {**os.environ, "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path)}
    tmp_path.chmod(0o777)
    sleeper = subprocess.Popen([setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", sys.executable,
                                "-c", "import time\nwhile True: time.sleep(0.001)"])
    cmd = [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups", "--inh-caps=-all", sys.executable,
           "-m", "tdescope", "waits", "--pid", str(sleeper.pid), "--seconds", "1", "--idle"]
    try:
        refused = subprocess.run([*cmd, "--os-waits", "ebpf"], capture_output=True, text=True, env=env, timeout=60,
                                 cwd=str(tmp_path))
        fallback = subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env, timeout=60,
                                  cwd=str(tmp_path))
    finally:
        sleeper.kill()
        sleeper.wait()
    assert_one_line_error(refused, "exact waits: eBPF")
    assert "eBPF needs root, or CAP_BPF and CAP_PERFMON" in refused.stderr
    assert fallback.returncode == 0, fallback.stderr
    exact = [r for r in map(json.loads, fallback.stdout.splitlines()) if "syscall" in r]
    assert exact and {r["source"] for r in exact} == {"proc"} and all(r["p50_us"] is None for r in exact)
    assert "exact waits: eBPF" in fallback.stderr and "/proc samples only" in fallback.stderr


def test_record_keeps_exact_waits_and_they_read_back(tmp_path):
    out = tmp_path / "run.tds"
    result = run_tdescope("record", "--lab", "sqlcipher", "--captures", "0", "--seconds", "3", "--no-hotspots",
                          "--os-waits", "ebpf", "-o", str(out))
    assert result.returncode == 0, result.stderr
    from tdescope.app.session.reader import SessionReader

    with SessionReader(out, writable=False) as reader:
        batches = list(reader.events(kinds=[WaitFigures]))
    assert batches and all(b.interval_s > 0 for b in batches)
    rows = {f.syscall: f for f in merge(batches)}
    assert rows["pwrite64"].source == "ebpf" and rows["pwrite64"].count > 0 and rows["pwrite64"].sizes
    assert sum(b.lost for b in batches) == 0
    # and the report shows them as a table
    from tdescope.app.report.model import build_report, render_html

    with SessionReader(out, writable=False) as reader:
        report = build_report(reader)
    table = next(t for t in report.results if t.title.startswith("Exact OS waits"))
    assert any(row[1] == "pwrite64" and row[7] for row in table.text_rows())
    assert "Exact OS waits (eBPF" in render_html(report)


def test_read_and_write_say_whether_their_fd_is_a_file_a_socket_or_a_pipe():
    """As the /proc sampler does from /proc/PID/fd: a socket is Network, a pipe Idle, a file File I/O."""
    code = ("import os, socket, sys\n"
            "a, b = socket.socketpair()\n"
            "r, w = os.pipe()\n"
            "f = os.open('/etc/hostname', os.O_RDONLY)\n"
            "sys.stdin.readline()\n"
            "for i in range(100):\n"
            "    os.write(a.fileno(), b'x' * 100); os.read(b.fileno(), 100)\n"
            "    os.write(w, b'y'); os.read(r, 1)\n"
            "    os.lseek(f, 0, 0); os.read(f, 3)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True)
    try:
        with EbpfWaitTracer(proc.pid) as tracer:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.wait(60) == 0
            rows = {(f.wait_class, f.syscall): f for f in figures(tracer.read())}
    finally:
        proc.kill()
    assert rows[("Network", "read (socket)")].count == 100 and sizes(rows[("Network", "write (socket)")]) == {100: 100}
    # + the read of "go" from stdin (a pipe too) when it began after the tracer attached
    assert rows[("Idle", "read (pipe)")].count in (100, 101) and rows[("Idle", "write (pipe)")].count == 100
    assert rows[("File I/O", "read")].count >= 100 and sizes(rows[("File I/O", "read")])[3] >= 100


def test_line_up_pairs_engine_events_with_the_syscalls_they_are_made_of():
    from tdescope.app.events import WaitFigure
    from tdescope.app.waits.counter import WaitTopRow
    from tdescope.app.waits.lineup import line_up

    exact = [WaitFigure("ebpf", "File I/O", "pread64", 40, 800.0, sizes=((8192, 40),)),
             WaitFigure("ebpf", "Sync", "fdatasync", 3, 900.0), WaitFigure("ebpf", "Lock", "futex", 7, 70.0)]
    engine = [WaitTopRow("postgres", "IO", "DataFileRead", 34, 34.0), WaitTopRow("postgres", "IO", "WALSync", 5, 5.0),
              WaitTopRow("postgres", "Extension", "Extension", 1, 1.0), WaitTopRow("os", "CPU", "on CPU", 9, 9.0)]
    pairs = {p.event: p for p in line_up(engine, exact)}
    assert set(pairs) == {"DataFileRead", "WALSync", "Extension"}
    assert pairs["DataFileRead"].syscalls == ("pread64",) and pairs["DataFileRead"].os_count == 40
    assert pairs["DataFileRead"].os_bytes_p50 == 8192 and pairs["DataFileRead"].pct == 34.0
    assert pairs["WALSync"].syscalls == ("fdatasync",) and pairs["WALSync"].os_total_us == 900.0
    assert pairs["Extension"].syscalls == () and pairs["Extension"].os_count == 0  # no rule: no guess


def test_cli_waits_lines_up_a_postgres_backends_engine_waits_with_its_syscalls(pg_cluster):
    import threading

    import psycopg

    stop = threading.Event()
    conn = psycopg.connect(pg_cluster.dsn(), autocommit=True)
    pid = conn.execute("SELECT pg_backend_pid()").fetchone()[0]

    def loop() -> None:
        while not stop.is_set():
            conn.execute("SELECT pg_sleep(0.02)").fetchone()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        result = run_tdescope("waits", "--engine", "postgres", "--dsn", pg_cluster.dsn(), "--target-pid", str(pid),
                              "--seconds", "2", "--idle", "--os-waits", "ebpf", timeout=120)
    finally:
        stop.set()
        thread.join(30)
        conn.close()
    assert result.returncode == 0, result.stderr
    text = result.stdout.split("engine waits beside OS waits")[1]
    line = next(ln for ln in text.splitlines() if ln.startswith("Timeout:PgSleep"))
    cols = line.split()
    assert cols[2] in ("epoll_wait,", "epoll_wait") and int(cols[-3].replace(",", "")) > 20, line


def test_long_waits_go_to_the_timeline_as_a_bounded_sample():
    from tdescope.app.waits.exact import spans_event

    code = ("import sys, time\n"
            "sys.stdin.readline()\n"
            "for i in range(20): time.sleep(0.01)\n"
            "for i in range(300): time.sleep(0.0005)\n")
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True)
    got, t0 = [], time.time()
    try:
        tracer = EbpfWaitTracer(proc.pid, interval_s=0.05, on_spans=got.extend, span_min_ns=5_000_000,
                                span_max_per_s=1000)
        with tracer:
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.wait(60) == 0
    finally:
        proc.kill()
    event = spans_event(proc.pid, got, time.time())
    sleeps = [s for s in event.spans if s.syscall == "clock_nanosleep"]
    # the twenty 10 ms sleeps all; a 0.5 ms one only when the machine's load stretched it past 5 ms
    assert len([s for s in sleeps if s.duration_s >= 0.0095]) >= 20, [(s.syscall, s.duration_s) for s in sleeps]
    assert all(0.005 <= s.duration_s < 1.0 and t0 < s.start < time.time() for s in sleeps)
    assert all(s.wait_class == "Idle" for s in sleeps)
    # the bound: at most span_max_per_s in each (monotonic) second, a CPU or two over in a race; without it
    # the 300 sleeps of 0.5 ms (and their off-CPU intervals) would all go out
    bounded = []
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, text=True)
    try:
        with EbpfWaitTracer(proc.pid, interval_s=0.05, on_spans=bounded.extend, span_min_ns=100_000,
                            span_max_per_s=5):
            started = time.monotonic()
            proc.stdin.write("go\n")
            proc.stdin.flush()
            assert proc.wait(60) == 0
            seconds = int(time.monotonic() - started) + 2  # the seconds the run can touch
    finally:
        proc.kill()
    assert bounded and len(bounded) <= seconds * (5 + 2), (len(bounded), seconds)


def test_doctor_loads_the_wait_tracer_for_real_and_says_so():
    result = run_tdescope("doctor", "--json")
    checks = {c["name"]: c for c in json.loads(result.stdout)}
    assert checks["eBPF waits"]["ok"] is True, checks["eBPF waits"]
    assert checks["eBPF waits"]["value"].startswith("tracer loads")
