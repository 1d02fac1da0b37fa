"""One capture per message for ciphers that decrypt a message in chunks.

pgcrypto's ``pgp_sym_decrypt`` runs ``pgp_cfb_decrypt`` once for the 18-byte
prefix, once per packet-header byte, then for the data: five captures of 18, 1,
1, 1 and 1 bytes show no plaintext at all. The recipe reads the cipher's block
counter at entry (:attr:`~tdescope.app.events.ContextKind.CIPHER_BLOCK`), which is
0 only on a message's first call; :class:`MessageJoin` joins the calls from one 0
to the next into one capture: the whole ciphertext before, the whole plaintext
after, the stopped time summed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from tdescope.app.events import ContextKind, PageCapture

__all__ = ["CHUNKS_PER_MESSAGE", "MessageJoin", "joins"]

#: Probe-side captures allowed per message asked for: a short pgcrypto message takes 6 to 8 calls
#: (prefix, packet headers, data, MDC); a long one more, and the window stops at the messages' count.
CHUNKS_PER_MESSAGE = 64


def joins(context_kind: str) -> bool:
    """True when a recipe's captures are chunks to join (its context is a cipher's block counter)."""
    return context_kind == ContextKind.CIPHER_BLOCK.value


class MessageJoin:
    """Joins chunk captures into message captures and hands each finished one to ``deliver``, numbered
    from ``first_seq``, ``limit`` messages at most.

    A capture whose context is 0 opens a message (and closes the one before); the others
    append to the open one. A chunk before any opening (the probe armed mid-message) is
    dropped and counted in :attr:`partial`. :meth:`flush` closes the open message when no
    more chunks can come.
    """

    def __init__(self, deliver: Callable[[PageCapture], None], first_seq: int = 1, limit: int = 2 ** 62) -> None:
        self._deliver = deliver
        self._first_seq = first_seq
        self._limit = limit
        self._open: list[PageCapture] = []
        #: Messages handed over.
        self.messages = 0
        #: Chunks dropped: seen before their message's first call, or past the last message kept.
        self.partial = 0

    def add(self, capture: PageCapture) -> None:
        """One chunk, in call order."""
        if self.messages >= self._limit:
            self.partial += 1
        elif capture.context == 0:
            self._close()
            self._open = [capture]
        elif self._open:
            self._open.append(capture)
        else:
            self.partial += 1

    def flush(self, keep: bool = True) -> None:
        """Close the open message: hand it over, or with ``keep=False`` count its chunks as dropped."""
        if keep:
            self._close()
        else:
            self.partial += len(self._open)
            self._open = []

    @property
    def full(self) -> bool:
        """True once ``limit`` messages were handed over."""
        return self.messages >= self._limit

    def _close(self) -> None:
        parts, self._open = self._open, []
        if not parts:
            return
        seq = self._first_seq + self.messages
        self.messages += 1
        self._deliver(dataclasses.replace(
            parts[0], seq=seq, before=b"".join(p.before for p in parts), after=b"".join(p.after for p in parts),
            stop_us=sum(p.stop_us for p in parts)))
