"""A consumer group's progress per queue: broker offset, consumer offset and lag (what ``rmqrun status -g G`` shows).

What ``mqadmin consumerProgress`` shows. The group's topics come from the
brokers' consume statistics (GET_CONSUME_STATS on every master of the name
server's cluster table: the topics the group has stored offsets for), plus
the subscriptions of its online clients when the broker lists them
(GET_CONSUMER_CONNECTION_LIST); never from the global topic list, which
clusters with ``enableAllTopicList=false`` refuse. A broker too old or too
small to answer GET_CONSUME_STATS falls back to asking, per topic of the name
server, who consumes it (QUERY_TOPIC_CONSUME_BY_WHO).

Per queue: GET_MAX_OFFSET and QUERY_CONSUMER_OFFSET on the queue's master.
A broker answers 0 for a queue the group never committed whose first message
is still in memory (Java's rule), so a topic the group has no stored offsets
for (not in its consume statistics) shows no consumer offset and no lag,
rather than 0 and the whole backlog. A group no broker knows (no stored
offsets, nobody online) is an error (:class:`UnknownGroupError`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

from rmqrun.client.admin import AdminClient
from rmqrun.client.group_lag import stored_age_at
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import subscribe_queues
from rmqrun.errors import RmqrunError
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap_queue, wrap
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import AccessDeniedError, BrokerError, TopicNotExistError
from rmqrun.remoting.security import ClientSecurity
from rmqrun.topic_names import SYSTEM_TOPICS, is_dlq_topic, is_retry_topic, retry_topic

TIMEOUT = 5.0


class StatusError(RmqrunError):
    """The name server or a broker could not answer."""


class UnknownGroupError(StatusError):
    """No broker has stored offsets or online clients for the group."""


@dataclass(frozen=True)
class QueueProgress:
    mq: MessageQueue
    broker_offset: int
    #: None: the group has no committed offset for this queue
    consumer_offset: int | None
    #: with lag: seconds since the broker stored the message at the consumer offset, the queue's oldest
    #: unfinished one (None: no lag, or it could not be read)
    oldest_age_s: float | None = None
    #: the queue's min offset (read only where the group has an offset: None otherwise)
    min_offset: int | None = None
    #: epoch ms when the broker stored the last message the group consumed (the one before its consumer
    #: offset: mqadmin consumerProgress's ``#LastTime``, GET_CONSUME_STATS's ``lastTimestamp``); None: not known
    consumed_up_to_ms: int | None = None

    @property
    def deleted_unconsumed(self) -> int:
        """Messages retention deleted before the group consumed them: its offset is below the queue's min
        offset (it continues there on its next pull)."""
        if self.consumer_offset is None or self.min_offset is None:
            return 0
        return max(0, self.min_offset - self.consumer_offset)

    @property
    def lag(self) -> int | None:
        """None when the group never committed: where it starts depends on its consume_from_where."""
        if self.consumer_offset is None:
            return None
        return max(0, self.broker_offset - self.consumer_offset)

    def to_json(self) -> dict[str, object]:
        return {"topic": self.mq.topic, "broker": self.mq.broker_name, "queue": self.mq.queue_id,
                "broker_offset": self.broker_offset, "consumer_offset": self.consumer_offset, "lag": self.lag,
                "oldest_unfinished_offset": self.consumer_offset if self.oldest_age_s is not None else None,
                "oldest_unfinished_age_s": None if self.oldest_age_s is None else round(self.oldest_age_s, 3),
                "min_offset": self.min_offset, "deleted_unconsumed": self.deleted_unconsumed,
                "consumed_up_to_ms": self.consumed_up_to_ms}


def _admin(instance: ClientInstance) -> AdminClient:
    return AdminClient(instance.pool, instance.namesrv, timeout=TIMEOUT)


async def all_topics(instance: ClientInstance) -> list[str]:
    try:
        return await _admin(instance).topic_list()
    except AccessDeniedError:
        raise
    except BrokerError as exc:
        raise StatusError(f"the name server refused the topic list: {exc.remark or exc.code}") from None


async def _consumed_by(instance: ClientInstance, topic: str, group: str) -> bool:
    route = await instance.update_route(topic)
    for bd in route.broker_datas:
        addr = bd.master_address
        if addr is None:
            continue
        try:
            if group in await _admin(instance).consumer_groups_of_topic(addr, topic):
                return True
        except AccessDeniedError:
            raise
        except BrokerError:
            continue  # this broker does not say; another may
    return False


async def _legacy_group_topics(instance: ClientInstance, group: str) -> list[str]:
    """For brokers without GET_CONSUME_STATS: every topic whose brokers say the group consumes it."""
    names = await all_topics(instance)
    candidates = [t for t in names if t not in SYSTEM_TOPICS and not is_dlq_topic(t) and not is_retry_topic(t)]
    found = await asyncio.gather(*(_consumed_by(instance, t, group) for t in candidates), return_exceptions=True)
    topics = sorted(t for t, ok in zip(candidates, found) if ok is True)
    if retry_topic(group) in names:
        topics.append(retry_topic(group))
    return topics


async def _subscribed_topics(instance: ClientInstance, addr: str, group: str) -> set[str]:
    """The topics the group's online clients subscribe to (GET_CONSUMER_CONNECTION_LIST), if the broker says."""
    try:
        return set((await _admin(instance).consumer_connection(addr, group)).topics)
    except AccessDeniedError:
        raise
    except BrokerError:  # nobody online (206), or a broker that does not say
        return set()


@dataclass
class GroupView:
    """What the brokers know of a group: topics with stored offsets, topics its online clients subscribe to."""

    committed: set[str]
    subscribed: set[str]
    online: bool
    #: per queue, epoch ms of the store time of the last message the group consumed (brokers that say)
    consumed_up_to: dict[MessageQueue, int] = field(default_factory=dict)

    @property
    def topics(self) -> list[str]:
        names = self.committed | self.subscribed
        return sorted(names, key=lambda t: (is_retry_topic(t), t))


async def group_view(instance: ClientInstance, group: str) -> GroupView | None:
    """The group as every master broker sees it; None when a broker lacks GET_CONSUME_STATS."""
    admin = _admin(instance)
    masters = (await admin.cluster_info()).all_masters()
    committed: set[str] = set()
    subscribed: set[str] = set()
    consumed_up_to: dict[MessageQueue, int] = {}
    online = False
    for addr in masters:
        try:
            stats = await admin.consume_stats(addr, group)
        except BrokerError as exc:
            if exc.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED:
                return None
            if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:  # some brokers answer 206 for an idle group
                raise
            stats = None
        if stats is not None:
            committed.update(mq.topic for mq in stats.offset_table)
            consumed_up_to.update((mq, p.last_timestamp) for mq, p in stats.offset_table.items()
                                  if p.last_timestamp > 0)
        try:
            online = online or bool(await instance.broker.get_consumer_list(addr, group, timeout=TIMEOUT))
        except AccessDeniedError:
            raise
        except BrokerError:
            pass  # "no consumer for this group"
        subscribed |= await _subscribed_topics(instance, addr, group)
    return GroupView(committed, subscribed, online, consumed_up_to)


async def topic_progress(instance: ClientInstance, group: str, topic: str, committed: bool = True,
                         consumed_up_to: Mapping[MessageQueue, int] | None = None) -> list[QueueProgress]:
    """The topic's queues; ``committed=False``: the group has no stored offset on it, show none.
    ``consumed_up_to``: what the brokers' consume statistics say of each queue's last consumed message."""
    try:
        route = await instance.update_route(topic)
    except TopicNotExistError:
        raise StatusError(f"topic {topic!r} does not exist on the name server") from None

    async def one(mq: MessageQueue) -> QueueProgress:
        addr = route.master_address(mq.broker_name)
        if addr is None:
            raise StatusError(f"broker {mq.broker_name} of {topic} has no master")
        high = await instance.broker.get_max_offset(addr, mq, timeout=TIMEOUT)
        stored = await instance.broker.query_consumer_offset(addr, group, mq, timeout=TIMEOUT) if committed else None
        age = await stored_age_at(instance, addr, group, mq, stored) if stored is not None and stored < high else None
        low = await instance.broker.get_min_offset(addr, mq, timeout=TIMEOUT) if stored is not None else None
        last = (consumed_up_to or {}).get(mq) if stored is not None else None
        return QueueProgress(mq, high, stored, age, low, last)

    return list(await asyncio.gather(*(one(mq) for mq in sorted(subscribe_queues(route, topic)))))


async def progress(namesrv: str, group: str, topics: Sequence[str] | None = None,
                   security: ClientSecurity | None = None, *,
                   namespace: str | None = None) -> list[QueueProgress]:
    """Every queue of ``topics`` (default: the group's topics) with its offsets, sorted.

    With a namespace the group and topics are asked for under it (``ns%group``)
    and the rows name the plain topics. Raises :class:`UnknownGroupError` when
    no broker knows the group.
    """
    rows = await _progress(namesrv, wrap(namespace, group), [wrap(namespace, t) for t in topics or ()],
                           f" in namespace {namespace!r}" if namespace else "", security)
    if not namespace:
        return rows
    return [replace(r, mq=unwrap_queue(namespace, r.mq)) for r in rows]


async def _progress(namesrv: str, group: str, topics: Sequence[str], where: str,
                    security: ClientSecurity | None) -> list[QueueProgress]:
    instance = ClientInstance(namesrv, instance_name="rmqrun-status", security=security)
    try:
        view = await group_view(instance, group)
        if view is None:  # a broker without GET_CONSUME_STATS: the older way, per topic
            chosen = list(topics) if topics else await _legacy_group_topics(instance, group)
            if not chosen:
                raise UnknownGroupError(f"consumer group {group!r}{where} is unknown: no topic is consumed by it")
            committed = set(chosen)
        else:
            if not view.committed and not view.subscribed and not view.online:
                raise UnknownGroupError(f"consumer group {group!r}{where} is unknown: no broker has stored "
                                        "offsets or online consumers for it")
            chosen = list(topics) if topics else view.topics
            committed = view.committed
        rows: list[QueueProgress] = []
        last = view.consumed_up_to if view is not None else None
        for topic in chosen:
            rows.extend(await topic_progress(instance, group, topic, topic in committed, last))
        return rows
    finally:
        await instance.close()


def to_json(rows: Sequence[QueueProgress], group: str, namespace: str | None = None) -> dict[str, object]:
    """``rmqrun status --json``: the rows and totals; null where the group has no offset."""
    lags = [r.lag for r in rows if r.lag is not None]
    named: dict[str, object] = {"group": group, **({"namespace": namespace} if namespace else {})}
    return {**named, "at": int(time.time() * 1000), "queues": [r.to_json() for r in rows],
            "total": {"queues": len(rows), "broker_offset": sum(r.broker_offset for r in rows),
                      "consumer_offset": sum(r.consumer_offset or 0 for r in rows),
                      "lag": sum(lags) if lags else None}}
