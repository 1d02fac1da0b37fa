"""What the agent zipapp carries for other programs, copied out of the zip into its spool.

libbpf opens its BPF objects by path and gdb ``source``s its probe helper by path; inside a zipapp
they are data, not files. :func:`carry_into` writes them into the agent's 0700 spool (which it
removes on exit) and points the loaders at the copies. Run from the installed package, nothing is
copied: the package's own files are used.
"""

from __future__ import annotations

import os
from importlib import resources

from tdescope.app.gdb import allowlist
from tdescope.app.probe.ebpf import program as ebpf_program
from tdescope.app.waits.ebpf import tracer as waits_tracer

__all__ = ["carry_into"]


def _carried(package: str, name: str, spool: str, folder: str = ""):
    """The path of ``package``'s file ``name`` as a real file: itself, or (inside a zipapp, where it is
    data, not a file) a copy in the spool's ``folder``; None when it is a file already."""
    src = resources.files(package) / name
    if os.path.exists(str(src)):
        return None
    where = os.path.join(spool, folder)
    os.makedirs(where, mode=0o700, exist_ok=True)
    dest = os.path.join(where, name)
    with open(dest, "wb") as fh:
        fh.write(src.read_bytes())
    return dest


def carry_into(spool: str) -> None:
    """Copy what this zipapp carries for other programs into the spool (0700, removed on exit): the BPF
    objects, where libbpf can open them, and gdb's probe helper with the frame format it loads from
    ``../probe/frames.py``, where gdb can ``source`` it."""
    dest = _carried("tdescope.app.probe.ebpf", "capture.bpf.o", spool)
    if dest is not None:
        ebpf_program.OBJECT_OVERRIDE = dest
    dest = _carried("tdescope.app.waits.ebpf", "waits.bpf.o", spool)
    if dest is not None:
        waits_tracer.OBJECT_OVERRIDE = dest
    dest = _carried("tdescope.app.gdb", "_probe_helper.py", spool, "gdb")
    if dest is not None:
        _carried("tdescope.app.probe", "frames.py", spool, "probe")
        allowlist.HELPER_OVERRIDE = dest
