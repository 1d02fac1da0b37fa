"""``tdescope info``: what a recorded session holds, without opening the GUI."""

from __future__ import annotations

import json
import time

from tdescope.commands._stdout import emit

HELP = "summarise a recorded session file (.tds): duration, events per kind, notes"


def add_arguments(parser) -> None:
    parser.add_argument("file", metavar="FILE.tds", help="a recorded session")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args) -> int:
    from tdescope.app.events import CaptureWindowState
    from tdescope.app.probe.keep_rate import thinned_in
    from tdescope.app.session.reader import SessionReader
    from tdescope.commands._passphrase import passphrase_for

    with SessionReader(args.file, writable=False, passphrase=passphrase_for(args.file)) as reader:
        s = reader.summary()
        notes = reader.notes()
        thinned = thinned_in(reader.events(kinds=[CaptureWindowState]))
    meta = s.meta
    if args.json:
        emit(json.dumps({
            "file": s.path,
            "schema_version": s.schema_version,
            "engine": meta.engine,
            "host": meta.host,
            "started": s.start,
            "duration_s": round(s.duration_s, 3),
            "counts": s.counts,
            "captures_not_kept": thinned,
            "notes": [{"ts": n.when, "target": n.target.kind, "about": n.target.describe(), "text": n.text}
                      for n in notes],
            "aes_ni": meta.aes_ni,
            "versions": meta.versions,
        }, indent=1))
        return 0
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(s.start)) if s.start else "no events"
    emit(f"{s.path}: {meta.engine_label or meta.engine or 'unknown engine'} on {meta.host or '?'}, {when}, "
         f"{s.duration_s:.1f} s (session format {s.schema_version})")
    for kind, n in s.counts.items():
        emit(f"  {kind:<22} {n:>9}")
    if thinned:
        emit(f"  {'captures not kept':<22} {thinned:>9}  (over the windows' keep rate: a storm is kept as a sample)")
    emit(f"  {'notes':<22} {len(notes):>9}")
    for n in notes:
        emit(f"  - {time.strftime('%H:%M:%S', time.localtime(n.when))} {n.target.describe()}: {n.text}")
    return 0
