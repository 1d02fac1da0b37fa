"""The relations a capture can name: a table's OID (``HeapTupleData.t_tableOid``) or its file node.

A probe reads what the call belongs to (:attr:`~tdescope.app.events.PageCapture.context`):
``pg_tde_crypt_tuple``'s tuple carries its table's OID, ``mdread``'s ``SMgrRelation``
its relfilenode. :class:`RelationMap` turns either into the relation's name and, for
user tables, its columns, so a decoder shows *which* table a tuple or block is of and
decodes its attributes with that table's columns, not with a guess. Built once from
the catalogs (:func:`read_relations`), kept in recordings as JSON data.
"""

from __future__ import annotations

from dataclasses import dataclass

from tdescope.app.events import CaptureContext, ContextKind
from tdescope.plugins.postgres import statements
from tdescope.plugins.postgres._tuples import PgColumn

__all__ = ["MAX_RELATIONS", "PgRelation", "RelationMap", "read_relations"]

#: Relations (and user-table attributes, times 20) read at most: a server with more names the rest by number.
MAX_RELATIONS = 5000


@dataclass(frozen=True, slots=True)
class PgRelation:
    """One relation: ``pg_class.oid``, ``relfilenode``, its name as ``regclass`` text, and its columns
    (user tables only; None for the others)."""

    oid: int
    relfilenode: int
    name: str
    columns: tuple[PgColumn, ...] | None = None


class RelationMap:
    """Relations by OID and by file node; :meth:`find` answers for a capture's context."""

    def __init__(self, relations: tuple[PgRelation, ...] = ()) -> None:
        self.relations = tuple(relations)
        self._by = {ContextKind.RELATION: {r.oid: r for r in self.relations},
                    ContextKind.RELFILENODE: {r.relfilenode: r for r in self.relations}}

    def __bool__(self) -> bool:
        return bool(self.relations)

    def find(self, context: CaptureContext | None) -> PgRelation | None:
        """The relation ``context`` names (an OID or a file node), None when it names none or none known."""
        if context is None or context.kind not in self._by:
            return None
        return self._by[context.kind].get(context.value)

    @staticmethod
    def label(context: CaptureContext | None, relation: PgRelation | None) -> str:
        """``relation orders (oid 16390)``, ``relfilenode 16391`` when unknown; empty without a relation context."""
        if context is None or context.kind not in (ContextKind.RELATION, ContextKind.RELFILENODE):
            return ""
        number = f"{'oid' if context.kind is ContextKind.RELATION else 'relfilenode'} {context.value}"
        return f"relation {relation.name} ({number})" if relation is not None else number

    def catalog(self) -> list:
        """JSON data a recording keeps: ``[oid, relfilenode, name, columns or None]`` each."""
        return [[r.oid, r.relfilenode, r.name,
                 None if r.columns is None else [[c.name, c.typname, c.typlen, c.typalign] for c in r.columns]]
                for r in self.relations]

    @classmethod
    def from_catalog(cls, data: object) -> "RelationMap":
        """Inverse of :meth:`catalog`; entries it cannot read are skipped."""
        out = []
        for item in data if isinstance(data, list) else ():
            try:
                oid, node, name, cols = item
                columns = None if cols is None else tuple(PgColumn(str(n), str(t), int(ln), str(a))
                                                          for n, t, ln, a in cols)
                out.append(PgRelation(int(oid), int(node), str(name), columns))
            except (TypeError, ValueError):
                continue
        return cls(tuple(out))


def read_relations(control, limit: int = MAX_RELATIONS) -> RelationMap:
    """The server's relations with storage, and the user tables' columns, from the catalogs
    (:data:`~tdescope.plugins.postgres.statements.RELATIONS`, ``RELATION_COLUMNS``) on ``control``."""
    columns: dict[int, list[PgColumn]] = {}
    for relid, *column in control.execute(statements.RELATION_COLUMNS, (limit * 20,)).fetchall():
        columns.setdefault(int(relid), []).append(PgColumn(*column))
    rows = control.execute(statements.RELATIONS, (limit,)).fetchall()
    return RelationMap(tuple(PgRelation(int(oid), int(node), str(name),
                                        tuple(columns[int(oid)]) if int(oid) in columns else None)
                             for oid, node, name in rows))
