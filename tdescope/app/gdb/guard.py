"""The breakpoint guard: if gdb dies while armed, put the target's code back.

A software breakpoint is an ``int3`` (0xCC) written over the first byte of an
instruction. If gdb is killed while breakpoints sit in the target, the kernel
detaches the target and it runs on with those bytes in place: the next hit
kills it with SIGTRAP (exit status 133 here). The guard is a small separate
process (its own session, so it outlives a crash of the workbench) that watches
gdb through a pidfd and, the moment gdb dies while armed, writes the original
bytes back through ``/proc/PID/mem``. The original bytes are the ELF file's on
disk: text mappings of a PIC library carry no relocations, so file bytes and
memory bytes agree everywhere except where a breakpoint sits.

Run as ``python -m tdescope.app.gdb.guard TARGET_PID GDB_PID [SPOOL_DIR]``; stdin
takes JSON lines ``{"armed": [address, ...]}`` and ``{"disarmed": true}``; it
answers one JSON line when it restores anything. Once gdb is gone it removes
SPOOL_DIR, where the probe wrote the captured (decrypted) pages: a killed
workbench leaves no plaintext behind.

Remaining window of risk (stated honestly): a hit between gdb's death and the
guard's write (about a millisecond), or gdb dying between the trap and its
rewind of the program counter, still kills the target.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

from tdescope.app.slots import SLOTS, SLOTS_KW_ONLY
from tdescope.app.system.procmaps import Mapping, executable_mappings
from tdescope.app.system.procstat import process_state

__all__ = [
    "GuardReport",
    "Mapping",
    "Originals",
    "TextMismatch",
    "executable_mappings",
    "main",
    "restore",
    "start_guard",
    "stop_guard",
    "text_mismatches",
    "update_guard",
]

INT3 = 0xCC


@dataclass(frozen=True, **SLOTS_KW_ONLY)
class GuardReport:
    """What the guard said when it had to act (gdb died while armed): ``restored`` code bytes put back,
    ``fast_ms`` the known addresses took and ``ms`` the whole restore with its scan; ``continued``: the
    target sat in a group stop and got SIGCONT; ``error``: why it could not (the target is gone too)."""

    restored: int = 0
    fast_ms: float | None = None
    ms: float = 0.0
    continued: bool = False
    error: str | None = None


@dataclass(frozen=True, **SLOTS)
class TextMismatch:
    """A byte of the target's code that differs from the file on disk."""

    address: int
    path: str
    memory: int
    disk: int


def _mapping_of(mappings: list[Mapping], address: int) -> Mapping | None:
    return next((m for m in mappings if m.start <= address < m.end), None)


def text_mismatches(pid: int, only: set[str] | None = None) -> list[TextMismatch]:
    """Bytes of ``pid``'s code that differ from the files on disk.

    Parameters
    ----------
    only : set of str, optional
        Limit the comparison to mappings of these files.
    """
    found = []
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as mem:
        for m in executable_mappings(pid):
            if only is not None and m.path not in only:
                continue
            try:
                with open(m.path, "rb") as fh:
                    fh.seek(m.offset)
                    disk = fh.read(m.end - m.start)
                mem.seek(m.start)
                live = mem.read(len(disk))
            except OSError:
                continue
            if live == disk:
                continue
            for i, (a, b) in enumerate(zip(live, disk)):
                if a != b:
                    found.append(TextMismatch(m.start + i, m.path, a, b))
    return found


class Originals:
    """The disk bytes under each breakpoint address, read before they are needed.

    The guard fills this while gdb is alive, so that when gdb dies restoring is
    one ``pwrite`` per address through a ``/proc/PID/mem`` descriptor opened in
    advance: no file to open, no map to parse, in the window where every probe
    hit would kill the target.
    """

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.mem = os.open(f"/proc/{pid}/mem", os.O_RDWR)
        self.bytes: dict[int, int] = {}
        self.files: set[str] = set()

    def learn(self, addresses) -> None:
        """Read the original byte of each new address from its ELF file on disk."""
        new = [a for a in addresses if a not in self.bytes]
        if not new:
            return
        mappings = executable_mappings(self.pid)
        for address in new:
            m = _mapping_of(mappings, address)
            if m is None:
                continue
            with open(m.path, "rb") as fh:
                fh.seek(m.offset + address - m.start)
                original = fh.read(1)
            if original and original[0] != INT3:
                self.bytes[address] = original[0]
                self.files.add(m.path)

    def restore(self) -> list[int]:
        """Put the original byte back wherever an ``int3`` sits at a known address."""
        fixed = []
        for address, original in self.bytes.items():
            if os.pread(self.mem, 1, address) == b"\xcc":
                os.pwrite(self.mem, bytes([original]), address)
                fixed.append(address)
        return fixed


def restore(pid: int, addresses: list[int]) -> list[TextMismatch]:
    """Write the disk bytes back wherever an ``int3`` sits at ``addresses``, then anywhere
    else in the code (their files first). Returns what was restored."""
    originals = Originals(pid)
    try:
        originals.learn(addresses)
        restored = [TextMismatch(a, "", INT3, originals.bytes[a]) for a in originals.restore()]
    finally:
        os.close(originals.mem)
    return restored + _scan(pid, originals.files)


def _scan(pid: int, first: set[str]) -> list[TextMismatch]:
    """Restore every ``int3`` in ``pid``'s code that the disk file does not have.

    Temporary breakpoints (at a return address) and gdb's own (the dynamic
    loader's shared-library event breakpoint) sit outside the known addresses.
    The files in ``first`` (the probed library, where return sites usually are)
    are compared before the rest.
    """
    restored = []
    for only in (first, None):
        for mm in text_mismatches(pid, only=only):
            if mm.memory == INT3 and mm.disk != INT3:
                with open(f"/proc/{pid}/mem", "r+b", buffering=0) as mem:
                    mem.seek(mm.address)
                    mem.write(bytes([mm.disk]))
                restored.append(mm)
    return restored


def _continue_if_stopped(pid: int) -> bool:
    """Send SIGCONT when the target sits in a group stop (a SIGSTOP of gdb's left pending)."""
    if process_state(pid) != "T":
        return False
    os.kill(pid, signal.SIGCONT)
    return True


def start_guard(pid: int, gdb_pid: int | None, locations: tuple[str, ...],
                spool_dir: str | None = None) -> subprocess.Popen | None:
    """Start a guard for ``pid`` watching ``gdb_pid``; returns once it watches (None if it cannot run).

    The caller resumes the target only after this returns: no moment without a guard.
    ``spool_dir`` is removed by the guard once gdb has ended, however the workbench ended.
    """
    from tdescope.app.system.child_env import PYTHON, child_env

    if gdb_pid is None or not locations:
        return None
    try:
        guard = subprocess.Popen(
            [sys.executable, "-m", "tdescope.app.gdb.guard", str(pid), str(gdb_pid), *([spool_dir] if spool_dir else [])],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            start_new_session=True,  # it must outlive a crash of the workbench
            env=child_env(PYTHON),
        )
        guard.stdin.write((json.dumps({"armed": [int(a, 16) for a in locations]}) + "\n").encode())
        guard.stdin.flush()
        if b"ready" not in guard.stdout.readline():
            raise OSError("guard did not start")
    except OSError:
        return None
    return guard


def update_guard(guard: subprocess.Popen | None, addresses) -> None:
    """Tell the guard every address that carries a breakpoint now (probe and return sites)."""
    if guard is None:
        return
    try:
        guard.stdin.write((json.dumps({"armed": sorted(int(a) for a in addresses)}) + "\n").encode())
        guard.stdin.flush()
    except OSError:
        pass  # the guard is gone; gdb's own detach still runs


def stop_guard(guard: subprocess.Popen | None) -> GuardReport | None:
    """Tell the guard the window disarmed cleanly, wait for it to exit, and return
    what it did if it had to act."""
    if guard is None:
        return None
    try:
        guard.stdin.write(b'{"disarmed": true, "bye": true}\n')
        guard.stdin.close()
    except OSError:
        pass
    try:
        guard.wait(timeout=5)
    except subprocess.TimeoutExpired:
        guard.kill()
        return None
    report = None
    for line in guard.stdout.read().splitlines():
        try:
            said = json.loads(line)
        except ValueError:
            continue
        if "restored" in said or "error" in said:
            fast = said.get("fast_ms")
            report = GuardReport(restored=int(said.get("restored") or 0), fast_ms=None if fast is None else float(fast),
                                 ms=float(said.get("ms") or 0.0), continued=bool(said.get("continued")),
                                 error=None if said.get("error") is None else str(said["error"]))
    guard.stdout.close()
    return report


def _say(obj: dict) -> None:
    try:
        sys.stdout.write(json.dumps(obj) + "\n")
        sys.stdout.flush()
    except OSError:
        pass  # the workbench is gone; the guard's job does not depend on it


def main(argv: list[str] | None = None) -> int:
    """Watch ``GDB_PID``; restore ``TARGET_PID``'s code if gdb dies while armed."""
    argv = sys.argv[1:] if argv is None else argv
    target, gdb = int(argv[0]), int(argv[1])
    spool_dir = argv[2] if len(argv) > 2 else None
    code = 1
    try:
        code = _watch(target, gdb)
    finally:
        # gdb is gone without a clean goodbye (the workbench died): nobody will read or remove the spool
        if code != _BYE and spool_dir and os.path.basename(spool_dir).startswith("tdescope-probe-"):
            shutil.rmtree(spool_dir, ignore_errors=True)
    return 0 if code == _BYE else code


#: What :func:`_watch` returns on a clean goodbye: the workbench reads and removes its spool itself.
_BYE = -1


def _watch(target: int, gdb: int) -> int:
    first = json.loads(sys.stdin.buffer.readline() or b"{}")
    armed: list[int] = [int(a) for a in first.get("armed", [])]
    try:
        originals = Originals(target)
        originals.learn(armed)
    except OSError as exc:
        _say({"error": str(exc)})
        return 1
    try:
        gdb_fd = os.pidfd_open(gdb)
    except ProcessLookupError:  # gdb died before we started watching: act now
        if armed:
            _say({"restored": len(restore(target, armed)), "ms": 0})
        return 0
    _say({"ready": True})
    # learn the breakpoint nobody told us about, gdb's own shared-library event breakpoint,
    # by comparing the dynamic loader's code with its file (~1 ms: the guard is blind meanwhile)
    try:
        loader = {m.path for m in executable_mappings(target) if "/ld-" in m.path}
        originals.learn(m.address for m in text_mismatches(target, only=loader) if m.memory == INT3)
    except OSError:
        pass
    stdin_open = True
    buf = b""
    while True:
        watch = [gdb_fd] + ([sys.stdin.fileno()] if stdin_open else [])
        ready, _, _ = select.select(watch, [], [])
        if gdb_fd in ready:
            if armed:
                t0 = time.perf_counter()
                try:
                    fixed = originals.restore()  # the known addresses first: one pwrite each
                    fast_ms = (time.perf_counter() - t0) * 1000
                    continued = _continue_if_stopped(target)
                    fixed += [m.address for m in _scan(target, originals.files)]
                except OSError as exc:  # the target is gone too
                    _say({"error": str(exc)})
                    return 1
                _say({"restored": len(fixed), "fast_ms": round(fast_ms, 3),
                      "ms": round((time.perf_counter() - t0) * 1000, 3), "continued": continued})
            return 0
        chunk = os.read(sys.stdin.fileno(), 65536)
        if not chunk:
            stdin_open = False  # the workbench died: keep watching gdb, which now detaches
            continue
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if "armed" in msg:
                armed = [int(a) for a in msg["armed"]]
                try:
                    originals.learn(armed)
                except OSError:
                    pass  # the scan still finds it
            if msg.get("disarmed"):
                armed = []
                if msg.get("bye"):
                    return _BYE


if __name__ == "__main__":
    raise SystemExit(main())
