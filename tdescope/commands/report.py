"""``tdescope report``: an annotated report (HTML or PDF) from a recorded session."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

from tdescope.app.errors import UserError

HELP = "export a recorded session (.tds) as a self-contained HTML or PDF report"


def add_arguments(parser) -> None:
    parser.add_argument("file", metavar="FILE.tds", help="a recorded session")
    parser.add_argument("-o", "--output", required=True, metavar="OUT.html|OUT.pdf", help="where to write the report")
    parser.add_argument("--include-plaintext", action="store_true",
                        help="show decrypted bytes and values (masked by default)")
    parser.add_argument("--captures", type=int, default=4, metavar="N",
                        help="captures to show besides those notes point at (default 4)")


def decoder_for(engine_name: str, catalog: dict | None = None):
    """The engine's page decoder through the registry, or None when that engine is not installed here.

    ``catalog`` (the recording's ``meta.decoder``) rebuilds the decoder the window used, which knew the
    server's tables: the report then decodes the same rows the window showed.
    """
    from tdescope.app.engines import discover_engines
    from tdescope.app.engines.registry import recorded_decoder

    engines, _ = discover_engines()
    engine = engines.get(engine_name)
    return recorded_decoder(engine, catalog) if engine is not None else None


def export(file: str | Path, output: str | Path, include_plaintext: bool = False, captures: int = 4,
           passphrase: str | None = None) -> Path:
    """Write the report of ``file`` to ``output`` (format by suffix); shared with the GUI.

    ``passphrase`` opens an encrypted session file.
    """
    from tdescope.app.report.model import build_report, write_html
    from tdescope.app.session.reader import SessionReader

    out = Path(output)
    suffix = out.suffix.lower()
    if suffix not in (".html", ".htm", ".pdf"):
        raise UserError(f"cannot tell the report format from {out.name}: name it .html or .pdf")
    if suffix == ".pdf" and not _qt_here():
        raise UserError(f"a PDF report needs Qt (PySide6), which is not installed here: "
                        f"name it {out.with_suffix('.html').name} for HTML")
    with SessionReader(file, writable=False, passphrase=passphrase) as reader:
        decoder = decoder_for(reader.meta.engine, reader.meta.decoder)
        if decoder is None and reader.meta.engine:
            print(f"tdescope: engine {reader.meta.engine} is not installed here: pages are shown undecoded",
                  file=sys.stderr)
        report = build_report(reader, decoder, include_plaintext=include_plaintext, max_captures=captures)
    if suffix != ".pdf":
        return write_html(report, out)  # 0600, a new folder 0700; no Qt needed
    from tdescope.ui.export.pdf import write_report

    return write_report(report, out)


def _qt_here() -> bool:
    """Whether PySide6's QtGui can be imported (it lays out the PDF: :mod:`tdescope.ui.export.pdf`)."""
    try:
        importlib.import_module("PySide6.QtGui")
    except ImportError:
        return False
    return True


def run(args) -> int:
    from tdescope.app.system.private_files import shared_folder_note
    from tdescope.commands._passphrase import passphrase_for

    out = export(args.file, args.output, args.include_plaintext, args.captures, passphrase_for(args.file))
    if (note := shared_folder_note(out.parent)) is not None:
        print(f"tdescope: note: {note}", file=sys.stderr)
    print(f"report written to {out} (readable by you only)", file=sys.stderr)
    return 0
