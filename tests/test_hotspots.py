"""Hotspots: the perf script parser (table of real perf text), profiles, the
crypto classifier, and real perf on real processes (a C client, SQLCipher)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

from conftest import compile_client, wait_for
from tdescope.app.events import HotspotWindow
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.observe.sampling import leaves_of
from tdescope.app.hotspots.profile import (
    HotspotSampler,
    Profile,
    check_perf,
    crypto_pct,
    diff_profiles,
    fold,
    parse_perf_script,
    perf_event,
)

SQLCIPHER_SO = "_sqlite3.cpython-311-x86_64-linux-gnu.so"



def _need_perf() -> None:
    problem = check_perf()
    if problem is not None:
        pytest.skip(problem)


def _await_windows(windows: list, n: int, within: float = 30.0) -> None:
    """Until ``n`` windows were read: perf script is niced, so on a machine busy with other work
    (the suite on 2 cores) a window can take seconds to arrive."""
    wait_for(lambda: len(windows) >= n, timeout=within, interval=0.05, what=f"{n} hotspot windows")


# --- parser: raw text exactly as perf 6.1 printed it on this machine ---------

# perf record -g -e cpu-clock -p PID; perf script --no-inline (default fields)
HOT_DEFAULT = (
    "hot  7901   398.961059:   10101010 cpu-clock: \n"
    "\t            116a hot_loop+0x21 (/tmp/hot)\n"
    "\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
    "hot  7901   398.971159:   10101010 cpu-clock: \n"
    "\t            1174 hot_loop+0x2b (/tmp/hot)\n"
    "\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
    "hot  7210   366.247078:   10101010 cpu-clock: \n"
    "\t             b46 __vdso_clock_gettime+0x56 ([vdso])\n"
    "\t           cf439 clock_gettime@@GLIBC_2.17+0x19 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
)
# the fields the sampler asks for (-F comm,pid,tid,time,period,event,ip,sym,symoff,dso)
SO = "/work/main/.venv/lib/python3.11/site-packages/sqlcipher3/" + SQLCIPHER_SO
SQLCIPHER_FIELDS = (
    "python  8100/8100    449.479846:    2004008 cpu-clock: \n"
    f"\t          5825c0 sha512_block_data_order_avx2+0xb00 ({SO})\n"
    "\ta831c66d2db43210 [unknown] ([unknown])\n"
    "\n"
    "python  8100/8100    449.481859:    2004008 cpu-clock: \n"
    "\t           f63d3 __libc_pread+0x13 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
)
KERNEL = (
    "python  8100   449.490659:    2004008 cpu-clock: \n"
    "\tffffffff817e4644 ext4_truncate+0x1e4 ([kernel.kallsyms])\n"
    "\tffffffff8225a6c1 do_syscall_64+0x71 ([kernel.kallsyms])\n"
    "\tffffffff81000130 entry_SYSCALL_64_after_hwframe+0x76 ([kernel.kallsyms])\n"
    "\t           f9b17 __GI___unlink+0x7 (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\t6e72756f6a2d6264 [unknown] ([unknown])\n"
    "\n"
)
# binary deleted while running; default event of perf record (cpu-clock:ppp)
DELETED = (
    "hotdel  8259   467.349676:   10101010 cpu-clock:ppp: \n"
    "\t            116a [unknown] (/tmp/hotdel (deleted))\n"
    "\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)\n"
    "\n"
)
# perf record without -g: one line per sample, runtime IP
NO_CALLCHAIN = (
    "             hot  8284   471.639997:   10101010 cpu-clock:      5639279ee16a hot_loop+0x21 (/tmp/hot)\n"
    "             hot  8284   471.660196:   10101010 cpu-clock:      5639279ee1a1 cold_loop+0x1d (/tmp/hot)\n"
)
# g++ code: templates, spaces and parentheses inside symbols
CXX = (
    "cxx2 13175/13175   892.886619:   10101010 cpu-clock: \n"
    "\t            130a Box<long>::spin+0x32 (/tmp/cxx2)\n"
    "\t            11c4 std::_Function_handler<long (int), main::{lambda(int)#1}>::_M_invoke+0xb (/tmp/cxx2)\n"
    "\t            129c main+0xd6 (/tmp/cxx2)\n"
    "\n"
)
# perf record -a: a CPU column; a comm with a space (made up: comm may hold spaces)
SYSTEM_WIDE = (
    "swapper     0 [000]   465.907286:   10101010 cpu-clock: \n"
    "\tffffffff8225fe6b pv_native_safe_halt+0xb ([kernel.kallsyms])\n"
    "\tffffffff82261975 default_idle+0x5 ([kernel.kallsyms])\n"
    "\n"
    "DOM Worker 2  4242/4250 [001]   465.9:   10101010 cpu-clock: \n"
    "\t            1000 work (/opt/x y/lib.so)\n"
    "\n"
)


@pytest.mark.parametrize(
    "text, folded",
    [
        (HOT_DEFAULT, {
            "__libc_start_call_main;hot_loop": 2,
            "__libc_start_call_main;clock_gettime@@GLIBC_2.17;__vdso_clock_gettime": 1,
        }),
        (SQLCIPHER_FIELDS, {
            "[unknown];sha512_block_data_order_avx2": 1,
            "__libc_pread": 1,
        }),
        (KERNEL, {
            "[unknown];__GI___unlink;entry_SYSCALL_64_after_hwframe;do_syscall_64;ext4_truncate": 1,
        }),
        (DELETED, {"__libc_start_call_main;[hotdel]": 1}),
        (NO_CALLCHAIN, {"hot_loop": 1, "cold_loop": 1}),
        (CXX, {
            "main;std::_Function_handler<long (int), main::{lambda(int)#1}>::_M_invoke;"
            "Box<long>::spin": 1,
        }),
        (SYSTEM_WIDE, {"default_idle;pv_native_safe_halt": 1, "work": 1}),
        ("", {}),
        ("Warning:\nsome perf chatter\n", {}),
    ],
    ids=["default", "sampler-fields", "kernel", "deleted", "no-callchain", "c++", "system-wide",
         "empty", "noise"],
)
def test_parse_and_fold(text, folded):
    assert fold(parse_perf_script(text)) == folded
    # lines in, same result: the sampler may stream
    assert fold(parse_perf_script(text.splitlines(keepends=True))) == folded


def test_parse_fields():
    s = parse_perf_script(SQLCIPHER_FIELDS)[0]
    assert (s.comm, s.pid, s.tid, s.ts, s.period, s.event) == (
        "python", 8100, 8100, 449.479846, 2004008, "cpu-clock")
    assert s.callchain and s.ip == 0x5825C0
    assert s.leaf.symbol == "sha512_block_data_order_avx2" and s.leaf.offset == 0xB00
    assert s.leaf.dso == SO
    assert s.frames[1].symbol == "[unknown]" and s.frames[1].offset is None

    d = parse_perf_script(DELETED)[0]
    assert d.event == "cpu-clock:ppp" and d.leaf.dso == "/tmp/hotdel (deleted)"

    n = parse_perf_script(NO_CALLCHAIN)
    assert not n[0].callchain and n[0].ip == 0x5639279EE16A and n[1].leaf.offset == 0x1D

    w = parse_perf_script(SYSTEM_WIDE)
    assert (w[0].cpu, w[1].comm, w[1].pid, w[1].tid, w[1].cpu) == (0, "DOM Worker 2", 4242, 4250, 1)
    assert w[1].leaf.dso == "/opt/x y/lib.so"

    assert fold(parse_perf_script(HOT_DEFAULT), include_comm=True)["hot;__libc_start_call_main;hot_loop"] == 2
    assert leaves_of(parse_perf_script(HOT_DEFAULT), 0).offsets["hot_loop"] == {0x21: 1, 0x2B: 1}


# --- profiles ----------------------------------------------------------------

def test_profile_counts_top_merge_and_range():
    stacks = {"main;a;b": 6, "main;a": 3, "main;c;c": 1}
    p = Profile.from_stacks(stacks, {"b": "/lib/x.so"})
    assert p.samples == 10
    assert p.self_counts == {"b": 6, "a": 3, "c": 1}
    assert p.total_counts == {"main": 10, "a": 9, "b": 6, "c": 1}  # recursion counted once
    top = p.top(2)
    assert [r.symbol for r in top] == ["b", "a"]
    assert top[0].dso == "/lib/x.so" and top[0].self_pct == 60.0 and top[1].total_pct == 90.0
    assert p.top(1, by="total")[0].symbol == "main"
    m = p.merge(Profile.from_stacks({"main;b": 10}))
    assert m.samples == 20 and m.stat("b").self_samples == 16 and m.stat("b").self_pct == 80.0

    w1 = HotspotWindow(ts=11.0, start=10.0, pid=1, stacks={"x": 2}, dsos={})
    w2 = HotspotWindow(ts=12.0, start=11.0, pid=1, stacks={"y": 3}, dsos={})
    assert Profile.from_windows([w1, w2]).samples == 5
    assert Profile.from_windows([w1, w2], start=11.5).self_counts == {"y": 3}
    assert Profile.from_windows([w1, w2], end=10.5).self_counts == {"x": 2}

    samples = parse_perf_script(HOT_DEFAULT)
    assert Profile.from_samples(samples, start=398.97).samples == 1
    assert Profile.from_samples(samples).dsos["hot_loop"] == "/tmp/hot"


@pytest.mark.parametrize("symbol", [
    "aesni_cbc_encrypt", "aesni_set_encrypt_key", "_aesni_decrypt6", "AES_encrypt",
    "AES_set_decrypt_key", "ossl_aes_cbc", "aes_cbc_cipher", "vpaes_encrypt",
    "sha512_block_data_order_avx2", "sha1_block_data_order_shaext", "sha256_block_data_order",
    "SHA512_Update", "SHA256_Final", "HMAC_Update", "HMAC_Init_ex", "PKCS5_PBKDF2_HMAC",
    "pbkdf2_hmac", "kdf_pbkdf2_derive", "rijndaelKeySetupEnc", "l9_ExpandRijndaelKey",
    "EVP_DecryptUpdate", "EVP_CipherUpdate", "EVP_MAC_update", "EVP_DigestUpdate",
    "l9_aesRIJ128Decrypt", "ztchsh1n", "kgce_decrypt", "gcm_ghash_avx", "ChaCha20_ctr32",
    "aesni_cbc_encrypt@plt", "HMAC_Update.part.0",
])
def test_is_crypto_yes(symbol):
    assert is_crypto(symbol)


@pytest.mark.parametrize("symbol", [
    "sqlite3VdbeExec", "sqlcipher_page_cipher", "memcpy", "__libc_pread", "lengthFunc",
    "malloc", "getPageNormal", "[unknown]", "ossl_fnv1a_hash", "OPENSSL_cleanse", "shadow_lookup",
])
def test_is_crypto_no(symbol):
    assert not is_crypto(symbol)


def test_crypto_pct_and_diff():
    enc = Profile.from_stacks({"q;aesni_cbc_encrypt": 30, "q;sha512_block_data_order_avx2": 20,
                               "q;sqlite3VdbeExec": 50})
    plain = Profile.from_stacks({"q;sqlite3VdbeExec": 60})
    assert crypto_pct(enc) == 50.0 and crypto_pct(plain) == 0.0 and crypto_pct(Profile()) == 0.0
    rows = diff_profiles(enc, plain)
    assert rows[0].symbol == "aesni_cbc_encrypt" and rows[0].crypto
    assert rows[0].delta_pct == 30.0 and rows[0].added_pct == 50.0
    vdbe = next(r for r in rows if r.symbol == "sqlite3VdbeExec")
    assert vdbe.delta_pct == -50.0 and vdbe.added_pct == pytest.approx(-100 / 6)
    assert rows[-1].symbol == "sqlite3VdbeExec"
    assert diff_profiles(enc, plain, by="added_pct")[0].symbol == "aesni_cbc_encrypt"


# --- real perf -----------------------------------------------------------------

def test_check_perf_and_event():
    problem = check_perf()
    if shutil.which("perf") is None:
        assert problem == "perf not found: apt-get install linux-perf (`tdescope doctor` checks every tool)"
        return
    assert problem is None or "\n" not in problem
    assert perf_event() in ("cycles", "cpu-clock")
    assert check_perf(pid=2**22 + 1) == f"no process {2**22 + 1}" or problem is not None


@pytest.mark.perf
def test_sampler_ranks_hot_loop_first(tmp_path):
    _need_perf()
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    target = subprocess.Popen([str(exe), "60"])
    windows, errors, samples = [], [], []
    try:
        with HotspotSampler(target.pid, frequency=199, window_s=0.5, on_window=windows.append,
                            on_error=errors.append, on_samples=samples.extend) as sampler:
            _await_windows(windows, 3)
        t0 = time.monotonic()
        sampler.stop()
        assert time.monotonic() - t0 < 1.0  # a perf script still unwinding a window is killed, not awaited
    finally:
        target.kill()
        target.wait()
    assert not errors, errors
    assert len(windows) >= 3
    assert all(w.pid == target.pid and w.event == perf_event() for w in windows)
    assert all(w.ts > w.start for w in windows)
    assert all(a.ts == pytest.approx(b.start) for a, b in zip(windows, windows[1:]))  # contiguous
    prof = Profile.from_windows(windows)
    top = prof.top(3)
    assert top[0].symbol == "hot_loop" and top[0].dso == str(exe), top
    assert top[0].self_pct > 50
    assert prof.stat("cold_loop").self_samples < top[0].self_samples
    assert leaves_of(samples, target.pid).offsets["hot_loop"]
    assert not sampler.running


@pytest.mark.perf
def test_sampler_reports_exit_once(tmp_path):
    _need_perf()
    exe = compile_client("hot.c", tmp_path / "hot", "-fno-omit-frame-pointer")
    # Reap it as soon as it exits, so it vanishes like a non-child target would.
    target = subprocess.Popen([str(exe), "0.8"])
    threading.Thread(target=target.wait, daemon=True).start()
    errors = []
    with HotspotSampler(target.pid, window_s=0.5, on_error=errors.append) as sampler:
        wait_for(lambda: not sampler.running, timeout=30, what="the sampler's stop at the target's exit")
    assert errors == [f"process {target.pid} exited; hotspot sampling stopped"]


SQLCIPHER_WORKER = r"""
import os, sys, time, sqlcipher3
con = sqlcipher3.connect(sys.argv[1])
con.execute("pragma key='not a real secret'")
con.execute("pragma cache_size=10")   # tiny cache: pages are decrypted again and again
con.execute("pragma synchronous=off")  # no fsync: keep the worker on the CPU, not the disk
con.execute("create table t(id integer primary key, v text)")
con.executemany("insert into t(v) values (?)", ((os.urandom(40).hex(),) for _ in range(5000)))
con.commit()
print("ready", flush=True)
t0 = time.time()
while time.time() - t0 < float(sys.argv[2]):
    con.execute("select count(*), sum(length(v)) from t").fetchone()
    con.executemany("insert into t(v) values (?)", ((os.urandom(40).hex(),) for _ in range(100)))
    con.commit()
"""


@pytest.mark.perf
def test_sqlcipher_workload_shows_crypto(tmp_path):
    _need_perf()
    pytest.importorskip("sqlcipher3")
    worker = subprocess.Popen(
        [sys.executable, "-c", SQLCIPHER_WORKER, str(tmp_path / "enc.db"), "40"],
        stdout=subprocess.PIPE, text=True)
    windows, errors = [], []
    try:
        assert worker.stdout.readline().strip() == "ready"  # past the key derivation
        with HotspotSampler(worker.pid, window_s=1.0, on_window=windows.append,
                            on_error=errors.append) as sampler:
            _await_windows(windows, 2)
        lag_s = sampler.lag_s
    finally:
        worker.kill()
        worker.wait()
    assert not errors, errors
    prof = Profile.from_windows(windows)
    assert prof.samples > 20, prof.samples  # ~200 max; fewer when the 2 cores are shared
    top = prof.top(10)
    crypto_top = [r.symbol for r in top if is_crypto(r.symbol)]
    print("seconds from each 1 s window's end to its hand-out:", [round(s, 3) for s in lag_s])
    print("samples:", prof.samples, "top:", [(r.symbol, round(r.self_pct, 1)) for r in top], "crypto %", crypto_pct(prof))
    # SQLCipher 4 defaults: AES-256-CBC (aesni_cbc_encrypt) + HMAC-SHA512 per page
    assert any(s.startswith("sha512_block_data_order") or s.startswith("aesni_")
               for s in crypto_top), top
    assert any(r.dso.endswith(SQLCIPHER_SO) for r in top)
    assert crypto_pct(prof) > 5


@pytest.mark.perf
def test_sampler_errors_are_one_line():
    _need_perf()
    from tdescope.app.errors import UserError

    with pytest.raises(UserError, match="no process"):
        HotspotSampler(2**22 + 7).start()
    target = subprocess.Popen(["sleep", "600"])
    errors = []
    try:
        with HotspotSampler(target.pid, window_s=0.25, event="bogus-event",
                            on_error=errors.append) as sampler:
            wait_for(lambda: not sampler.running, timeout=30, what="perf's refusal")
    finally:
        target.kill()
        target.wait()
    assert errors == [f"perf stopped sampling pid {target.pid}: event syntax error: 'bogus-event'"]


def _cpu_s(pid: int) -> float:
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@pytest.mark.perf
@pytest.mark.parametrize("callgraph", ["dwarf", "fp"])
def test_sqlcipher_callers_are_unwound_by_default(tmp_path, callgraph):
    """The sqlcipher3 wheel, libpython and libc are built without frame pointers: the default (DWARF)
    unwinds through them to the cipher's callers; frame pointers (the old ``-g``, the control) do not."""
    _need_perf()
    pytest.importorskip("sqlcipher3")
    from tdescope.app.hotspots.perf_record import DEFAULT_HZ

    worker = subprocess.Popen(
        [sys.executable, "-c", SQLCIPHER_WORKER, str(tmp_path / "enc.db"), "40"],
        stdout=subprocess.PIPE, text=True)
    windows, errors = [], []
    try:
        assert worker.stdout.readline().strip() == "ready"
        kwargs = {} if callgraph == "dwarf" else {"callgraph": "fp"}
        with HotspotSampler(worker.pid, window_s=1.0, on_window=windows.append, on_error=errors.append,
                            **kwargs) as sampler:
            cpu0, t0 = _cpu_s(worker.pid), time.monotonic()
            _await_windows(windows, 2)
            busy = (_cpu_s(worker.pid) - cpu0) / (time.monotonic() - t0)  # share of a core the target used
    finally:
        worker.kill()
        worker.wait()
    assert not errors, errors
    prof = Profile.from_windows(windows)
    vdbe, cipher = prof.stat("sqlite3VdbeExec"), prof.stat("sqlcipher_page_cipher")
    aes_stacks = [s.split(";") for w in windows for s in w.stacks if s.endswith(";aesni_cbc_encrypt")
                  or s == "aesni_cbc_encrypt"]
    reached = sum("sqlcipher_page_cipher" in names for names in aes_stacks) / max(len(aes_stacks), 1)
    print(callgraph, "windows", len(windows), "samples", prof.samples, "busy", round(busy, 2), "vdbe", vdbe, "cipher", cipher,
          "aes stacks reaching the codec", reached)
    if callgraph == "fp":
        assert vdbe.total_pct < vdbe.self_pct * 1.5 + 2  # callers lost: total is about self
        assert reached < 0.2
        return
    assert len(windows) >= 2 and prof.total_counts.get("[unknown]", 0) < 0.05 * prof.samples
    assert vdbe.total_pct > 3 * vdbe.self_pct and vdbe.total_pct > 30  # the interpreter runs the statements
    assert cipher.total_pct > cipher.self_pct + 5  # the codec's callee, the cipher, counts in its total
    assert reached > 0.8  # AES-NI samples show who called the cipher
    # about DEFAULT_HZ samples per second of the target's CPU: a 5 s run of a busy target gets >= 1000
    covered = sum(w.ts - w.start for w in windows)
    assert prof.samples >= 0.7 * DEFAULT_HZ * busy * covered and DEFAULT_HZ * 5 >= 1000, (prof.samples, covered)


THREAD_PER_JOB = r"""
import sys, threading
def spin():
    x = 0
    while True:
        x += 1
print("ready", flush=True)
for line in sys.stdin:  # like the lab worker: one new thread per job, started when asked
    threading.Thread(target=spin, daemon=True).start()
"""


@pytest.mark.perf
def test_a_thread_started_just_after_the_sampler_is_sampled():
    """perf lists the target's threads, then opens an event on each: a thread started in between was
    never sampled (the lab worker's job thread, 2 runs in 8). ``start()`` now returns after the events
    are open, so a thread started at once is inherited and sampled, every time."""
    _need_perf()
    for trial in range(5):
        target = subprocess.Popen([sys.executable, "-c", THREAD_PER_JOB], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        windows = []
        try:
            assert target.stdout.readline().strip() == "ready"
            # 499 Hz, not the default: the threshold below was set for it (the rate is not what is tested)
            with HotspotSampler(target.pid, frequency=499, window_s=0.5, callgraph="none", on_window=windows.append):
                target.stdin.write("go\n")
                target.stdin.flush()
                # the new thread is the only one on a CPU: wait for its samples, however slowly a loaded machine
                # gives them ("2 windows, > 50 samples" failed at load ~16); a thread never sampled gives none
                wait_for(lambda: sum(sum(w.stacks.values()) for w in windows) > 50, timeout=60, interval=0.05,
                         what=f"50 samples of the thread started at once (trial {trial})")
        finally:
            target.kill()
            target.wait()


def test_a_frame_without_a_name_shows_its_library_once_and_says_what_to_install():
    """Issue #27, item 14: `crypto [libcrypto.so.3] [libcrypto.so.3]` and `[mariadbd] 41 %` with no hint."""
    from tdescope.app.hotspots.profile import Profile
    from tdescope.app.hotspots.symbols import debug_symbols_hint, perf_has_debuginfod, row_label, unsymbolized

    crypto = "/usr/lib/x86_64-linux-gnu/libcrypto.so.3"
    assert row_label("[libcrypto.so.3]", crypto) == "[libcrypto.so.3]"
    assert row_label("aesni_cbc_encrypt", crypto) == "aesni_cbc_encrypt  [libcrypto.so.3]"
    prof = Profile.from_stacks({"main;[mariadbd]": 41, "main;do_work": 59},
                               {"[mariadbd]": "/usr/sbin/mariadbd", "do_work": "/usr/sbin/mariadbd"})
    assert unsymbolized(prof) == [("/usr/sbin/mariadbd", 41.0)]
    hint = debug_symbols_hint("/usr/sbin/mariadbd", 41.0)
    assert "\n" not in hint and hint.startswith("41 % of samples are in mariadbd without a function name")
    assert "install mariadb-server-core-dbgsym" in hint  # the package that holds the file, on Debian
    assert ("DEBUGINFOD_URLS" in hint) == perf_has_debuginfod()  # offered only where perf can use it
