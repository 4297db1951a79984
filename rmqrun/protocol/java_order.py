"""Java ``HashSet`` iteration order, for sets a Java peer writes in that order.

fastjson writes a ``Set`` in its iteration order and ``makeCustomHeaderToNet``
fills ``extFields`` walking a ``HashSet<Field>``, so the heartbeat's tag and code
sets and a header's ext keys come out byte-identical to a Java peer's only if
we model that order. Both the subscription and the header codec need it, so it
lives below both.
"""

from __future__ import annotations

from typing import Any, Iterable


def java_hash_set_order(items: Iterable[Any], hash_of: Any) -> list[Any]:
    """Iteration order of a default ``java.util.HashSet`` built by adding ``items``.

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
    spread = []
    for item in distinct:
        h = hash_of(item) & 0xFFFFFFFF
        spread.append(h ^ (h >> 16))
    capacity = 16
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
