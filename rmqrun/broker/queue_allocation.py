"""Server-side queue allocation for QUERY_ASSIGNMENT: the two strategies a 5.x broker knows, and allocate4Pop.

A broker that answers QUERY_ASSIGNMENT splits a topic's queues among a group's
live clients itself, with the strategy the client names: ``AVG`` (contiguous
near-equal blocks, Java's default) or ``AVG_BY_CIRCLE`` (round robin); any
other name gets no answer. Both must give the same split a client computing it
itself would, so the inputs are sorted as Java's RebalanceImpl sorts them
(queues by topic, broker, id; client ids as strings).

In POP mode (:func:`allocate_for_pop`) queues are shared instead of owned.
With ``pop_share_queue_num`` <= 0, or so large that every client would see
every queue anyway (>= clients - 1), each client gets one entry per broker
with queue id -1, which a POP request reads as "any queue". Otherwise a client
gets its own share plus the shares of the next N clients in the sorted list
(so each queue is popped by N + 1 clients); when there are more clients than
queues each client gets the one queue at its index modulo the queue count.

The two strategies are :mod:`rmqrun.protocol.allocation`'s, the same code the
client's :mod:`rmqrun.consumer.allocate` runs; this module adds allocate4Pop.
"""

from __future__ import annotations

from typing import Sequence

from rmqrun.model import MessageQueue
from rmqrun.protocol.allocation import STRATEGIES, Strategy, allocate_averagely, allocate_by_circle

__all__ = ["POP_ALL_QUEUES", "STRATEGIES", "Strategy", "allocate_averagely", "allocate_by_circle", "allocate_for_pop"]

#: Queue id of a POP assignment that covers every queue of the topic on that broker.
POP_ALL_QUEUES = -1

def allocate_for_pop(strategy: Strategy, client_id: str, mqs: Sequence[MessageQueue], cids: Sequence[str],
                     pop_share_queue_num: int) -> list[MessageQueue]:
    """``allocate4Pop``: the queues ``client_id`` pops from (see the module docstring)."""
    mq_all, cid_all = sorted(set(mqs)), sorted(cids)
    if pop_share_queue_num <= 0 or pop_share_queue_num >= len(cid_all) - 1:
        brokers = sorted({(mq.topic, mq.broker_name) for mq in mq_all})
        return [MessageQueue(topic, broker, POP_ALL_QUEUES) for topic, broker in brokers]
    if client_id not in cid_all or not mq_all:
        return []
    index = cid_all.index(client_id)
    if len(cid_all) > len(mq_all):
        return [mq_all[index % len(mq_all)]]
    out: list[MessageQueue] = []
    for step in range(pop_share_queue_num + 1):
        for mq in strategy(cid_all[(index + step) % len(cid_all)], mq_all, cid_all):
            if mq not in out:
                out.append(mq)
    return out
