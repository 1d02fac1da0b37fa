"""The eBPF window's bounds under a storm: it ends on time, its probes leave on time, and its counts add up.

The target is ``bench/fast_target.py``: a SQLCipher scan with no Python per row that offers tens of
thousands of page decrypts a second, far more than any consumer of full captures keeps up with.
The consumer is the CLI's own (``describe_capture``: decode, entropy and digests of every page).
What is asserted is measured from the window's own events (their timestamps) and from the kernel's
side (``bpftool``: the links this test process holds).
"""

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import run_tdescope
from tdescope.app.probe.capture_record import describe_capture
from tdescope.app.probe.ebpf.backend import EbpfBackend
from tdescope.app.probe.limits import StopLimits
from tdescope.app.probe.tally import tally_of
from tdescope.app.probe.window import CaptureLimits, CaptureWindow
from tdescope.plugins.sqlcipher.engine import DECRYPT
from tdescope.plugins.sqlcipher.pages import SqlitePageDecoder

FAST_TARGET = Path(__file__).resolve().parents[1] / "bench" / "fast_target.py"
#: A window's promise: it ends, probes out, within this long after its timeout, whatever the load.
END_WITHIN_S = 0.5


class Flood:
    """``fast_target.py`` decrypting pages flat out until stopped."""

    def __init__(self, folder: Path) -> None:
        self.stop = folder / "stop"
        self.proc = subprocess.Popen([sys.executable, str(FAST_TARGET), str(folder / "app.db"), str(self.stop)],
                                     stdout=subprocess.PIPE, text=True, start_new_session=True)
        self.pid = int(self.proc.stdout.readline())
        self.rounds = 0
        threading.Thread(target=self._count, daemon=True).start()

    def _count(self) -> None:
        for _ in self.proc.stdout:
            self.rounds += 1

    def close(self) -> int:
        self.stop.touch()
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9


@pytest.fixture
def flood(tmp_path):
    target = Flood(tmp_path)
    yield target
    assert target.close() == 0  # its own check of every round's aggregate held throughout


def links_held_by_us() -> list[int]:
    """Ids of the BPF links this test process holds open (its fds' ``link_id``). This bpftool names no holders,
    so asking it (as this did) always answered "none", whatever was attached."""
    ids = []
    for info in Path("/proc/self/fdinfo").iterdir():
        try:
            ids += [int(line.split()[1]) for line in info.read_text().splitlines() if line.startswith("link_id:")]
        except OSError:
            continue  # an fd closed meanwhile
    return sorted(ids)


def run_delay_s(tid: int) -> float:
    """How long thread ``tid`` of this process has waited for a CPU while runnable (``schedstat``'s run delay):
    on a machine running three test suites on two cores, seconds that no code of the window's can shorten."""
    return int(Path(f"/proc/self/task/{tid}/schedstat").read_text().split()[1]) / 1e9


def storm_window(pid: int, seconds: float, consumer, count: int = 100000, waits: dict | None = None):
    """A window on ``pid`` whose end state records, at that moment, the links still held (and its first armed
    state, the links held then). ``waits`` gets the calling thread's run delay at the deadline and at the end."""
    states, at_end, armed_with = [], [], []
    tid = threading.get_native_id()  # the window runs on the caller's thread

    def on_state(state):
        states.append(state)
        if state.state in ("disarmed", "failed"):
            at_end.append(links_held_by_us())
            if waits is not None:
                waits["end"] = run_delay_s(tid)
        elif state.state == "armed" and not armed_with:
            armed_with.append(links_held_by_us())  # the control: while armed, the links are seen
            if waits is not None:  # sampled late on a loaded machine: then less is taken off, never more
                timer = threading.Timer(seconds, lambda: waits.setdefault("deadline", run_delay_s(tid)))
                timer.daemon = True
                timer.start()

    limits = CaptureLimits(max_captures=count, max_seconds=seconds, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    window = CaptureWindow(pid, DECRYPT, limits, "sqlcipher", consumer, on_state, backend=EbpfBackend())
    return window, states, at_end, armed_with


def test_a_window_under_a_storm_ends_and_detaches_within_half_a_second_of_its_timeout(flood):
    decoder = SqlitePageDecoder()
    kept, calls = [], []

    def consume(capture) -> None:  # the user's code: the window cannot end while it runs
        t0 = time.time()
        kept.append(describe_capture(capture, decoder))
        calls.append((t0, time.time()))

    waits = {}
    window, states, at_end, armed_with = storm_window(flood.pid, 1.0, consume, waits=waits)
    summary = window.run()
    assert summary.error is None and summary.reason == "limit: max seconds", summary
    armed = next(s.ts for s in states if s.state == "armed")
    end = states[-1]
    assert end.state == "disarmed"
    # at load ~20 it kept 3 captures and ended 2.88 s after arming: the call under way at the deadline is
    # the consumer's time, not the window's (a call that starts after the deadline is the window's, and counts)
    deadline = armed + 1.0
    straddling = sum(t1 - deadline for t0, t1 in calls if t0 < deadline < t1)
    # and the time the window's thread waited for a CPU after the deadline is the machine's (three suites on two
    # cores: 2.36 s once); its own work after the deadline is what the bound is about
    waited = waits["end"] - waits.get("deadline", waits["end"])
    assert end.ts - deadline - straddling - waited <= END_WITHIN_S, \
        (f"window ended {end.ts - armed:.2f} s after arming ({straddling:.2f} s of it in a consumer call, "
         f"{waited:.2f} s waiting for a CPU)")
    assert at_end == [[]], "a uprobe was still attached when the window said it had ended"
    assert len(armed_with[0]) == 2  # entry and return seen while armed: the check above can fail
    assert kept and summary.counters.probe.hits > len(kept)  # it was a storm: more offered than kept


def test_on_a_storm_every_hit_is_counted_once(flood):
    """Sampling, the byte-rate cap, a small ring, a count and a deadline all at once: the kernel's
    counts and the window's add up to the hits, and what the window kept is what it says it kept."""
    decoder = SqlitePageDecoder()
    kept = []
    limits = CaptureLimits(max_captures=3000, max_seconds=1.0, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    backend = EbpfBackend(ring_mb=1, sample_every=2, max_bytes_per_s=40e6)
    summary = CaptureWindow(flood.pid, DECRYPT, limits, "sqlcipher",
                            lambda c: kept.append(describe_capture(c, decoder)), backend=backend).run()
    assert summary.error is None, summary.error
    tally = tally_of(summary.counters)
    assert tally.adds_up, tally.line()
    # a one-second window on a busy machine may have delivered nothing yet (its deadline bounds delivery too):
    # then what reached the ring was counted, not kept, and still adds up
    assert tally.captured == summary.captures == len(kept) and summary.counters.probe.emitted > 0, tally.line()
    assert tally.sampled_out > 0 and tally.rate_capped > 0
    c = summary.counters
    # what the probe put in the ring is what the window kept or counted as not kept
    assert c.probe.emitted == c.captured + c.not_kept
    # the count bounds pages put in the ring, not pages lost (a few CPUs may pass the test at once)
    assert not tally.over_limit or 3000 <= c.probe.emitted <= 3000 + os.cpu_count()


def test_capture_prints_where_every_hit_went(flood):
    args = ["capture", "--pid", str(flood.pid), "--backend", "ebpf", "--count", "100000", "--timeout", "1",
            "--sample", "3"]
    done = run_tdescope(*args, "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    tally = summary["tally"]
    assert tally["adds_up"] and tally["sampled_out"] > 0 and tally["captured"] == summary["captures"]
    assert tally["hits"] == sum(tally[k] for k in ("captured", "not_kept", "lost", "sampled_out", "rate_capped",
                                                   "over_limit", "other_calls"))
    done = run_tdescope(*args)
    assert done.returncode == 0, done.stderr
    line = done.stderr.strip().splitlines()[-1]
    said = re.search(r"(\d+) hits = (\d+) captured((?: \+ \d+ [a-z ]+)*)$", line)
    assert said, line
    terms = [int(n) for n in re.findall(r"\+ (\d+)", said.group(3))]
    assert int(said.group(1)) == int(said.group(2)) + sum(terms)  # a reader sees it add up


def _windows_in(path):
    """(captures kept in the file, the closing states of its windows)."""
    from tdescope.app.events import CaptureWindowState, PageCapture
    from tdescope.app.session.reader import SessionReader

    with SessionReader(path, writable=False) as reader:
        kept = sum(1 for _ in reader.events(kinds=[PageCapture], with_bytes=False))
        ends = [s for s in reader.events(kinds=[CaptureWindowState]) if s.state in ("disarmed", "failed")]
    return kept, ends


def test_the_guis_recording_and_record_keep_by_one_rule_and_count_the_rest(flood, tmp_path):
    """One storm, both paths: the GUI's (a worker-process window publishing into the live hub and its
    recorder) and ``tdescope record``'s keep the same rate and record how many they did not keep;
    ``info`` and the report say it."""
    from tdescope.app.experiment import CaptureSpec, Experiment
    from tdescope.app.probe.keep_rate import KEEP_PER_S
    from tdescope.app.session.file import SessionRecorder
    from tdescope.app.session.live import LiveSession
    from tdescope.app.session.meta import SessionMeta

    seconds = 1.5
    gui_file = tmp_path / "gui.tds"
    live = LiveSession()
    recorder = SessionRecorder(gui_file, SessionMeta.collect("sqlcipher", "SQLCipher"))
    live.attach(recorder)
    limits = CaptureLimits(max_captures=100000, max_seconds=seconds, max_hits_per_s=1_000_000, max_kept_per_s=KEEP_PER_S,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))  # as the main window builds them
    exp = Experiment(None, "sqlcipher", live.publish, pid=flood.pid,
                     capture=CaptureSpec(recipe=DECRYPT, limits=limits, backend=EbpfBackend(), isolated=True))
    exp.start()
    assert exp.wait(60) and exp.error is None, exp.error
    live.detach()
    recorder.close()

    cli_file = tmp_path / "record.tds"
    done = run_tdescope("record", "--pid", str(flood.pid), "--engine", "sqlcipher", "--backend", "ebpf",
                        "--captures", "100000", "--seconds", str(seconds), "--no-hotspots", "--no-waits",
                        "-o", str(cli_file))
    assert done.returncode == 0, done.stderr

    for path in (gui_file, cli_file):
        kept, ends = _windows_in(path)
        assert len(ends) == 1, (path, ends)
        end = ends[0]
        assert end.unsent > 0, f"{path.name}: not a storm? {end}"
        assert kept + end.unsent == end.captures, (path.name, kept, end)  # every capture kept or counted
        assert kept <= KEEP_PER_S * (seconds + 1) + KEEP_PER_S, (path.name, kept)  # the one rule: its rate
        info = run_tdescope("info", str(path), "--json")
        assert info.returncode == 0, info.stderr
        assert json.loads(info.stdout)["captures_not_kept"] == end.unsent
        assert "captures not kept" in run_tdescope("info", str(path)).stdout
        html = tmp_path / f"{path.stem}.html"
        report = run_tdescope("report", str(path), "-o", str(html))
        assert report.returncode == 0, report.stderr
        assert f"{end.unsent} not kept" in html.read_text()


def test_the_count_bounds_pages_put_in_the_ring_not_pages_lost(flood):
    """Issue 27 saw "lost" larger than the hits and the count spent on pages the ring had no room for."""
    limits = CaptureLimits(max_captures=2000, max_seconds=2.0, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    summary = CaptureWindow(flood.pid, DECRYPT, limits, "sqlcipher", lambda c: None,
                            backend=EbpfBackend(ring_mb=1)).run()
    assert summary.error is None, summary.error
    tally, c = tally_of(summary.counters), summary.counters
    assert tally.adds_up, tally.line()
    assert tally.lost <= tally.hits and tally.over_limit > 0
    assert 2000 <= c.probe.emitted <= 2000 + os.cpu_count()  # lost pages did not count toward the 2000
    assert summary.captures + c.not_kept == c.probe.emitted


def test_a_full_ring_never_orphans_a_page_so_the_count_is_reached_not_the_timeout(flood):
    """A consumer slower than the storm fills the ring. A call whose entry record went in but whose return
    record then found the ring full never paired, and captures leave in call order, so every later page
    waited behind it: `capture --ssh --count 30000` delivered 9,000 pages, then nothing until its timeout.
    The probe now keeps room for the return of every call in flight: entries are lost, returns never."""
    limits = CaptureLimits(max_captures=1500, max_seconds=20.0, max_hits_per_s=1_000_000,
                           stops=StopLimits(max_busy_fraction=1.0, max_burst_s=10))
    got = []

    def slow(capture) -> None:  # ~1,000 pages a second at best: far below what the flood offers
        got.append(capture.seq)
        time.sleep(0.001)

    summary = CaptureWindow(flood.pid, DECRYPT, limits, "sqlcipher", slow, backend=EbpfBackend(ring_mb=1)).run()
    c = summary.counters
    assert summary.error is None, summary.error
    assert c.probe.lost > 0  # the ring was full: the case under test happened
    assert c.probe.lost_return == 0, c
    assert summary.reason == "limit: max captures" and len(got) == 1500, (summary.reason, len(got), c)
    assert got == sorted(got)
