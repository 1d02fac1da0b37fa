"""What an armed probe costs the target per captured page, next to the work it observes.

``armed_cost_per_hit_us``: the SQLCipher test client's scan (``bench/armed_target.py``,
printing the end of each round) runs continuously; unarmed and armed windows
alternate. While armed (tdescope's capture window, every hit captured), the
target completes fewer rounds; the time it lost, divided by the pages captured
in that time, is the cost of one hit as the target feels it (two breakpoint
stops, the copies, gdb's scheduling):

    cost per hit = (window - rounds_done_armed / unarmed_round_rate) / hits

``aes_decrypt_per_page_us``: decrypting one 4 KB page with AES-256-CBC in
process, with AES-NI (``openssl speed -decrypt -evp``; the ``cryptography``
package's timed decrypt is reported beside it). ``armed_vs_work_ratio`` is the
first divided by the second.

Run alone: ``python -m bench.bench_armed [--quick]`` (JSON on stdout).
"""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_right
from pathlib import Path

from bench._report import goal

TARGET = Path(__file__).with_name("armed_target.py")

goal("armed_cost_per_hit_us", "target's extra time per captured page while armed (unarmed vs armed rounds), µs")
goal("aes_decrypt_per_page_us", "in-process AES-256-CBC decrypt of one 4 KB page with AES-NI (openssl speed), µs")
goal("armed_vs_work_ratio", "armed cost per hit ÷ the decrypt it observes")
goal("armed_offered_pages_per_s", "decrypts per second the unarmed test client offers")
goal("aes_decrypt_py_per_page_us", "same decrypt timed through the `cryptography` package (one call per page), µs")


class _Rounds:
    """The target process and the end times of its rounds, read on a thread."""

    def __init__(self, folder: Path, script: Path = TARGET) -> None:
        self.stop = folder / "stop"
        self.proc = subprocess.Popen([sys.executable, str(script), str(folder / "app.db"), str(self.stop)],
                                     stdout=subprocess.PIPE, text=True)
        self.pid = int(self.proc.stdout.readline())
        self.ends: list[float] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.proc.stdout:
            self.ends.append(float(line))

    def progress(self, t: float) -> float:
        """Rounds done at time ``t``, interpolated within the round under way."""
        end = time.time() + 10
        while (not self.ends or self.ends[-1] <= t) and time.time() < end:
            time.sleep(0.01)  # wait for the round under way at t to end
        ends = self.ends
        i = bisect_right(ends, t)
        if i == 0 or i >= len(ends):
            raise ValueError("time outside the recorded rounds")
        return i - 1 + (t - ends[i - 1]) / (ends[i] - ends[i - 1])

    def close(self) -> None:
        self.stop.touch()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def _armed(pid: int, n: int) -> tuple[float, float, int]:
    from tdescope.app.probe.limits import StopLimits
    from tdescope.app.probe.window import CaptureLimits, CaptureWindow
    from tdescope.plugins.sqlcipher.engine import DECRYPT

    caps = []
    CaptureWindow(pid, DECRYPT, CaptureLimits(max_captures=n, max_seconds=600,
                                              stops=StopLimits(max_busy_fraction=1.0)),
                  "sqlcipher", caps.append).run()
    return caps[0].ts, caps[-1].ts, len(caps) - 1


def openssl_page_us(seconds: int) -> float:
    """µs per 4096-byte AES-256-CBC decrypt, from ``openssl speed`` (AES-NI when the CPU has it)."""
    out = subprocess.run(["openssl", "speed", "-decrypt", "-evp", "aes-256-cbc", "-bytes", "4096",
                          "-seconds", str(seconds)], capture_output=True, text=True, timeout=60).stdout
    kbytes = float(re.search(r"^AES-256-CBC\s+([0-9.]+)k", out, re.M | re.I).group(1))
    return 4096 / (kbytes * 1000) * 1e6


def cryptography_page_us(n: int) -> float:
    """µs per 4096-byte AES-256-CBC decrypt through ``cryptography``, median of 5 batches of ``n``."""
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

    key, iv, page = os.urandom(32), os.urandom(16), os.urandom(4096)
    cipher = Cipher(algorithms.AES(key), modes.CBC(iv))
    per = []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            d = cipher.decryptor()
            d.update(page)
            d.finalize()
        per.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(per)


def run(quick: bool) -> dict:
    reps, n, quiet_s = (3, 400, 1.0) if quick else (6, 1000, 2.0)
    costs, offered, rate_off, rate_on = [], [], [], []
    with tempfile.TemporaryDirectory(prefix="tdescope-bench-armed-") as tmp:
        target = _Rounds(Path(tmp))
        try:
            time.sleep(1.0)  # database created, caches warm
            for _ in range(reps):
                # unarmed: the round rate just before the armed window
                t_a = time.time()
                time.sleep(quiet_s)
                t_b = time.time()
                ru = (target.progress(t_b) - target.progress(t_a)) / (t_b - t_a)
                t0, t1, hits = _armed(target.pid, n)
                done = target.progress(t1) - target.progress(t0)
                lost = (t1 - t0) - done / ru
                costs.append(lost / hits * 1e6)
                offered.append(ru * hits / done)  # pages per round × unarmed rounds per second
                rate_off.append(ru)
                rate_on.append(done / (t1 - t0))
        finally:
            target.close()
    aes = openssl_page_us(1 if quick else 3)
    cost = statistics.median(costs)
    return {
        "armed_cost_per_hit_us": round(cost, 1),
        "aes_decrypt_per_page_us": round(aes, 3),
        "armed_vs_work_ratio": round(cost / aes, 1),
        "armed_offered_pages_per_s": round(statistics.median(offered)),
        "aes_decrypt_py_per_page_us": round(cryptography_page_us(2000 if quick else 10000), 3),
        "armed_rounds_per_s_unarmed": round(statistics.median(rate_off), 2),
        "armed_rounds_per_s_armed": round(statistics.median(rate_on), 2),
        "armed_cost_all_us": [round(c, 1) for c in costs],
    }


if __name__ == "__main__":
    print(json.dumps(run(quick="--quick" in sys.argv), indent=2))
