"""Errors that reach the user as one clear line."""

__all__ = ["ConnectionLost", "NothingObserved", "UserError"]


class UserError(Exception):
    """A failure the user can act on. ``str(err)`` is the one line shown; no traceback."""


class NothingObserved(UserError):
    """The command ran as asked, but the target gave it nothing to show (a process idle the whole time).

    Said as one line like any :class:`UserError`; ``tdescope`` exits 1 for it (2 for other user errors),
    as grep exits 1 when nothing matched and doctor when a check failed."""


class ConnectionLost(UserError):
    """The connection a run worked through is gone: the host's agent (ssh ended, the agent exited) or the
    database's (a session says so of its driver's error, ``EngineSession.lost``). The window answers it
    with Reconnect (:class:`~tdescope.app.events.LostConnection`); told apart by its class, never by words."""
