"""Java ``HashSet`` iteration order, for sets a Java peer writes in that order.

fastjson writes a ``Set`` in its iteration order and ``makeCustomHeaderToNet``
fills ``extFields`` walking a ``HashSet<Field>``, so the heartbeat's tag and code
sets and a header's ext keys come out byte-identical to a Java peer's only if
we model that order. Both the subscription and the header codec need it, so it
lives below both.
"""

from __future__ import annotations

from typing import Any, Iterable

from rmqrun.remoting.message_props import java_string_hash

DEFAULT_CAPACITY = 16


def spread_hash(h: int) -> int:
    """``HashMap.hash``: the 32-bit hash code xor its upper half."""
    h &= 0xFFFFFFFF
    return h ^ (h >> 16)


def table_size_for(n: int) -> int:
    """``HashMap.tableSizeFor``: the smallest power of two >= n (1 for n <= 1)."""
    size = 1
    while size < n:
        size <<= 1
    return size


def message_queue_hash(topic: str, broker_name: str, queue_id: int) -> int:
    """``MessageQueue.hashCode()`` (brokerName, queueId, topic with the 31 multiplier), as int32."""
    result = 1
    result = (31 * result + java_string_hash(broker_name)) & 0xFFFFFFFF
    result = (31 * result + queue_id) & 0xFFFFFFFF
    result = (31 * result + java_string_hash(topic)) & 0xFFFFFFFF
    return result - 0x100000000 if result & 0x80000000 else result


def java_hash_set_order(items: Iterable[Any], hash_of: Any, initial_capacity: int | None = None) -> list[Any]:
    """Iteration order of a ``java.util.HashSet`` built by adding ``items``.

    ``initial_capacity`` mirrors ``new HashSet<>(n)`` (the table starts at
    ``tableSizeFor(n)``); ``None`` is the default constructor (16).

    fastjson writes a set in its iteration order, so producing the same order
    makes our heartbeat body byte-identical to a Java client's. The model:
    buckets ordered by ``(h ^ (h >>> 16)) & (capacity - 1)``, insertion order
    within a bucket, capacity 16 doubling past a 0.75 load factor or when a bin
    would treeify in a table smaller than 64. (Order inside a treeified bin, nine
    or more colliding tags in a table of 64+, is not modelled.)
    """
    distinct: list[Any] = []
    seen: set[Any] = set()
    for item in items:
        if item not in seen:
            seen.add(item)
            distinct.append(item)
    spread = [spread_hash(hash_of(item)) for item in distinct]
    capacity = DEFAULT_CAPACITY if initial_capacity is None else table_size_for(initial_capacity)
    while len(distinct) > capacity * 3 // 4:
        capacity *= 2
    # A ninth entry in one bin resizes a table below 64 instead of treeifying it.
    while capacity < 64:
        bins: dict[int, int] = {}
        for s in spread:
            bins[s & (capacity - 1)] = bins.get(s & (capacity - 1), 0) + 1
        if max(bins.values(), default=0) <= 8:
            break
        capacity *= 2
    order = sorted(range(len(distinct)), key=lambda i: spread[i] & (capacity - 1))
    return [distinct[i] for i in order]
