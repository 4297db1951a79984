"""``rmqrun status --group G``: per queue broker offset, consumer offset and lag.

What ``mqadmin consumerProgress`` shows, asked the way a client can: the
route of each topic from the name server, then per queue GET_MAX_OFFSET and
QUERY_CONSUMER_OFFSET on the queue's master broker. Lag is the broker's max
offset minus the group's committed offset; a queue the group never committed
shows no consumer offset and counts its whole length as lag.

Without ``--topic`` the group's topics are found like this: every topic the
name server knows (GET_ALL_TOPIC_LIST_FROM_NAMESERVER) whose brokers say the
group consumes it (QUERY_TOPIC_CONSUME_BY_WHO: online subscriptions or stored
offsets), plus the group's retry topic if it exists. The embedded broker has
no GET_CONSUME_STATS, and this works against Apache brokers too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Sequence

from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import subscribe_queues
from rmqrun.consumer.config import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX, retry_topic
from rmqrun.model import MessageQueue
from rmqrun.remoting import fastjson
from rmqrun.remoting.codes import RequestCode, ResponseCode
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.remoting.frame import RemotingCommand

#: topics that belong to the broker itself, never to a consumer group
SYSTEM_TOPICS = frozenset({"TBW102", "SCHEDULE_TOPIC_XXXX", "BenchmarkTest", "SELF_TEST_TOPIC", "OFFSET_MOVED_EVENT",
                           "RMQ_SYS_TRANS_HALF_TOPIC", "RMQ_SYS_TRANS_OP_HALF_TOPIC", "RMQ_SYS_TRACE_TOPIC"})
TIMEOUT = 5.0


class StatusError(Exception):
    """The name server or a broker could not answer."""


@dataclass(frozen=True)
class QueueProgress:
    mq: MessageQueue
    broker_offset: int
    #: None: the group has no committed offset for this queue
    consumer_offset: int | None

    @property
    def lag(self) -> int:
        return max(0, self.broker_offset - (self.consumer_offset or 0))


async def _request(instance: ClientInstance, addr: str, code: int, ext: dict[str, str]) -> RemotingCommand:
    return await instance.pool.request(addr, RemotingCommand(code, ext), TIMEOUT)


async def all_topics(instance: ClientInstance) -> list[str]:
    resp = await instance.namesrv.request(RemotingCommand(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER, {}),
                                          TIMEOUT)
    if resp.code != ResponseCode.SUCCESS:
        raise StatusError(f"the name server refused the topic list: {resp.remark or resp.code}")
    return list(fastjson.loads(resp.body or b"{}").get("topicList", []))


async def _consumed_by(instance: ClientInstance, topic: str, group: str) -> bool:
    route = await instance.update_route(topic)
    for bd in route.broker_datas:
        addr = bd.master_address
        if addr is None:
            continue
        resp = await _request(instance, addr, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": topic})
        if resp.code == ResponseCode.SUCCESS and group in fastjson.loads(resp.body or b"{}").get("groupList", []):
            return True
    return False


async def group_topics(instance: ClientInstance, group: str) -> list[str]:
    """The topics ``group`` consumes (see the module docstring), sorted, retry topic last."""
    names = await all_topics(instance)
    candidates = [t for t in names if t not in SYSTEM_TOPICS and not t.startswith(DLQ_GROUP_TOPIC_PREFIX)
                  and not t.startswith(RETRY_GROUP_TOPIC_PREFIX)]
    found = await asyncio.gather(*(_consumed_by(instance, t, group) for t in candidates), return_exceptions=True)
    topics = sorted(t for t, ok in zip(candidates, found) if ok is True)
    if retry_topic(group) in names:
        topics.append(retry_topic(group))
    return topics


async def topic_progress(instance: ClientInstance, group: str, topic: str) -> list[QueueProgress]:
    try:
        route = await instance.update_route(topic)
    except TopicNotExistError:
        raise StatusError(f"topic {topic!r} does not exist on the name server") from None

    async def one(mq: MessageQueue) -> QueueProgress:
        addr = route.master_address(mq.broker_name)
        if addr is None:
            raise StatusError(f"broker {mq.broker_name} of {topic} has no master")
        high = await instance.broker.get_max_offset(addr, mq, timeout=TIMEOUT)
        committed = await instance.broker.query_consumer_offset(addr, group, mq, timeout=TIMEOUT)
        return QueueProgress(mq, high, committed)

    return list(await asyncio.gather(*(one(mq) for mq in sorted(subscribe_queues(route, topic)))))


async def progress(namesrv: str, group: str, topics: Sequence[str] | None = None) -> list[QueueProgress]:
    """Every queue of ``topics`` (default: the group's topics) with its offsets, sorted."""
    instance = ClientInstance(namesrv, instance_name="rmqrun-status")
    try:
        chosen = list(topics) if topics else await group_topics(instance, group)
        rows: list[QueueProgress] = []
        for topic in chosen:
            rows.extend(await topic_progress(instance, group, topic))
        return rows
    finally:
        await instance.close()


def render(rows: Sequence[QueueProgress], group: str) -> str:
    """A table like mqadmin consumerProgress, with totals."""
    if not rows:
        return f"group {group}: no topics found (give --topic, or has the group never consumed?)"
    header = ("topic", "broker", "queue", "broker offset", "consumer offset", "lag")
    body = [(r.mq.topic, r.mq.broker_name, str(r.mq.queue_id), str(r.broker_offset),
             "-" if r.consumer_offset is None else str(r.consumer_offset), str(r.lag)) for r in rows]
    total_lag = sum(r.lag for r in rows)
    total_high = sum(r.broker_offset for r in rows)
    total_committed = sum(r.consumer_offset or 0 for r in rows)
    body.append(("total", "", str(len(rows)), str(total_high), str(total_committed), str(total_lag)))
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    numeric = {2, 3, 4, 5}

    def fmt(row: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in numeric else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths)))

    rule = "  ".join("-" * w for w in widths)
    lines = [f"group {group}", fmt(header), rule, *(fmt(row) for row in body[:-1]), rule, fmt(body[-1])]
    return "\n".join(line.rstrip() for line in lines)
