"""Pure parser of ``perf script`` text: text in, typed samples out, no I/O.

Two layouts are understood, both as perf 6.x prints them:

* with callchains (``perf record -g``)::

      hot  7901/7901    398.961059:   10101010 cpu-clock:
      \\t            116a hot_loop+0x21 (/tmp/hot)
      \\t           2724a __libc_start_call_main+0x7a (/usr/lib/x86_64-linux-gnu/libc.so.6)
      <blank line>

* without callchains, one line per sample::

                   hot  8284   471.639997:   10101010 cpu-clock:      5639279ee16a hot_loop+0x21 (/tmp/hot)

The address perf prints is *not* the same kind in both: a callchain frame of a
user-space DSO is printed relative to its DSO (``ip - map_start + map_pgoff``,
which is the ELF virtual address for binaries whose executable segment has
``p_vaddr == p_offset``, i.e. everything GNU ld links), while the single-line
layout prints the runtime IP. :attr:`Sample.callchain` tells which one a sample
holds; symbol offsets (``+0x21``) are the same in both, which is why the
disassembly heat prefers them.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from tdescope.app.slots import SLOTS

__all__ = ["Frame", "Sample", "iter_perf_script", "parse_perf_script", "fold", "frame_label"]

# The header is parsed from the left for comm (which may hold spaces) up to
# "pid[/tid] [cpu] time:", then "period event:" and, without callchains, the
# frame itself on the same line.
_HEADER = re.compile(
    r"^\s*(?P<comm>.*?)\s+(?P<pid>-?\d+)(?:/(?P<tid>-?\d+))?\s+"
    r"(?:\[(?P<cpu>\d+)\]\s+)?(?P<time>\d+\.\d+):\s+"
    r"(?:(?P<period>\d+)\s+)?(?P<event>[^\s]+?):(?:\s+(?P<rest>.*?))?\s*$"
)
_ADDR_SYM = re.compile(r"^\s*(?P<addr>[0-9a-fA-F]+)\s+(?P<sym>.*)$")
_OFFSET = re.compile(r"^(?P<name>.*)\+0x(?P<off>[0-9a-fA-F]+)$")


@dataclass(frozen=True, **SLOTS)
class Frame:
    """One stack frame as perf printed it.

    Attributes
    ----------
    addr : int
        The address perf printed (see the module docstring for which kind).
    symbol : str
        Symbol without its ``+0x..`` offset; ``"[unknown]"`` when perf had none.
    offset : int or None
        Offset of ``addr`` inside ``symbol``; None when perf printed none.
    dso : str
        The DSO path, ``[kernel.kallsyms]``, ``[vdso]`` or ``[unknown]``; a
        deleted file keeps perf's ``" (deleted)"`` suffix.
    """

    addr: int
    symbol: str
    offset: int | None
    dso: str


@dataclass(frozen=True, **SLOTS)
class Sample:
    """One perf sample: who, when, and its stack, leaf first.

    ``callchain`` is True when the text came from a ``-g`` recording, in which
    case user-space frame addresses are DSO-relative; otherwise :attr:`ip` is
    the runtime instruction pointer. ``ts`` is perf's clock (seconds since
    boot), not epoch seconds.
    """

    comm: str
    pid: int
    tid: int
    ts: float
    period: int
    event: str
    frames: tuple[Frame, ...]
    callchain: bool = True
    cpu: int | None = None

    @property
    def leaf(self) -> Frame | None:
        """The innermost frame, where the CPU was."""
        return self.frames[0] if self.frames else None

    @property
    def ip(self) -> int | None:
        """Address of the leaf frame as perf printed it."""
        return self.frames[0].addr if self.frames else None


def _split_dso(text: str) -> tuple[str, str]:
    """Split ``"sym+0x1 (dso)"`` at the last balanced parenthesis group.

    Balanced matching keeps both ``(/tmp/x (deleted))`` and C++ symbols such
    as ``f(int) const`` intact, which a regex on the last ``(`` would cut.
    """
    text = text.rstrip()
    if not text.endswith(")"):
        return text, ""
    depth = 0
    for i in range(len(text) - 1, -1, -1):
        ch = text[i]
        if ch == ")":
            depth += 1
        elif ch == "(":
            depth -= 1
            if depth == 0:
                return text[:i].rstrip(), text[i + 1 : -1]
    return text, ""


#: Distinct frame lines remembered by :func:`_parse_frame`. A target's samples repeat the same few hundred
#: (address, symbol, DSO) lines: on the lab 446 distinct among 6612 (93 % repeats), and parsing a sample of
#: ~18 frames fell from ~120 µs to ~15 µs with the cache (a busy target at 499 Hz: ~6 % of a core of the
#: workbench's own process to under 1 %). Bounded: at most this many frames of ~300 bytes.
FRAME_CACHE = 16384


@functools.lru_cache(maxsize=FRAME_CACHE)
def _parse_frame(text: str) -> Frame | None:
    m = _ADDR_SYM.match(text)
    if m is None:
        return None
    symtext, dso = _split_dso(m.group("sym"))
    offset = None
    om = _OFFSET.match(symtext)
    if om is not None:
        symtext, offset = om.group("name"), int(om.group("off"), 16)
    return Frame(int(m.group("addr"), 16), symtext or "[unknown]", offset, dso or "[unknown]")


def iter_perf_script(lines: Iterable[str]) -> Iterator[Sample]:
    """Parse ``perf script`` output as it comes, one :class:`Sample` as soon as it is complete.

    A callchain sample is complete at the blank line perf prints after it (or the next header, or the
    end of the text); a single-line sample at once. This is what reads a long-lived ``perf script``
    on a pipe (:mod:`tdescope.app.hotspots.perf_stream`).

    Parameters
    ----------
    lines : iterable of str
        Lines, with or without newlines.

    Yields
    ------
    Sample
        In the order perf printed them. Lines that are neither a header nor a frame (perf warnings,
        ``(inlined)`` notes) are skipped.
    """
    head: re.Match | None = None
    frames: list[Frame] = []

    def sample() -> Sample:
        assert head is not None
        tid, pid, cpu = head.group("tid"), int(head.group("pid")), head.group("cpu")
        return Sample(
            comm=head.group("comm"),
            pid=pid,
            tid=int(tid) if tid is not None else pid,
            ts=float(head.group("time")),
            period=int(head.group("period") or 1),
            event=head.group("event"),
            frames=tuple(frames),
            callchain=not head.group("rest"),
            cpu=int(cpu) if cpu is not None else None,
        )

    for raw in lines:
        line = raw.rstrip("\r\n")
        if not line.strip():
            if head is not None:
                yield sample()
            head, frames = None, []
            continue
        # Frame lines are indented with a tab; headers of the single-line
        # layout are indented with spaces (comm is right-aligned).
        if line.startswith("\t"):
            if head is not None:
                frame = _parse_frame(line)
                if frame is not None:
                    frames.append(frame)
            continue
        m = _HEADER.match(line)
        if m is None:
            continue
        if head is not None:
            yield sample()
        head, frames = m, []
        rest = m.group("rest")
        if rest:
            frame = _parse_frame(rest)
            frames = [frame] if frame is not None else []
            yield sample()
            head, frames = None, []
    if head is not None:
        yield sample()


def parse_perf_script(text_or_lines: str | Iterable[str]) -> list[Sample]:
    """Parse the whole ``perf script`` output into samples (see :func:`iter_perf_script`).

    Parameters
    ----------
    text_or_lines : str or iterable of str
        The whole output, or its lines (with or without newlines).

    Returns
    -------
    list of Sample
        In the order perf printed them.
    """
    lines = text_or_lines.splitlines() if isinstance(text_or_lines, str) else text_or_lines
    return list(iter_perf_script(lines))


def frame_label(frame: Frame) -> str:
    """The name a frame gets in folded stacks.

    Unknown symbols become ``[basename-of-dso]`` (as stackcollapse-perf does)
    so that unsymbolized code still groups by library; ``;`` would break the
    folded format and is replaced.
    """
    if frame.symbol == "[unknown]" and frame.dso not in ("", "[unknown]"):
        return "[" + os.path.basename(frame.dso.replace(" (deleted)", "")) + "]"
    return frame.symbol.replace(";", ":")


def fold(samples: Iterable[Sample], include_comm: bool = False) -> dict[str, int]:
    """Fold samples into stacks, outermost first, ``;``-joined, with counts.

    Parameters
    ----------
    samples : iterable of Sample
    include_comm : bool
        Prefix each stack with the thread's comm, like stackcollapse-perf does
        by default. Off by default so that a comm never ranks as a function.

    Returns
    -------
    dict
        Folded stack -> number of samples (not periods: every window of one
        sampler has the same frequency, so counts compare directly).
    """
    out: Counter[str] = Counter()
    for s in samples:
        names = [frame_label(f) for f in reversed(s.frames)]
        if include_comm:
            names.insert(0, s.comm.replace(";", ":").replace(" ", "_"))
        if names:
            out[";".join(names)] += 1
    return dict(out)
