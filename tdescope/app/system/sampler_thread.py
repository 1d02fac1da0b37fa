"""The lifecycle every sampler shares: one background thread, started once, stopped by an event.

perf hotspots, the /proc wait sampler and the eBPF wait tracer each open something (perf, file
descriptors, a BPF object), run a loop in a daemon thread until asked to stop, and close what they
opened; errors cross threads as one-line messages, never as exceptions. :class:`BackgroundSampler`
holds that shape once; a sampler fills in :meth:`~BackgroundSampler._open`, ``_loop``,
:meth:`~BackgroundSampler._interrupt` and :meth:`~BackgroundSampler._close`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

__all__ = ["BackgroundSampler"]

_S = TypeVar("_S", bound="BackgroundSampler")


class BackgroundSampler:
    """Start, stop (idempotent), context manager and ``on_error`` for a sampler with one loop thread.

    Parameters
    ----------
    on_error : callable, optional
        Called with a one-line message, from whichever thread hit the error.

    Notes
    -----
    ``_loop`` runs in the thread and returns when ``self._stop`` is set (it waits on that event, not
    on a sleep, so that :meth:`stop` is prompt).
    """

    #: The loop thread's name (seen in ``py-spy`` and thread dumps).
    thread_name = "sampler"
    #: Seconds :meth:`stop` waits for each thread by default.
    join_timeout = 1.0

    def __init__(self, on_error: Callable[[str], None] | None = None) -> None:
        self.on_error = on_error
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        #: Other threads :meth:`stop` joins after the loop's (a reader the sampler started in ``_open``).
        self._helpers: list[threading.Thread] = []

    def start(self: _S) -> _S:
        """Open (a one-line :class:`~tdescope.app.errors.UserError` when the target or the rights refuse),
        then start the loop thread; returns the sampler.

        Raises
        ------
        RuntimeError
            When called a second time.
        """
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._open()
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        """Stop the loop, join the threads (each up to ``timeout`` s, default :attr:`join_timeout`) and
        close. Idempotent; safe from the loop's own thread (an ``on_error`` handler may call it)."""
        self._stop.set()
        self._interrupt()
        for thread in (self._thread, *self._helpers):
            if thread is not None and thread is not threading.current_thread():
                thread.join(self.join_timeout if timeout is None else timeout)
        self._close()

    def __enter__(self: _S) -> _S:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        """True while the loop thread lives."""
        return self._thread is not None and self._thread.is_alive()

    def _error(self, message: str) -> None:
        if self.on_error is not None:
            self.on_error(message)

    # -- what a sampler fills in ------------------------------------------------------------------
    def _open(self) -> None:
        """Acquire what the loop reads (in the caller's thread, so refusals raise there)."""

    def _loop(self) -> None:
        raise NotImplementedError

    def _interrupt(self) -> None:
        """Wake what the loop is blocked on besides ``self._stop`` (kill a child, close a pipe)."""

    def _close(self) -> None:
        """Release what :meth:`_open` acquired, after the threads have ended; a second stop calls it again."""
