"""The queue allocation strategies a client and a broker both compute: ``AVG`` and ``AVG_BY_CIRCLE``.

Every member of a consumer group splits a topic's queues among the group's clients by itself, and a 5.x broker
answering QUERY_ASSIGNMENT splits them for its clients with the strategy they name; both must give the split a
Java client gives (``AllocateMessageQueueAveragely`` / ``AveragelyByCircle``), so the inputs are sorted as
Java's RebalanceImpl sorts them (queues by topic, broker, id; client ids as strings) and the arithmetic is
written here once. The client's strategies (:mod:`rmqrun.consumer.allocate`, which adds Java's argument checks
and the strategies only a client runs) and the broker's (:mod:`rmqrun.broker.queue_allocation`, which adds
allocate4Pop) both call these.
"""

from __future__ import annotations

from typing import Callable, Sequence

from rmqrun.model import MessageQueue

#: (this client's id, every queue, every client id) -> this client's queues, in queue order
Strategy = Callable[[str, Sequence[MessageQueue], Sequence[str]], list[MessageQueue]]


def average_slice(n_items: int, n_cids: int, index: int) -> range:
    """The contiguous block ``AVG`` gives client ``index`` of ``n_cids``.

    With ``mod = n_items % n_cids`` the first ``mod`` clients get one extra item; clients past the number of
    items get nothing.
    """
    mod = n_items % n_cids
    if n_items <= n_cids:
        average = 1
    elif mod > 0 and index < mod:
        average = n_items // n_cids + 1
    else:
        average = n_items // n_cids
    start = index * average if (mod > 0 and index < mod) else index * average + mod
    count = min(average, n_items - start)
    return range(start, start + max(count, 0))


def allocate_averagely(client_id: str, mqs: Sequence[MessageQueue], cids: Sequence[str]) -> list[MessageQueue]:
    """``AVG``: client i of n gets a contiguous block of the sorted queues (none when it is not in ``cids``)."""
    mq_all, cid_all = sorted(set(mqs)), sorted(cids)
    if client_id not in cid_all or not mq_all:
        return []
    return [mq_all[i] for i in average_slice(len(mq_all), len(cid_all), cid_all.index(client_id))]


def allocate_by_circle(client_id: str, mqs: Sequence[MessageQueue], cids: Sequence[str]) -> list[MessageQueue]:
    """``AVG_BY_CIRCLE``: client i of n takes every sorted queue j with j % n == i."""
    mq_all, cid_all = sorted(set(mqs)), sorted(cids)
    if client_id not in cid_all:
        return []
    return mq_all[cid_all.index(client_id)::len(cid_all)]


#: The strategies a broker computes too, by their Java ``getName()``.
STRATEGIES: dict[str, Strategy] = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}
