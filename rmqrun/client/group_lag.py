"""A consumer group's lag as the brokers alone know it: what ``rmqrun exporter`` serves.

A consumer's own metrics vanish with the consumer, which is exactly when lag
matters most (every consumer of the group down). Kafka operators answer that
with broker-side lag exporters; this is RocketMQ's equivalent, read with the
calls ``mqadmin consumerProgress`` makes: GET_CONSUME_STATS on every master of
the name server's cluster table, which lists every queue of every topic the
group has stored offsets for (its ``%RETRY%`` topic included) with the broker's
max offset, the group's offset and the store time of the last message it
consumed. Nothing of the group has to run.

Where a broker answers 0 as the group's offset and the queue holds messages,
QUERY_CONSUMER_OFFSET tells a committed 0 from "never committed" (the broker
writes 0 for both); a queue never committed has no lag sample, as in
``rmqrun run``'s metrics and ``rmqrun status``, rather than its whole backlog.
For a lagging queue one pull of one message at the group's offset (the oldest
unfinished message: a committed offset stops there) says how long ago it was
stored, the age ``rmqrun run`` exports as
``rmqrun_queue_oldest_unfinished_age_seconds``.

A broker keeps no time of a commit, so :class:`CommitClock` notes when the
group's offset of a queue was last seen to move (or first seen). How many
messages the group dead-lettered is the max offsets of ``%DLQ%<group>``
(:func:`dead_lettered`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from rmqrun.protocol.headers import PullMessageRequestHeader
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import AccessDeniedError, BrokerError, RemotingError, TopicNotExistError
from rmqrun.remoting.message import decode_messages
from rmqrun.topic_names import dlq_topic

#: how many age pulls one read sends at once (a group may have hundreds of lagging queues)
AGE_PULLS_AT_ONCE = 16


@dataclass(frozen=True, slots=True)
class QueueLag:
    """One queue of a group, as its master broker sees it (topic and group as on the wire)."""

    mq: MessageQueue
    broker_offset: int
    consumer_offset: int
    #: epoch ms the broker stored the last message the group consumed (None: the broker does not say)
    last_consumed_ms: int | None
    #: seconds since the message at the group's offset was stored (None: no lag, or it could not be read)
    oldest_age_s: float | None = None

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - self.consumer_offset)


async def stored_age_at(instance: ClientInstance, addr: str, group: str, mq: MessageQueue,
                        offset: int) -> float | None:
    """Seconds since the message at ``offset`` (the oldest unfinished: committed offsets stop there) was
    stored; None when it cannot be read (retention deleted it, a broker error). A stuck key shows here."""
    header = PullMessageRequestHeader(consumer_group=group, topic=mq.topic, queue_id=mq.queue_id,
                                      queue_offset=offset, max_msg_nums=1, sys_flag=0x4, commit_offset=0,
                                      suspend_timeout_millis=0, sub_version=0, subscription="*",
                                      expression_type="TAG", bname=mq.broker_name)
    try:
        result = await instance.broker.pull(addr, header, timeout=instance.broker.timeout)
        found = decode_messages(result.body, decompress=False) if result.body else []
    except (RemotingError, OSError, asyncio.TimeoutError):  # a missing age never fails the reading
        return None
    if not found or found[0].queue_offset != offset or found[0].store_timestamp <= 0:
        return None
    return max(0.0, time.time() - found[0].store_timestamp / 1000)


async def _broker_lag(instance: ClientInstance, admin: AdminClient, addr: str, group: str) -> list[QueueLag]:
    """The group's queues on one master; [] when that broker has nothing of the group."""
    try:
        stats = await admin.consume_stats(addr, group)
    except AccessDeniedError:
        raise
    except BrokerError as exc:
        if exc.code == ResponseCode.CONSUMER_NOT_ONLINE:  # some brokers answer 206 for an idle group
            return []
        raise
    out: list[QueueLag] = []
    for mq, p in sorted(stats.offset_table.items()):
        if p.consumer_offset == 0 and p.broker_offset > 0:
            # 0 is also what the broker writes for "no stored offset": ask which it is
            stored = await instance.broker.query_consumer_offset(addr, group, mq, timeout=admin.timeout)
            if stored is None:
                continue
        out.append(QueueLag(mq, p.broker_offset, p.consumer_offset, p.last_timestamp or None))
    return out


async def read_group_lag(instance: ClientInstance, group: str, *, ages: bool = True) -> list[QueueLag]:
    """Every queue the group has stored offsets for, on every master of the cluster, sorted.

    ``group`` is the name on the wire (under a namespace: ``ns%group``). Raises
    (:class:`~rmqrun.remoting.errors.RemotingError`,
    :class:`~rmqrun.client.errors.NameServerUnavailableError`) when the name
    server or a master cannot answer: a partial reading would show a lower lag
    than the truth, so there is none.
    """
    admin = AdminClient(instance.pool, instance.namesrv, timeout=instance.broker.timeout)
    masters = (await admin.cluster_info()).all_masters()
    parts = await asyncio.gather(*(_broker_lag(instance, admin, addr, group) for addr in masters))
    rows = [(addr, row) for addr, part in zip(masters, parts) for row in part]
    gate = asyncio.Semaphore(AGE_PULLS_AT_ONCE)

    async def with_age(addr: str, row: QueueLag) -> QueueLag:
        if not ages or row.lag <= 0:
            return row
        async with gate:
            age = await stored_age_at(instance, addr, group, row.mq, row.consumer_offset)
        return QueueLag(row.mq, row.broker_offset, row.consumer_offset, row.last_consumed_ms, age)

    return sorted(await asyncio.gather(*(with_age(addr, row) for addr, row in rows)), key=lambda r: r.mq)


async def dead_lettered(instance: ClientInstance, group: str) -> int:
    """How many messages ``%DLQ%<group>`` ever received: its queues' max offsets summed over every master
    (GET_TOPIC_STATS_INFO, as ``mqadmin topicStatus``; a broker without the topic counts 0). Offsets never go
    back, so its rate is the group's dead-letter rate, read from the brokers with no consumer running."""
    admin = AdminClient(instance.pool, instance.namesrv, timeout=instance.broker.timeout)
    total = 0
    for addr in (await admin.cluster_info()).all_masters():
        try:
            stats = await admin.topic_stats(addr, dlq_topic(group))
        except TopicNotExistError:
            continue
        total += sum(q.max_offset for q in stats.values())
    return total


class CommitClock:
    """When each queue's committed offset was last seen to move (or first seen), per group.

    Brokers keep no commit times; a reader that reads every few seconds notes
    them within one reading. After the reader starts, a queue counts as
    committed at its first reading: an alert on "no commit for N minutes" then
    fires N minutes after a restart of the reader at the latest, never never.
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, MessageQueue], tuple[int, float]] = {}

    def observe(self, group: str, mq: MessageQueue, offset: int, now: float | None = None) -> float:
        """Note ``offset`` for the group's queue; returns the Unix time it last moved."""
        key = (group, mq)
        seen = self._seen.get(key)
        if seen is None or seen[0] != offset:
            seen = (offset, time.time() if now is None else now)
            self._seen[key] = seen
        return seen[1]
