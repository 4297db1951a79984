"""The oldest unfinished message of a queue: where a stuck key (or a stuck queue) shows.

In every mode the committed offset of a queue stops at its oldest unfinished
message, so one message that keeps failing (a stuck key in ``order_by: key``)
holds the queue's progress there while everything behind it is consumed, up to
the flow-control limits. Its offset and how long ago it was stored say where
and since when; the metrics export both per queue
(``rmqrun_queue_oldest_unfinished_offset``, ``..._age_seconds``).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from itertools import repeat
from typing import Any

from rmqrun.remoting.message import SYSFLAG_BORNHOST_V6, SYSFLAG_POS, store_timestamp_pos

_LONG = struct.Struct(">q")
#: SYSFLAG, then STORETIMESTAMP as it sits after an IPv4 BORNHOST (the common case): one read per record
_FLAG_AND_STAMP_V4 = struct.Struct(f">i{store_timestamp_pos(0) - SYSFLAG_POS - 4}xq")


def store_timestamp_ms(payload: Any) -> int | None:
    """When the broker stored a cached message: from a raw record (the push path) or a decoded one."""
    if not isinstance(payload, (bytes, bytearray, memoryview)):  # raw records first: read per consumed message
        ts = getattr(payload, "store_timestamp", None)
        if ts is not None:
            return int(ts) or None
    try:
        sys_flag, stored = _FLAG_AND_STAMP_V4.unpack_from(payload, SYSFLAG_POS)
        if sys_flag & SYSFLAG_BORNHOST_V6:
            (stored,) = _LONG.unpack_from(payload, store_timestamp_pos(sys_flag))
    except (struct.error, TypeError):
        return None
    return stored if stored > 0 else None


def store_timestamps_ms(records: Sequence[Any]) -> list[int]:
    """The store times of a job's records, skipping those without one: :func:`store_timestamp_ms` for each.

    Read once per finished message on the push path, so the common case (raw records,
    IPv4 born hosts) is one ``unpack_from`` per record and the rest C-level passes;
    anything else (decoded messages, an IPv6 born host, a short record, a missing
    stamp) falls back to the per-record reader, with the same results.
    """
    try:
        pairs = list(map(_FLAG_AND_STAMP_V4.unpack_from, records, repeat(SYSFLAG_POS)))  # no Python step per record
    except (struct.error, TypeError):
        return [s for s in map(store_timestamp_ms, records) if s is not None]
    if not pairs:
        return []
    flags, stamps = zip(*pairs)
    if any(f & SYSFLAG_BORNHOST_V6 for f in set(flags)) or min(stamps) <= 0:
        return [s for s in map(store_timestamp_ms, records) if s is not None]
    return list(stamps)


def oldest_unfinished(pq: Any, now_ms: int | None = None) -> tuple[int, float | None] | None:
    """(offset, seconds since it was stored) of the queue's oldest cached unfinished message; None if none.

    Messages an orderly queue has taken count too (they are unfinished until committed).
    """
    candidates = []
    first = pq.first_offset()
    if first is not None:
        candidates.append(first)
    if pq.has_consuming():
        candidates.append(pq.info()["transactionMsgMinOffset"])
    if not candidates:
        return None
    offset = min(candidates)
    entry = pq.get(offset)
    if entry is None:
        entry = pq.get_taken(offset)
    stored = store_timestamp_ms(entry.payload) if entry is not None else None
    if stored is None:
        return offset, None
    now = int(time.time() * 1000) if now_ms is None else now_ms
    return offset, max(0.0, (now - stored) / 1000)
