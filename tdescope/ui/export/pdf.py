"""PDF reports through Qt: the report's HTML laid out by QTextDocument, printed by QPdfWriter.

Why Qt and not WeasyPrint: Qt is already a dependency (PySide6-Essentials holds
QtGui's QPdfWriter/QTextDocument and QtSvg), works offscreen on a server with
no display, and needs no extra native libraries (WeasyPrint pulls in Pango and
is not installed). The cost: QTextDocument understands a subset of HTML/CSS and
no inline SVG, so each SVG plot is rasterised with QSvgRenderer at print
resolution and handed to the document as an image resource.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from tdescope.app.errors import UserError
from tdescope.app.report.model import Report, render_html, write_html
from tdescope.app.system.private_files import write_private

__all__ = ["pdf_bytes", "write_report"]

_DPI = 150


def _app():
    from PySide6.QtGui import QGuiApplication

    app = QGuiApplication.instance()
    if app is None:
        # a headless server has no display: the offscreen platform lays out and prints fine
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QGuiApplication(sys.argv[:1])
    return app


def _raster(svg: str, scale: float):
    from PySide6.QtCore import QByteArray, QSize
    from PySide6.QtGui import QColor, QImage, QPainter
    from PySide6.QtSvg import QSvgRenderer

    renderer = QSvgRenderer(QByteArray(svg.encode()))
    size = renderer.defaultSize()
    image = QImage(QSize(int(size.width() * scale), int(size.height() * scale)), QImage.Format.Format_RGB32)
    image.fill(QColor("white"))
    painter = QPainter(image)
    renderer.render(painter)
    painter.end()
    return image


def pdf_bytes(report: Report) -> bytes:
    """``report`` as an A4 PDF, in memory: the caller writes the file (0600, see ``write_report``)."""
    _app()
    from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QSizeF, QUrl
    from PySide6.QtGui import QPageLayout, QPageSize, QPdfWriter, QTextDocument

    images: dict[str, str] = {}
    svgs = {p.name: p.svg for p in report.plots}
    svgs.update({f"entropy-{i}": c.entropy_svg for i, c in enumerate(report.captures, 1)})

    def image_src(name: str, _uri: str) -> str:
        images[name] = svgs[name]
        return f"tdescope-image:{name}"

    html = render_html(report, image_src=image_src, for_print=True)
    doc = QTextDocument()
    doc.setDefaultStyleSheet("")
    for name, svg in images.items():
        doc.addResource(QTextDocument.ResourceType.ImageResource, QUrl(f"tdescope-image:{name}"), _raster(svg, 2.0))
    doc.setHtml(html)
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buffer)
    writer.setResolution(_DPI)
    writer.setPageSize(QPageSize(QPageSize.PageSizeId.A4))
    writer.setPageMargins(QMarginsF(14, 14, 14, 14), QPageLayout.Unit.Millimeter)
    writer.setTitle(report.title)
    writer.setCreator("tdescope")
    # lay the document out at the page width in device pixels so the images keep their proportions
    rect = writer.pageLayout().paintRectPixels(_DPI)
    doc.setPageSize(QSizeF(rect.width(), rect.height()))
    doc.setDefaultFont(doc.defaultFont())
    doc.print_(writer)
    del writer  # ends the PDF into the buffer
    buffer.close()
    if data.isEmpty():
        raise UserError("could not lay out the PDF")
    return bytes(data.data())


def write_report(report: Report, out: Path) -> Path:
    """Write ``report`` to ``out``: PDF for a ``.pdf`` suffix, self-contained HTML otherwise.

    A report holds decoded pages (their plaintext when asked for): the file is 0600, a folder
    created for it 0700, whatever the umask (:mod:`tdescope.app.system.private_files`)."""
    if out.suffix.lower() != ".pdf":
        return write_html(report, out)
    try:
        write_private(out, pdf_bytes(report))
    except OSError as exc:
        raise UserError(f"cannot write {out}: {exc.strerror or exc}") from None
    return out
