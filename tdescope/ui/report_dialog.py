"""File > Export report…: where to write it, HTML or PDF, and whether to include plaintext.

The report model is built on a worker thread (a long session takes seconds);
the HTML or PDF is written back on the GUI thread, where Qt's PDF writer lives.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from PySide6.QtWidgets import (
    QCheckBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QVBoxLayout,
)

from tdescope.app.errors import UserError
from tdescope.app.report.model import Report, build_report
from tdescope.app.session.file import SessionReader

__all__ = ["ReportDialog", "ReportReady", "build_in_background", "write_report"]


@dataclass(frozen=True, slots=True)
class ReportReady:
    """A report model finished building (or failed with ``error``)."""

    output: str
    report: Report | None
    error: str | None = None


class ReportDialog(QDialog):
    """Output path (.html or .pdf) and the include-plaintext choice, off by default."""

    def __init__(self, suggested: str, parent=None) -> None:
        super().__init__(parent)
        self.setWindowTitle("Export report")
        self.path = QLineEdit(suggested)
        browse = QPushButton("Browse…")
        browse.clicked.connect(self._browse)
        self.include_plaintext = QCheckBox("Include decrypted bytes (plaintext) in the report")
        self.include_plaintext.setToolTip("Off: the plaintext side of each capture is masked as ··")
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Ok | QDialogButtonBox.StandardButton.Cancel)
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        row = QHBoxLayout()
        row.addWidget(self.path, 1)
        row.addWidget(browse)
        lay = QVBoxLayout(self)
        lay.addWidget(QLabel("Write the report to (.html or .pdf):"))
        lay.addLayout(row)
        lay.addWidget(self.include_plaintext)
        lay.addWidget(buttons)
        self.resize(520, 140)

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export report", self.path.text(),
                                              "HTML report (*.html);;PDF report (*.pdf)")
        if path:
            self.path.setText(path)


def build_in_background(session_path: str, output: str, decoder, include_plaintext: bool, post,
                        passphrase: str | None = None) -> None:
    """Build the report model on a thread; ``post(ReportReady)`` when done (``passphrase``: encrypted file)."""

    def work() -> None:
        try:
            with SessionReader(session_path, writable=False, passphrase=passphrase) as reader:
                report = build_report(reader, decoder, include_plaintext=include_plaintext)
            post(ReportReady(output, report))
        except UserError as exc:
            post(ReportReady(output, None, str(exc)))
        except Exception as exc:  # noqa: BLE001 - one line in the status bar
            post(ReportReady(output, None, f"{type(exc).__name__}: {exc}"))

    threading.Thread(target=work, name="report", daemon=True).start()


def write_report(report: Report, output: str | Path) -> Path:
    """Write ``report`` as HTML or PDF, by the suffix of ``output``."""
    from tdescope.ui.report_pdf import write_report as write_file

    out = Path(output)
    if out.suffix.lower() not in (".html", ".htm", ".pdf"):
        out = out.with_suffix(".html")
    return write_file(report, out)
