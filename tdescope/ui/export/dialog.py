"""File > Export report…: where to write it, HTML or PDF, and whether to include plaintext.

The window builds the report model on its task runner (a long session takes
seconds) and writes the HTML or PDF back on the GUI thread, where Qt's PDF writer lives.
"""

from __future__ import annotations

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

from tdescope.app.report.model import Report

__all__ = ["ReportDialog", "write_report"]


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


def write_report(report: Report, output: str | Path) -> Path:
    """Write ``report`` as HTML or PDF, by the suffix of ``output``."""
    from tdescope.ui.export.pdf import write_report as write_file

    out = Path(output)
    if out.suffix.lower() not in (".html", ".htm", ".pdf"):
        out = out.with_suffix(".html")
    return write_file(report, out)
