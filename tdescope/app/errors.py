"""Errors that reach the user as one clear line."""

__all__ = ["UserError"]


class UserError(Exception):
    """A failure the user can act on. ``str(err)`` is the one line shown; no traceback."""
