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
from tdescope.plugins.postgres.relations import RelationMap

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
    relations : RelationMap, optional
        The server's relations: a tuple whose capture carries its table's OID (``t_tableOid``) is
        decoded with that table's columns and named by the capture itself; ``columns`` serve the rest.
    """

    def __init__(self, columns: tuple[PgColumn, ...] | None = None, relation: str = "",
                 relations: RelationMap | None = None) -> None:
        self.columns = tuple(columns) if columns is not None else None
        self.relation = relation
        self.relations = relations if relations is not None else RelationMap()
        self._pages = PgPageDecoder(self.columns, self.relations)

    def catalog(self) -> dict:
        """The relation, its columns and the server's relations as JSON data (empty without any): what a
        recording keeps."""
        out = {"relations": self.relations.catalog()} if self.relations else {}
        if self.columns is not None:
            out.update(relation=self.relation,
                       columns=[[c.name, c.typname, c.typlen, c.typalign] for c in self.columns])
        return out

    @classmethod
    def from_catalog(cls, catalog: dict) -> "PgTupleDecoder":
        """Inverse of :meth:`catalog`; what it cannot read is left out (no columns: the header-only decoder)."""
        relations = RelationMap.from_catalog(catalog.get("relations"))
        try:
            columns = tuple(PgColumn(str(n), str(t), int(ln), str(a)) for n, t, ln, a in catalog["columns"])
        except (KeyError, TypeError, ValueError):
            return cls(relations=relations)
        return cls(columns, str(catalog.get("relation") or ""), relations)

    def decode(self, data: bytes, pgno: int = -1, context=None) -> DecodedPage:
        """Decode ``data`` (``context``: the capture's relation, when its probe read one); never raises on bad
        bytes, reports problems instead."""
        data = bytes(data)
        if len(data) >= 1024 and len(data) % 1024 == 0:
            return self._pages.decode(data, pgno, context)
        if len(data) < _TUPLE_HEADER or not _TUPLE_HEADER <= data[22] <= len(data):
            return DecodedPage("data buffer", (DecodedField("buffer", 0, len(data), f"{len(data)} bytes"),))
        found = self.relations.find(context)
        named = RelationMap.label(context, found)  # from the capture itself: its t_tableOid
        relation, columns = (found.name, found.columns) if found is not None and found.columns is not None \
            else (self.relation, self.columns)
        res = decode_tuple(data, 0, len(data), columns)
        where = f"block {pgno}" if pgno >= 0 else ""
        problems = tuple(res.problems)
        if not problems and columns is not None:
            bad = [c.name for c, v in zip(columns, res.values) if isinstance(v, str) and "\ufffd" in v]
            if bad:  # text that is not UTF-8: ciphertext that happened to parse (the server's encoding is UTF-8)
                res.problems.append(f"column {bad[0]} is not valid UTF-8 text")
                problems = tuple(res.problems)
        if columns is not None and problems:
            # the header is plaintext on both sides; attributes that do not decode are the ciphertext side
            problems = (f"tuple data does not decode as {relation or 'the table'}'s columns "
                        f"(ciphertext?): {problems[0]}",)
        shown = ", ".join(format_value(v) for v in res.values) if columns is not None and not res.problems \
            else f"{len(data)} bytes"
        # the relation: the capture's own (its t_tableOid) when the probe read it; else the one whose
        # columns the row fits (the evidence is then only that its attributes fit)
        fits = relation if columns is not None and not res.problems else ""
        where = ", ".join(w for w in (named or (f"decodes as {fits}" if fits else ""), where) if w)
        top = DecodedField(f"heap tuple{' (' + where + ')' if where else ''}", 0, len(data), shown,
                           tuple(res.fields))
        records = (tuple(res.values),) if columns is not None and not res.problems else ()
        return DecodedPage("heap tuple", (top,), cells=1, records=records, problems=problems)
