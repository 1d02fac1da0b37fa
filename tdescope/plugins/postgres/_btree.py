"""B-tree index pages: the special space, the meta page and index tuples (src/include/access/nbtree.h, itup.h).

Used by :mod:`tdescope.plugins.postgres.pages` for pages whose 16-byte special
space ends in a cycle id (at most ``0xFF7F``); hash, GiST and SP-GiST pages end
theirs in a page id from ``0xFF80`` up and stay generic index pages. Every
reader is bounded by the page and reports problems instead of raising.
"""

from __future__ import annotations

import struct

from tdescope.app.engines.api import DecodedField

__all__ = ["SPECIAL_SIZE", "BtreeSpecial", "is_btree", "decode_special", "decode_meta", "decode_index_tuple",
           "btree_page_type"]

SPECIAL_SIZE = 16
_MAX_CYCLE_ID = 0xFF7F
_OPAQUE = struct.Struct("<IIIHH")  # btpo_prev btpo_next btpo_level btpo_flags btpo_cycleid
_META = struct.Struct("<IIIIIII4xd?")  # magic version root level fastroot fastlevel delpages, heap_tuples, allequal
_META_START = 24  # PageGetContents: MAXALIGN(SizeOfPageHeaderData)
_BTP_FLAGS = ((0x1, "LEAF"), (0x2, "ROOT"), (0x4, "DELETED"), (0x8, "META"), (0x10, "HALF_DEAD"),
              (0x20, "SPLIT_END"), (0x40, "HAS_GARBAGE"), (0x80, "INCOMPLETE_SPLIT"), (0x100, "HAS_FULLXID"))
BTP_LEAF, BTP_ROOT, BTP_DELETED, BTP_META, BTP_HALF_DEAD = 0x1, 0x2, 0x4, 0x8, 0x10
_INDEX_SIZE_MASK, _INDEX_ALT_TID_MASK, _INDEX_VAR_MASK, _INDEX_NULL_MASK = 0x1FFF, 0x2000, 0x4000, 0x8000
_BT_OFFSET_MASK, _BT_PIVOT_HEAP_TID_ATTR, _BT_IS_POSTING = 0x0FFF, 0x1000, 0x2000
_TID = 6  # ItemPointerData
_INDEX_HEADER = 8  # ItemPointerData t_tid (6) + t_info (2)
_NULL_BITMAP = 4  # IndexAttributeBitMapData: INDEX_MAX_KEYS (32) bits


class BtreeSpecial:
    """BTPageOpaqueData as read from the last 16 bytes of a page.

    Attributes
    ----------
    prev, next, level, flags, cycle_id : int
        btpo_prev, btpo_next, btpo_level, btpo_flags, btpo_cycleid.
    """

    __slots__ = ("prev", "next", "level", "flags", "cycle_id")

    def __init__(self, data: bytes, special: int) -> None:
        self.prev, self.next, self.level, self.flags, self.cycle_id = _OPAQUE.unpack_from(data, special)


def is_btree(data: bytes, special: int) -> bool:
    """True when the special space at ``special`` has a b-tree's size and no other access method's page id."""
    return len(data) - special == SPECIAL_SIZE and BtreeSpecial(data, special).cycle_id <= _MAX_CYCLE_ID


def btree_page_type(opaque: BtreeSpecial) -> str:
    """The page's role as ``bt_page_stats`` names it (deleted and half-dead pages before leaf and root)."""
    if opaque.flags & BTP_META:
        return "b-tree meta"
    if opaque.flags & BTP_DELETED:
        return "b-tree deleted"
    if opaque.flags & BTP_HALF_DEAD:
        return "b-tree half-dead"
    if opaque.flags & BTP_LEAF:
        return "b-tree leaf"
    return "b-tree root" if opaque.flags & BTP_ROOT else "b-tree interior"


def decode_special(data: bytes, special: int) -> DecodedField:
    """The BTPageOpaqueData field group at ``special``."""
    o = BtreeSpecial(data, special)
    flags = "|".join(name for bit, name in _BTP_FLAGS if o.flags & bit)
    return DecodedField("BTPageOpaqueData", special, special + SPECIAL_SIZE, btree_page_type(o), (
        DecodedField("btpo_prev", special, special + 4, str(o.prev)),
        DecodedField("btpo_next", special + 4, special + 8, str(o.next)),
        DecodedField("btpo_level", special + 8, special + 12, str(o.level)),
        DecodedField("btpo_flags", special + 12, special + 14, f"0x{o.flags:04x} {flags}"),
        DecodedField("btpo_cycleid", special + 14, special + 16, str(o.cycle_id)),
    ))


def decode_meta(data: bytes) -> DecodedField:
    """BTMetaPageData, which sits where a page's line pointers would (pd_lower is its end)."""
    s = _META_START
    magic, version, root, level, fastroot, fastlevel, delpages, heap_tuples, allequal = _META.unpack_from(data, s)
    return DecodedField("BTMetaPageData", s, s + 41, f"root {root}, level {level}", (
        DecodedField("btm_magic", s, s + 4, f"0x{magic:06x}"),
        DecodedField("btm_version", s + 4, s + 8, str(version)),
        DecodedField("btm_root", s + 8, s + 12, str(root)),
        DecodedField("btm_level", s + 12, s + 16, str(level)),
        DecodedField("btm_fastroot", s + 16, s + 20, str(fastroot)),
        DecodedField("btm_fastlevel", s + 20, s + 24, str(fastlevel)),
        DecodedField("btm_last_cleanup_num_delpages", s + 24, s + 28, str(delpages)),
        DecodedField("btm_last_cleanup_num_heap_tuples", s + 32, s + 40, str(heap_tuples)),
        DecodedField("btm_allequalimage", s + 40, s + 41, str(allequal).lower()),
    ))


def _tid(data: bytes, pos: int) -> str:
    bi_hi, bi_lo, posid = struct.unpack_from("<HHH", data, pos)
    return f"({(bi_hi << 16) | bi_lo},{posid})"


def decode_index_tuple(data: bytes, lp: int, off: int, length: int, problems: list[str]) -> DecodedField:
    """IndexTupleData at ``data[off:off+length]``: t_tid, t_info, the NULL bitmap, key bytes, heap TIDs.

    ``t_tid`` is shown raw, as ``bt_page_items``' ``ctid``: in a pivot tuple
    (``ALT_TID`` without ``BT_IS_POSTING``) it holds a downlink and the number of
    key attributes, the heap TID (when kept) being the tuple's last 6 bytes; in a
    posting-list tuple it holds the list's offset and its number of TIDs.
    """
    if length < _INDEX_HEADER:
        problems.append(f"lp {lp}: index tuple of {length} bytes, shorter than its header")
        return DecodedField(f"item {lp}", off, off + length, f"{length} bytes")
    bi_hi, bi_lo, posid, info = struct.unpack_from("<HHHH", data, off)
    size = info & _INDEX_SIZE_MASK
    has_nulls, has_var, alt_tid = (bool(info & _INDEX_NULL_MASK), bool(info & _INDEX_VAR_MASK),
                                   bool(info & _INDEX_ALT_TID_MASK))
    children = [
        DecodedField("t_tid", off, off + _TID, _tid(data, off)),
        DecodedField("t_info", off + 6, off + 8, f"size {size}" + (" HAS_NULLS" if has_nulls else "")
                     + (" HAS_VARWIDTH" if has_var else "") + (" ALT_TID" if alt_tid else "")),
    ]
    data_start = _INDEX_HEADER
    if has_nulls:
        children.append(DecodedField("null bitmap", off + 8, off + 8 + _NULL_BITMAP,
                                     data[off + 8:off + 8 + _NULL_BITMAP].hex()))
        data_start = 16  # MAXALIGN(header + bitmap)
    if size > length:
        problems.append(f"lp {lp}: index tuple says {size} bytes, its line pointer {length}")
        size = length
    key_end = size
    tail = None
    if alt_tid and posid & _BT_IS_POSTING:
        n_tids, list_start = posid & _BT_OFFSET_MASK, (bi_hi << 16) | bi_lo
        if data_start <= list_start and list_start + n_tids * _TID <= size:
            key_end = list_start
            tids = " ".join(_tid(data, off + list_start + i * _TID) for i in range(n_tids))
            tail = DecodedField("posting list", off + list_start, off + list_start + n_tids * _TID, tids)
        else:
            problems.append(f"lp {lp}: posting list of {n_tids} TIDs at {list_start} outside the tuple")
    elif alt_tid and posid & _BT_PIVOT_HEAP_TID_ATTR and size - 8 >= data_start:
        key_end = size - 8  # the heap TID takes the last MAXALIGN(6) bytes: its own 6, after 2 of padding
        tail = DecodedField("heap TID", off + size - _TID, off + size, _tid(data, off + size - _TID))
    if key_end > data_start:
        children.append(DecodedField("key data", off + data_start, off + key_end,
                                     data[off + data_start:off + key_end].hex()))
    if tail is not None:
        children.append(tail)
    return DecodedField(f"item {lp}", off, off + length, f"{length} bytes", tuple(children))
