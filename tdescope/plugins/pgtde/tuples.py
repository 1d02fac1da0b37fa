"""A lone heap tuple, as pg_tde's decrypt gets and gives it: header then data, ``t_len`` bytes.

``pg_tde_crypt_tuple``'s buffers are not pages: each is one tuple (the
HeapTupleHeader, plaintext, then the attributes: ciphertext before, the row
after). :class:`PgTupleDecoder` decodes such a buffer with the table's column
definitions, and whole 8 KiB pages (``tde_decrypt_smgr_block``, ``mdread``)
as the PostgreSQL page decoder does.
"""

from __future__ import annotations

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.plugins.postgres._tuples import PgColumn, decode_tuple, format_value
from tdescope.plugins.postgres.pages import PgPageDecoder

__all__ = ["PgTupleDecoder"]

_TUPLE_HEADER = 23  # offsetof(HeapTupleHeaderData, t_bits)


class PgTupleDecoder:
    """Decodes a heap tuple buffer (or a page) with ``columns``, the relation's attributes in attnum order.

    Parameters
    ----------
    columns : tuple of PgColumn, optional
        None decodes the tuple header only.
    relation : str
        The relation the columns belong to, named in what the decoder shows.
    """

    def __init__(self, columns: tuple[PgColumn, ...] | None = None, relation: str = "") -> None:
        self.columns = tuple(columns) if columns is not None else None
        self.relation = relation
        self._pages = PgPageDecoder(self.columns)

    def catalog(self) -> dict:
        """The relation and its columns as JSON data (empty without columns): what a recording keeps."""
        if self.columns is None:
            return {}
        return {"relation": self.relation,
                "columns": [[c.name, c.typname, c.typlen, c.typalign] for c in self.columns]}

    @classmethod
    def from_catalog(cls, catalog: dict) -> "PgTupleDecoder":
        """Inverse of :meth:`catalog`; a catalog it cannot read gives the header-only decoder."""
        try:
            columns = tuple(PgColumn(str(n), str(t), int(ln), str(a)) for n, t, ln, a in catalog["columns"])
        except (KeyError, TypeError, ValueError):
            return cls()
        return cls(columns, str(catalog.get("relation") or ""))

    def decode(self, data: bytes, pgno: int = -1) -> DecodedPage:
        """Decode ``data``; never raises on bad bytes, reports problems instead."""
        data = bytes(data)
        if len(data) >= 1024 and len(data) % 1024 == 0:
            return self._pages.decode(data, pgno)
        if len(data) < _TUPLE_HEADER or not _TUPLE_HEADER <= data[22] <= len(data):
            return DecodedPage("data buffer", (DecodedField("buffer", 0, len(data), f"{len(data)} bytes"),))
        res = decode_tuple(data, 0, len(data), self.columns)
        # the block comes from the call; the relation does not (the columns are the lab table's: an assumption)
        where = f"block {pgno}" if pgno >= 0 else ""
        problems = tuple(res.problems)
        if not problems and self.columns is not None:
            bad = [c.name for c, v in zip(self.columns, res.values) if isinstance(v, str) and "\ufffd" in v]
            if bad:  # text that is not UTF-8: ciphertext that happened to parse (the server's encoding is UTF-8)
                res.problems.append(f"column {bad[0]} is not valid UTF-8 text")
                problems = tuple(res.problems)
        if self.columns is not None and problems:
            # the header is plaintext on both sides; attributes that do not decode are the ciphertext side
            problems = (f"tuple data does not decode as {self.relation or 'the table'}'s columns "
                        f"(ciphertext?): {problems[0]}",)
        shown = ", ".join(format_value(v) for v in res.values) if self.columns is not None and not res.problems \
            else f"{len(data)} bytes"
        # the relation the columns came from, named when the tuple decodes as its row (the capture itself
        # carries no table OID: the evidence is that its attributes fit that relation's columns)
        fits = self.relation if self.columns is not None and not res.problems else ""
        where = ", ".join(w for w in (f"decodes as {fits}" if fits else "", where) if w)
        top = DecodedField(f"heap tuple{' (' + where + ')' if where else ''}", 0, len(data), shown,
                           tuple(res.fields))
        records = (tuple(res.values),) if self.columns is not None and not res.problems else ()
        return DecodedPage("heap tuple", (top,), cells=1, records=records, problems=problems)
