"""Byte statistics that tell ciphertext from structured pages, and before/after diffs.

Ciphertext is indistinguishable from uniform random bytes: close to 8 bits of
Shannon entropy per byte everywhere in the buffer. A database page in the clear
always has a low-entropy region somewhere (a page header and cell pointer array,
zeroed free space, text, small integers), so :func:`verdict` looks both at the
whole buffer and at its least random chunk.

numpy is used when importable (a 4 KB page then takes a few tens of µs); the
pure-Python fallback gives the same numbers, only slower.
"""

from __future__ import annotations

import functools
import math
from collections import Counter

from tdescope.app.events.base import Word

try:  # numpy is a project dependency, but app/ must still work without it
    import numpy as _np
except ImportError:  # pragma: no cover - exercised only without numpy
    _np = None

__all__ = [
    "CHUNK",
    "CHUNK_MIN_BITS",
    "MIN_JUDGED",
    "Randomness",
    "WHOLE_MIN_BITS",
    "chunk_entropy",
    "diff_mask",
    "diff_ranges",
    "shannon_entropy",
    "uniform_entropy",
    "verdict",
]

#: Chunk length used by :func:`verdict` to find the least random part of a buffer.
CHUNK = 256

#: Whole-buffer entropy (bits/byte) above which a buffer may be ciphertext. Uniform
#: random 4 KB measures ~7.95 and 1 KB ~7.81. Real SQLite pages of text, indexes or
#: mostly free space measure 0-5; a leaf of random doubles and 62-bit integers ~7.4,
#: caught by its least random chunk (~6.2; tests/test_entropy.py). Pages holding random BLOBs (already-compressed or
#: encrypted values) reach ~7.95 and read "looks encrypted": entropy cannot tell them
#: from ciphertext, which is why the page decoder checks structure first.
WHOLE_MIN_BITS = 7.5

#: Lowest entropy allowed in any full 256-byte chunk of ciphertext. The sample
#: entropy of 256 uniform random bytes is biased low (mean ~7.17, sd ~0.05, min
#: ~6.98 over 20k trials), so 6.5 leaves margin; a b-tree header plus its cell
#: pointer array, or any zeroed or textual region, drops far below it.
CHUNK_MIN_BITS = 6.5

_MIN_JUDGED = 32  # bytes; shorter buffers are held to WHOLE_MIN_BITS, which they cannot reach
#: Buffers shorter than this are "too short to judge" (:func:`verdict`); reports prefer longer ones.
MIN_JUDGED = _MIN_JUDGED


def _entropy_from_counts(counts, n: int) -> float:
    # H = log2(n) - sum(c*log2(c))/n avoids one division per symbol.
    s = sum(c * math.log2(c) for c in counts if c)
    return max(math.log2(n) - s / n, 0.0)


@functools.lru_cache(maxsize=8)
def _clogc(limit: int):
    # Table of c*log2(c) for c in 0..limit, so chunk entropy is one gather and one sum.
    c = _np.arange(limit + 1, dtype=_np.float64)
    c[0] = 1.0
    t = c * _np.log2(c)
    return t


def shannon_entropy(data: bytes) -> float:
    """Shannon entropy of ``data`` in bits per byte.

    Parameters
    ----------
    data : bytes
        Any buffer (bytes, bytearray or memoryview).

    Returns
    -------
    float
        Between 0.0 (one repeated byte, or empty input) and 8.0.
    """
    n = len(data)
    if n == 0:
        return 0.0
    if _np is not None:
        counts = _np.bincount(_np.frombuffer(data, dtype=_np.uint8), minlength=256)
        nz = counts[counts > 0].astype(_np.float64)
        return max(float(math.log2(n) - (nz * _np.log2(nz)).sum() / n), 0.0)
    return _entropy_from_counts(Counter(bytes(data)).values(), n)


def chunk_entropy(data: bytes, chunk: int = CHUNK) -> list[float]:
    """Entropy of each consecutive ``chunk``-byte slice of ``data``.

    Parameters
    ----------
    data : bytes
        The buffer.
    chunk : int, optional
        Slice length in bytes (default 256). Must be positive.

    Returns
    -------
    list of float
        One value per slice in order; a shorter last slice is included.
        Empty input gives an empty list.

    Notes
    -----
    Entropy measured on few samples is biased low: random 256-byte slices give
    ~7.2, not 8, and a short last slice lower still. Compare slices of equal
    length only.
    """
    if chunk <= 0:
        raise ValueError("chunk must be positive")
    n = len(data)
    if n == 0:
        return []
    full = n // chunk
    out: list[float] = []
    if _np is not None and full:
        arr = _np.frombuffer(data, dtype=_np.uint8, count=full * chunk).reshape(full, chunk)
        # One bincount for all chunks: offset each row's byte values by 256*row.
        keys = arr + (_np.arange(full, dtype=_np.intp) * 256)[:, None]
        counts = _np.bincount(keys.ravel(), minlength=full * 256).reshape(full, 256)
        h = math.log2(chunk) - _clogc(chunk)[counts].sum(axis=1) / chunk
        out = [max(float(v), 0.0) for v in h]
    else:
        out = [shannon_entropy(data[i * chunk:(i + 1) * chunk]) for i in range(full)]
    if n % chunk:
        out.append(shannon_entropy(data[full * chunk:]))
    return out


class Randomness(Word):
    """What :func:`verdict` says of a buffer (the report's and the page view's words)."""

    EMPTY = "empty"
    TOO_SHORT = "too short to judge"
    STRUCTURED = "looks structured"
    ENCRYPTED = "looks encrypted"


def verdict(data: bytes) -> Randomness:
    """Classify a buffer as ciphertext-like or structured.

    Parameters
    ----------
    data : bytes
        Typically one database page.

    Returns
    -------
    Randomness
        ``"empty"`` when every byte is zero (or there are none), ``"too short to
        judge"`` under 32 bytes, ``"looks encrypted"`` when the whole buffer has more than :data:`WHOLE_MIN_BITS`
        bits/byte and no full :data:`CHUNK`-byte slice falls below
        :data:`CHUNK_MIN_BITS`, else ``"looks structured"``.

    Notes
    -----
    Only full-length chunks are tested against :data:`CHUNK_MIN_BITS`, because a
    short trailing slice is biased low even for random bytes; buffers under
    :data:`CHUNK` bytes are judged on the whole-buffer figure alone. Short
    buffers measure less than 8 bits/byte even when random (256 random bytes
    ~7.17, 512 ~7.59, 1 KB ~7.81), so the whole-buffer threshold is
    ``min(WHOLE_MIN_BITS, E[H] - 0.3)`` with ``E[H]`` the exact expected sample
    entropy of ``n`` uniform random bytes (:func:`uniform_entropy`): 6.88 at
    256 bytes, 7.28 at 496, 7.5 from 1008 on. Under 32 bytes (an 18-byte
    pgcrypto chunk at its maximum 4.17 bits/byte) nothing can be told.
    """
    n = len(data)
    if n == 0 or bytes(data).count(0) == n:
        return Randomness.EMPTY
    if n < _MIN_JUDGED:  # even random data has too few distinct values to tell: say so
        return Randomness.TOO_SHORT
    whole_min = min(WHOLE_MIN_BITS, uniform_entropy(n) - 0.3)
    if shannon_entropy(data) <= whole_min:
        return Randomness.STRUCTURED
    full = (n // CHUNK) * CHUNK
    if full and min(chunk_entropy(data[:full], CHUNK)) < CHUNK_MIN_BITS:
        return Randomness.STRUCTURED
    return Randomness.ENCRYPTED


@functools.lru_cache(maxsize=64)
def uniform_entropy(n: int) -> float:
    """Expected Shannon entropy (bits/byte) of ``n`` uniform random bytes, exactly.

    Parameters
    ----------
    n : int
        Buffer length, positive.

    Returns
    -------
    float
        ``log2(n) - 256 E[c log2 c] / n`` with ``c ~ Binomial(n, 1/256)``, the
        count of one byte value. The Miller-Madow estimate of the shortfall
        (``(k-1)/(2 n ln 2)``) is 0.37 bits short at 256 bytes; this is not.
        Above 2048 bytes the shortfall is under 0.1 bit and is not computed.
    """
    if n > 2048:
        return 8.0 - 255.0 / (2.0 * n * math.log(2.0))  # Miller-Madow: exact enough once k ~ 256
    p, total = 1.0 / 256.0, 0.0
    mean = n * p
    for c in range(2, n + 1):
        log_pmf = (math.lgamma(n + 1) - math.lgamma(c + 1) - math.lgamma(n - c + 1)
                   + c * math.log(p) + (n - c) * math.log1p(-p))
        if log_pmf < -60.0:
            if c > mean:
                break
            continue
        total += math.exp(log_pmf) * c * math.log2(c)
    return math.log2(n) - 256.0 * total / n


def diff_mask(a: bytes, b: bytes) -> list[bool]:
    """Which offsets differ between two buffers.

    Parameters
    ----------
    a, b : bytes
        Typically the same page before and after decryption.

    Returns
    -------
    list of bool
        ``max(len(a), len(b))`` entries; True where the bytes differ. Offsets
        present in only one buffer count as different.
    """
    n, m = len(a), len(b)
    common = min(n, m)
    if _np is not None and common:
        x = _np.frombuffer(a, dtype=_np.uint8, count=common)
        y = _np.frombuffer(b, dtype=_np.uint8, count=common)
        mask = (x != y).tolist()
    else:
        mask = [p != q for p, q in zip(bytes(a[:common]), bytes(b[:common]))]
    mask.extend([True] * (max(n, m) - common))
    return mask


def diff_ranges(a: bytes, b: bytes) -> list[tuple[int, int]]:
    """The differing offsets of :func:`diff_mask` as ``(start, end)`` runs, end exclusive.

    Parameters
    ----------
    a, b : bytes
        The two buffers.

    Returns
    -------
    list of tuple of int
        Maximal runs of differing bytes in ascending order; empty when equal.
        Compact for highlighting: a ciphertext/plaintext pair is mostly one run.
    """
    n, m = len(a), len(b)
    common = min(n, m)
    runs: list[tuple[int, int]] = []
    if _np is not None and common:
        d = (_np.frombuffer(a, dtype=_np.uint8, count=common)
             != _np.frombuffer(b, dtype=_np.uint8, count=common)).astype(_np.int8)
        edges = _np.flatnonzero(_np.diff(_np.concatenate(([0], d, [0]))))
        runs = [(int(s), int(e)) for s, e in zip(edges[::2], edges[1::2])]
    else:
        start = None
        for i, (p, q) in enumerate(zip(bytes(a[:common]), bytes(b[:common]))):
            if p != q and start is None:
                start = i
            elif p == q and start is not None:
                runs.append((start, i))
                start = None
        if start is not None:
            runs.append((start, common))
    if max(n, m) > common:
        if runs and runs[-1][1] == common:
            runs[-1] = (runs[-1][0], max(n, m))
        else:
            runs.append((common, max(n, m)))
    return runs
