"""A lesson's hotspot evidence: perf on the target while the lesson's timed rounds run.

The DML lesson's published explanation is a profile ("the time goes to AES and
hashing functions"); :class:`RoundHotspots` records perf windows on the engine's
process around an experiment and says which share of the CPU samples sat in
crypto functions (:func:`~tdescope.app.hotspots.profile.crypto_pct`), and which
functions those were. A window is one second: when a side's runs are shorter,
the windows hold both sides and only the whole share is given.
"""

from __future__ import annotations

import threading
import time

from tdescope.app.events import Event, HotspotWindow, Problem, Side, WorkloadProgress, is_ab
from tdescope.app.hotspots.crypto import is_crypto
from tdescope.app.hotspots.profile import Profile, crypto_pct
from tdescope.app.observe.observed import ObservedRun
from tdescope.app.observe.sampling import Observation

__all__ = ["RoundHotspots"]

#: How long the end waits for the window holding the rounds' last moments (a 1 s window, then perf script).
LAST_WINDOW_S = 3.0
#: Fewer samples than this on a side and its share is not given (too few to mean anything).
MIN_SIDE_SAMPLES = 200


class RoundHotspots:
    """perf on ``pid`` between ``__enter__`` and ``__exit__``; :meth:`evidence` reads the windows.

    Parameters
    ----------
    pid : int
        The process doing the engine's work (the SQLCipher lab worker, mariadbd, a PostgreSQL backend).
    enabled : bool
        False: nothing is started and the evidence says hotspots were not asked for.
    """

    def __init__(self, pid: int | None, enabled: bool = True) -> None:
        self.pid = pid
        self.enabled = enabled and pid is not None
        self.windows: list[HotspotWindow] = []
        self.problems: list[str] = []
        self._observation: Observation | None = None
        self._until = float("inf")
        self._last = threading.Event()

    def _keep(self, event: Event) -> None:
        if isinstance(event, HotspotWindow):
            self.windows.append(event)
            if event.ts >= self._until:
                self._last.set()
        elif isinstance(event, Problem):
            self.problems.append(event.message)

    def __enter__(self) -> RoundHotspots:
        if self.enabled:
            assert self.pid is not None
            self._observation = Observation(self.pid, self._keep, hotspots=True, waits=False).start_blocking()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._observation is None:
            return
        # stopping drops the window in progress: wait for the one that covers the rounds' end
        self._until = time.time()
        if self._observation.hotspots_on and not any(w.ts >= self._until for w in self.windows):
            self._last.wait(LAST_WINDOW_S)
        self._observation.stop()

    def evidence(self, progress: list[WorkloadProgress]) -> tuple[list[str], dict]:
        """Evidence lines and figures (``crypto_pct``, ``hotspot_samples``, ``crypto_functions``).

        ``progress`` is the experiment's progress, used to give each side its own share when the
        windows fall within one side's runs.
        """
        if not self.enabled:
            return ["hotspots: not recorded (not asked for)"], {}
        profile = Profile.from_windows(self.windows)
        if not profile.samples:
            why = "; ".join(dict.fromkeys(self.problems)) or "perf gave no sample of the target during the rounds"
            return [f"hotspots: none recorded ({why})"], {}
        share = crypto_pct(profile)
        crypto = [s for s in profile.top(200) if is_crypto(s.symbol) and s.self_samples][:5]
        names = ", ".join(f"{s.symbol} {s.self_pct:.1f} %" for s in crypto) or "none"
        lines = [f"hotspots during the timed rounds (perf, {profile.samples} samples, both sides): crypto functions "
                 f"{share:.1f} % of the CPU samples: {names}"]
        figures: dict = {"crypto_pct": round(share, 2), "hotspot_samples": profile.samples,
                         "crypto_functions": [s.symbol for s in crypto]}
        observed = ObservedRun()
        observed.add_progress(progress)
        observed.add_windows(self.windows)
        sides = {side: p for side, p in observed.side_profiles().items() if p.samples >= MIN_SIDE_SAMPLES}
        if is_ab(sides):
            enc, plain = crypto_pct(sides[Side.ENCRYPTED]), crypto_pct(sides[Side.PLAIN])
            figures.update(crypto_pct_encrypted=round(enc, 2), crypto_pct_plain=round(plain, 2))
            lines.append(f"crypto share by side (windows within one side): encrypted {enc:.1f} %, plain {plain:.1f} %")
        else:
            lines.append("no share per side: each side's runs are shorter than a 1 s perf window at these parameters")
        return lines, figures
