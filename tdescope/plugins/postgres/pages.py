"""PostgreSQL pages: PageHeaderData, line pointers and heap tuples (src/include/storage/bufpage.h).

A captured page decodes into the tree the Page view shows, with byte spans: the
24-byte page header, the line pointer array, then each tuple with its header
(xmin, xmax, ctid, infomask bits, hoff, null bitmap) and, when the table's
columns are known, its attributes — so a pgcrypto ciphertext shows as a
``bytea`` attribute sitting inside the tuple.
"""

from __future__ import annotations

import struct

from tdescope.app.engines.api import DecodedField, DecodedPage
from tdescope.plugins.postgres import _btree
from tdescope.plugins.postgres._tuples import PgColumn, decode_tuple, format_value
from tdescope.plugins.postgres.relations import RelationMap

__all__ = ["PgPageDecoder", "PgColumn", "PAGE_SIZE", "LP_FLAGS"]

PAGE_SIZE = 8192
_HEADER = struct.Struct("<IIHHHHHHI")
HEADER_SIZE = 24
LP_FLAGS = {0: "LP_UNUSED", 1: "LP_NORMAL", 2: "LP_REDIRECT", 3: "LP_DEAD"}
_PD_FLAGS = ((0x1, "PD_HAS_FREE_LINES"), (0x2, "PD_PAGE_FULL"), (0x4, "PD_ALL_VISIBLE"))


class PgPageDecoder:
    """Decodes one PostgreSQL page; heap tuples' attributes when ``columns`` are given.

    Parameters
    ----------
    columns : tuple of PgColumn, optional
        The relation's attributes in attnum order (the session fetches them
        from pg_attribute with :meth:`PostgresSession.columns`).
    relations : RelationMap, optional
        The server's relations: a capture whose context names one (``mdread``'s
        relfilenode) is said to be of it and decoded with its columns.
    """

    def __init__(self, columns: tuple[PgColumn, ...] | None = None, relations: RelationMap | None = None) -> None:
        self.columns = tuple(columns) if columns is not None else None
        self.relations = relations if relations is not None else RelationMap()

    def catalog(self) -> dict:
        """The relations as JSON data (empty without any): what a recording keeps."""
        return {"relations": self.relations.catalog()} if self.relations else {}

    @classmethod
    def from_catalog(cls, catalog: dict) -> "PgPageDecoder":
        """Inverse of :meth:`catalog`."""
        return cls(relations=RelationMap.from_catalog(catalog.get("relations")))

    def decode(self, data: bytes, pgno: int = -1, context=None) -> DecodedPage:
        """Decode ``data`` (``context``: the capture's relation, when its probe read one); never raises on bad
        bytes, reports problems instead."""
        relation = self.relations.find(context)
        columns = relation.columns if relation is not None and relation.columns is not None else self.columns
        where = ", ".join(w for w in (f"block {pgno}" if pgno >= 0 else "", RelationMap.label(context, relation)) if w)
        return self._decode(bytes(data), where, columns)

    def _decode(self, data: bytes, where: str, columns: tuple[PgColumn, ...] | None) -> DecodedPage:
        if len(data) < HEADER_SIZE or len(data) % 1024:
            # a decrypt probe's buffer (a pgcrypto value), not a page: nothing to complain about
            return DecodedPage("data buffer", (DecodedField("buffer", 0, len(data), f"{len(data)} bytes"),))
        if not any(data):
            return DecodedPage("new (all zeros)", (DecodedField("zero page", 0, len(data), "never written"),))
        lsn_hi, lsn_lo, checksum, flags, lower, upper, special, size_version, prune = _HEADER.unpack_from(data)
        size, version = size_version & 0xFF00, size_version & 0x00FF
        problems: list[str] = []
        header = DecodedField("PageHeaderData", 0, HEADER_SIZE, where, (
            DecodedField("pd_lsn", 0, 8, f"{lsn_hi:X}/{lsn_lo:X}"),
            DecodedField("pd_checksum", 8, 10, f"0x{checksum:04x}"),
            DecodedField("pd_flags", 10, 12, f"0x{flags:04x} " + "|".join(n for b, n in _PD_FLAGS if flags & b)),
            DecodedField("pd_lower", 12, 14, str(lower)),
            DecodedField("pd_upper", 14, 16, str(upper)),
            DecodedField("pd_special", 16, 18, str(special)),
            DecodedField("pd_pagesize_version", 18, 20, f"size {size}, layout version {version}"),
            DecodedField("pd_prune_xid", 20, 24, str(prune)),
        ))
        if size != len(data) or version != 4 or not HEADER_SIZE <= lower <= upper <= special <= len(data):
            problems.append(
                f"not a valid page header (size {size}, version {version}, lower {lower}, upper {upper}, "
                f"special {special}, {len(data)} bytes)"
            )
            return DecodedPage("unknown", (header,), problems=tuple(problems))
        special_size = len(data) - special
        btree = _btree.is_btree(data, special)
        if btree:
            page_type = _btree.btree_page_type(_btree.BtreeSpecial(data, special))
        else:
            page_type = "heap" if special_size == 0 else f"index (special space {special_size} bytes)"
        fields = [header]
        if page_type == "b-tree meta":  # BTMetaPageData where line pointers would be: pd_lower is its end
            fields.append(_btree.decode_meta(data))
            if upper > lower:
                fields.append(DecodedField("free space", lower, upper, f"{upper - lower} bytes"))
            fields.append(_btree.decode_special(data, special))
            return DecodedPage(page_type, tuple(fields), problems=tuple(problems))
        n_lp = (lower - HEADER_SIZE) // 4
        pointers = []
        lp_fields = []
        for i in range(n_lp):
            off = HEADER_SIZE + 4 * i
            word = struct.unpack_from("<I", data, off)[0]
            lp_off, lp_flags, lp_len = word & 0x7FFF, (word >> 15) & 0x3, word >> 17
            pointers.append((i + 1, lp_off, lp_flags, lp_len))
            lp_fields.append(DecodedField(f"lp {i + 1}", off, off + 4,
                                          f"off {lp_off}, len {lp_len}, {LP_FLAGS[lp_flags]}"))
        if lp_fields:
            fields.append(DecodedField("line pointers", HEADER_SIZE, lower, f"{n_lp}", tuple(lp_fields)))
        if upper > lower:
            fields.append(DecodedField("free space", lower, upper, f"{upper - lower} bytes"))
        records: list[tuple] = []
        tuples: list[DecodedField] = []
        for lp, off, lp_flags, lp_len in sorted(pointers, key=lambda p: p[1]):
            if lp_flags != 1 or lp_len == 0:
                continue
            if off < upper or off + lp_len > special:
                problems.append(f"lp {lp}: tuple at {off}+{lp_len} lies outside the tuple area")
                continue
            if btree:
                tuples.append(_btree.decode_index_tuple(data, lp, off, lp_len, problems))
                continue
            if special_size:
                tuples.append(DecodedField(f"item {lp}", off, off + lp_len, f"{lp_len} bytes"))
                continue
            res = decode_tuple(data, off, lp_len, columns)
            problems.extend(f"lp {lp}: {p}" for p in res.problems)
            if columns is not None:
                records.append(tuple(res.values))
            shown = ", ".join(format_value(v) for v in res.values) if columns is not None else ""
            tuples.append(DecodedField(f"tuple {lp}", off, off + lp_len, shown or f"{lp_len} bytes",
                                       tuple(res.fields)))
        tuples.sort(key=lambda f: f.start)
        fields.extend(tuples)
        if btree:
            fields.append(_btree.decode_special(data, special))
        elif special_size:
            fields.append(DecodedField("special space", special, len(data), f"{special_size} bytes"))
        return DecodedPage(page_type, tuple(fields), cells=n_lp, records=tuple(records), problems=tuple(problems))
