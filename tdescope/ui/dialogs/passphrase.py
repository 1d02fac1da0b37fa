"""Passphrase dialogs for encrypted session files (the passphrase never leaves memory)."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtWidgets import QInputDialog, QLineEdit, QMessageBox

from tdescope.app.errors import UserError
from tdescope.app.session.file import is_encrypted

__all__ = ["ask_new_passphrase", "ask_passphrase"]


def ask_passphrase(parent, path: str | Path) -> str | None:
    """The passphrase of an encrypted ``path`` from a password dialog; None for a plain file.

    Raises UserError when the user cancels or leaves it empty.
    """
    if not is_encrypted(path):
        return None
    text, ok = QInputDialog.getText(parent, "tdescope — encrypted session",
                                    f"{Path(path).name} is encrypted. Passphrase:", QLineEdit.EchoMode.Password)
    if not ok or not text:
        raise UserError(f"{path} is encrypted: give its passphrase")
    return text


def ask_new_passphrase(parent) -> str | None:
    """A new passphrase, typed twice in password dialogs; None when cancelled or they differ."""
    first, ok = QInputDialog.getText(parent, "tdescope — encrypt recording",
                                     "Passphrase for this window's session files:", QLineEdit.EchoMode.Password)
    if not ok or not first:
        return None
    again, ok = QInputDialog.getText(parent, "tdescope — encrypt recording", "The same passphrase again:",
                                     QLineEdit.EchoMode.Password)
    if not ok:
        return None
    if again != first:
        QMessageBox.warning(parent, "tdescope — encrypt recording", "The passphrases differ; nothing was encrypted.")
        return None
    return first
