"""Ending a window's engine session without holding the GUI thread.

Cancelling a running experiment is immediate, but waiting for it to disarm (up to 15 s) and closing
the session (a lab server stopping, an agent saying goodbye over ssh) are not: they run on a thread
of their own. That thread is no daemon, so Python waits for it before the process exits: a window
that closed at once never leaves a target armed.
"""

from __future__ import annotations

import threading

from tdescope.app.engines.api import EngineSession
from tdescope.app.experiment import Experiment

__all__ = ["DISARM_WAIT_S", "close_down", "leave_behind"]

#: How long a running experiment is given to disarm and end.
DISARM_WAIT_S = 15.0


def close_down(experiment: Experiment | None, session: EngineSession | None) -> threading.Thread | None:
    """Cancel ``experiment``, then, on a (non-daemon) thread, wait for its end and close ``session``;
    returns the thread, or None when there is nothing to wait for."""
    if experiment is not None:
        experiment.cancel()
    if (experiment is None or experiment.done.is_set()) and session is None:
        return None

    def run() -> None:
        if experiment is not None:
            experiment.wait(DISARM_WAIT_S)
        if session is not None:
            session.close()

    thread = threading.Thread(target=run, name="close-down", daemon=False)
    thread.start()
    return thread


def leave_behind(experiment: Experiment | None, session: EngineSession | None) -> None:
    """For a reconnect, on a worker thread: cancel ``experiment`` and wait for its end, then close
    ``session`` on a thread of its own (a broken one may take its time; the new connection need not
    wait for it, and whatever it raises has nobody to be told)."""
    if experiment is not None:
        experiment.cancel()
        experiment.wait(DISARM_WAIT_S)
    if session is not None:
        threading.Thread(target=_close_quietly, args=(session,), name="close-session", daemon=False).start()


def _close_quietly(session: EngineSession) -> None:
    try:
        session.close()
    except Exception:  # noqa: BLE001 - a reconnect goes on whatever the old connection says
        pass
