"""Decode SQLite / SQLCipher pages into fields with byte spans.

Follows the SQLite file format (https://www.sqlite.org/fileformat2.html): the
100-byte database header of page 1, b-tree page headers, cell pointer arrays,
cells and their records, freeblocks, and the reserved space at the end of each
page, which SQLCipher 4 fills with a 16-byte IV and a 64-byte HMAC-SHA512.

Page 1 as the cipher sees it
----------------------------
On disk, an SQLCipher page 1 starts with the 16-byte KDF salt where SQLite has
``"SQLite format 3\\0"``. ``sqlcipher_page_cipher`` is called for page 1 with
``in``/``out`` pointing 16 bytes into the page and ``page_sz`` reduced by 16, so a
capture of page 1 holds page offsets 16..page_size. When ``pgno == 1`` (or the
page number is unknown and the buffer starts with a plausible header tail) and
the length is a page size minus 16, :class:`SqlitePageDecoder` decodes it as
starting at page offset 16. Field spans are always offsets into the buffer it
was given, so a viewer highlights the bytes it shows; values that are page
offsets by definition (cell pointers, content area start, freeblock links) keep
their on-disk meaning. The missing 16 bytes are described in the value of the
``"database header"`` group.
"""

from __future__ import annotations

from tdescope.app.engines.api import DecodedPage
from tdescope.plugins.sqlcipher._page_walk import SQLCIPHER_RESERVE, PageWalk, is_page_size

__all__ = ["SQLCIPHER_RESERVE", "SqlitePageDecoder"]


class SqlitePageDecoder:
    """Decode SQLite and SQLCipher plaintext pages (and label ciphertext pages).

    Parameters
    ----------
    reserve : int or None, optional
        Reserved bytes at the end of each page. None means: the database header's
        value when ``data`` is page 1 with a readable header; otherwise
        :data:`SQLCIPHER_RESERVE` (80) when the page size is a power of two,
        falling back to 0 when the page itself shows there is no SQLCipher
        reserve: its cells reach into the last 80 bytes, or those bytes have less
        than 5 bits/byte of entropy (a random IV + HMAC measures ~6.0). The
        choice and its reason are stated in the ``"b-tree page header"`` and
        ``"reserved space"`` group values. Overflow and freelist pages of a plain
        database whose tail is high-entropy cannot be told apart: pass
        ``reserve=0`` when the database is known to be plain.
    page_size : int or None, optional
        Page size to assume when the buffer length is not a power of two (or one
        minus 16), e.g. a truncated capture.
    encoding : str, optional
        Python codec for TEXT values when the buffer carries no database header.

    Notes
    -----
    :meth:`decode` never raises on bad bytes; inconsistencies go to
    ``DecodedPage.problems``. Records hold rowid first then column values for
    table leaves, the key columns (rowid last) for index pages (interior index
    cells are real entries too). An ``INTEGER PRIMARY KEY`` column is stored as
    NULL in the record, and stays None here.
    """

    def __init__(self, reserve: int | None = None, page_size: int | None = None,
                 encoding: str = "utf-8") -> None:
        self.reserve = reserve
        self.page_size = page_size
        self.encoding = encoding

    def decode(self, data: bytes, pgno: int = -1, context=None) -> DecodedPage:
        """Decode one page (or page 1 minus its first 16 bytes); see the class notes.

        Parameters
        ----------
        data : bytes
            The page bytes as captured.
        pgno : int, optional
            Page number (1-based), -1 when unknown. Page 1 holds the database header.

        Returns
        -------
        DecodedPage
            Field spans are offsets into ``data``.
        """
        try:
            return PageWalk(self, bytes(data), pgno).run()
        except Exception as exc:  # the contract: bad bytes give problems, never an exception
            return DecodedPage("unknown", problems=(f"decoder error: {type(exc).__name__}: {exc}",))


    def summarize(self, data: bytes, pgno: int = -1) -> tuple[str, int]:
        """(page type, cell count) from the b-tree header alone: cheap enough per capture.

        Falls back to :meth:`decode` when the header does not make sense.
        """
        data = bytes(data)
        n = len(data)
        start = 0
        if pgno == 1:
            start = 84 if is_page_size(n + 16) else 100
        if n >= start + 8:
            kind = data[start]
            cells = int.from_bytes(data[start + 3 : start + 5], "big")
            header = 12 if kind in (2, 5) else 8
            if kind in _SUMMARY_TYPES and start + header + 2 * cells <= n:
                return _SUMMARY_TYPES[kind], cells
        page = self.decode(data, pgno)
        return page.page_type, page.cells


_SUMMARY_TYPES = {0x02: "index interior", 0x05: "table interior", 0x0A: "index leaf", 0x0D: "table leaf"}


