"""The POP part of ``rmqrun status``: each topic's consume mode and, for POP, every live client's figures.

The mode of a (group, topic) is what the topic's masters answer to
GET_ALL_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode`` writes it; no entry
means PULL). A master that answers REQUEST_CODE_NOT_SUPPORTED is a 4.x broker,
one that does not answer at all says nothing: the mode is then unknown (None),
never an error. POP when any master says POP (each keeps its own table).

When some topic is in POP mode, every client of the group listed by a master
(GET_CONSUMER_LIST_BY_GROUP) is asked for its running info through that
broker (GET_CONSUMER_RUNNING_INFO, as ``mqadmin consumerStatus`` asks it):
rmqrun's POP consumer puts its un-acked count, acks, nacks, invisible-time
extensions and revived messages in ``properties`` and its assignments in
``mqPopTable``. A client that does not answer is shown as unknown.

Revived messages, broker side: every message a broker revives goes into the
group's pop retry topic of the topic (``%RETRY%<group>_<topic>``, or the V2
``+`` naming), so the max offsets of those topics count every revive on any
5.x broker (no such topic yet: 0). The last hour's count is the embedded
broker's own statistic (POP_REVIVE_NUMS of ``topic@group``, read with
VIEW_BROKER_STATS_DATA); Apache RocketMQ's BrokerStatsManager has no such item
and answers "not exist": unknown.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from typing import Any, Mapping, Sequence

from rmqrun.client.admin import AdminClient
from rmqrun.client.assignment import AssignmentClient
from rmqrun.client.instance import ClientInstance
from rmqrun.client.route import MASTER_ID, subscribe_queues
from rmqrun.consumer.running_info import consume_mode_of
from rmqrun.errors import RmqrunError
from rmqrun.model import MessageQueue
from rmqrun.namespace import unwrap_queue, wrap
from rmqrun.protocol.admin import stats_key
from rmqrun.protocol.assignment import MessageRequestMode, MessageRequestModeTable
from rmqrun.protocol.bodies import message_queue_from
from rmqrun.topic_names import is_retry_topic, pop_retry_topic
from rmqrun.remoting.errors import TopicNotExistError
from rmqrun.remoting.security import ClientSecurity

TIMEOUT = 5.0
#: the broker's statistic of messages revived into a pop retry topic, per topic@group
POP_REVIVE_NUMS = "POP_REVIVE_NUMS"
#: running-info properties rmqrun's POP consumer sets (rmqrun.consumer.pop_push), shown as they are
POP_PROPERTIES = {"popUnacked": "unacked", "popAcks": "acks", "popNacks": "nacks",
                  "popInvisibleExtensions": "invisible_extensions", "popRevived": "revived",
                  "popInvisibleTime": "invisible_time_ms", "popThresholdForQueue": "threshold_for_queue",
                  "popBatchNums": "batch_size"}
_FAILURES = (RmqrunError, OSError, asyncio.TimeoutError)


@dataclass(frozen=True)
class TopicMode:
    topic: str
    #: "POP" or "PULL"; None: unknown (a 4.x broker, or no master answered)
    mode: str | None
    pop_share_queue_num: int | None = None
    #: messages the brokers revived for the group on this topic in the last hour; None: unknown
    revived_last_hour: int | None = None
    #: messages ever revived: the max offsets of the pop retry topic(s); None: unknown
    revived_total: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"topic": self.topic, "mode": self.mode, "pop_share_queue_num": self.pop_share_queue_num,
                "broker_revived_last_hour": self.revived_last_hour, "broker_revived_total": self.revived_total}


@dataclass(frozen=True)
class PopAssignment:
    mq: MessageQueue
    wait_ack_count: int
    dropped: bool
    last_pop_ms: int

    def to_json(self) -> dict[str, object]:
        return {"topic": self.mq.topic, "broker": self.mq.broker_name, "queue": self.mq.queue_id,
                "unacked": self.wait_ack_count, "dropped": self.dropped, "last_pop_timestamp": self.last_pop_ms}


@dataclass(frozen=True)
class PopClient:
    client_id: str
    #: False: the client did not answer running info (or is not a POP consumer): its figures are unknown
    answered: bool
    #: POP_PROPERTIES' names -> values (ints where the client sent a number)
    figures: dict[str, int | str] = field(default_factory=dict)
    assignments: tuple[PopAssignment, ...] = ()
    #: its consume mode as rmqrun describes it (``orderly by POP``); None: not an rmqrun client, or unknown
    mode: str | None = None

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"client_id": self.client_id, "answered": self.answered, "mode": self.mode}
        out.update({name: self.figures.get(name) for name in POP_PROPERTIES.values()})
        out["assignments"] = [a.to_json() for a in self.assignments]
        return out


@dataclass(frozen=True)
class PopView:
    topics: tuple[TopicMode, ...] = ()
    clients: tuple[PopClient, ...] = ()

    @property
    def shown(self) -> bool:
        """Whether the text output has anything to say: some topic not (known to be) PULL."""
        return any(t.mode != MessageRequestMode.PULL.value for t in self.topics)

    def to_json(self) -> dict[str, object]:
        return {"consume_modes": [t.to_json() for t in self.topics],
                "pop_clients": [c.to_json() for c in self.clients]}


def _number(value: Any) -> int | str:
    try:
        return int(str(value))
    except ValueError:
        return str(value)


def client_from_running_info(client_id: str, info: Mapping[str, Any]) -> PopClient:
    """The POP figures of one ConsumerRunningInfo body; not answered when it is not a POP consumer's.
    A Java 5.x push consumer in POP mode sends ``mqPopTable`` (PopProcessQueueInfo, the same fields) but none
    of rmqrun's ``pop*`` properties: its assignments are shown, its counts are not known."""
    props = info.get("properties") or {}
    if not isinstance(props, Mapping) or (props.get("consumeMode") != "POP" and not info.get("mqPopTable")):
        return PopClient(client_id, False)
    figures = {name: _number(props[key]) for key, name in POP_PROPERTIES.items() if key in props}
    table = info.get("mqPopTable") or {}
    assignments = []
    for key, value in (table.items() if isinstance(table, Mapping) else ()):
        if not isinstance(value, Mapping):
            continue
        assignments.append(PopAssignment(message_queue_from(key), int(value.get("waitAckCount", 0)),
                                         bool(value.get("droped", False)), int(value.get("lastPopTimestamp", 0))))
    mode = consume_mode_of(props)
    return PopClient(client_id, True, figures, tuple(sorted(assignments, key=lambda a: a.mq)),
                     str(mode) if mode else None)


def revived_last_hour(per_master: list[int | None]) -> int | None:
    """The last hour's revives of every master together: known only when each of them reported its figure.

    An Apache broker keeps no ``POP_REVIVE_NUMS`` statistic (it answers "not exist": None), so there the figure is
    unknown, also for a group that never had a message revived: 0 is shown only where brokers said 0 (issue #32:
    "last hour 0" for some groups and "unknown" for others on the same 5.3.3 broker)."""
    if not per_master or any(n is None for n in per_master):
        return None
    return sum(n for n in per_master if n is not None)


class _Asker:
    """One status round's questions, each broker's mode table asked once."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        self.admin = AdminClient(instance.pool, instance.namesrv, timeout=TIMEOUT)
        self.assign = AssignmentClient(instance.pool, timeout=TIMEOUT)
        self._tables: dict[str, MessageRequestModeTable | None] = {}

    async def _table(self, addr: str) -> MessageRequestModeTable | None:
        if addr not in self._tables:
            try:
                self._tables[addr] = await self.assign.message_request_modes(addr)
            except _FAILURES:  # REQUEST_CODE_NOT_SUPPORTED (4.x) or no answer: this broker does not say
                self._tables[addr] = None
        return self._tables[addr]

    async def _revived(self, addr: str, topic: str) -> int | None:
        try:
            return (await self.admin.stats_data(addr, POP_REVIVE_NUMS, stats_key(topic, self.group))).stats_hour.sum
        except _FAILURES:
            return None

    async def _revived_total(self, topic: str) -> int | None:
        """The messages stored in the group's pop retry topics of ``topic`` (both namings): every one is a
        revive, and their max offsets count them, whatever retention deleted since."""
        total = 0
        for name in (pop_retry_topic(self.group, topic), pop_retry_topic(self.group, topic, v2=True)):
            try:
                route = await self.instance.update_route(name)
            except TopicNotExistError:
                continue  # nothing revived under this naming yet
            except _FAILURES:
                return None
            for mq in subscribe_queues(route, name):
                addr = route.master_address(mq.broker_name)
                if addr is None:
                    return None
                try:
                    total += await self.instance.broker.get_max_offset(addr, mq, timeout=TIMEOUT)
                except _FAILURES:
                    return None
        return total

    async def topic_mode(self, topic: str) -> TopicMode:
        try:
            route = await self.instance.update_route(topic)
        except _FAILURES:
            return TopicMode(topic, None)
        masters = sorted({a for bd in route.broker_datas if (a := bd.broker_addrs.get(MASTER_ID))})
        modes = []
        for addr in masters:
            table = await self._table(addr)
            if table is not None:
                body = table.modes.get(topic, {}).get(self.group)
                modes.append((MessageRequestMode.PULL.value, None) if body is None
                             else (MessageRequestMode.parse(body.mode).value, body.pop_share_queue_num))
        pops = [m for m in modes if m[0] == MessageRequestMode.POP.value]
        if pops:
            hour = revived_last_hour([await self._revived(addr, topic) for addr in masters])
            return TopicMode(topic, "POP", pops[0][1], hour, await self._revived_total(topic))
        if modes and len(modes) == len(masters):
            return TopicMode(topic, MessageRequestMode.PULL.value)
        return TopicMode(topic, None)

    async def clients(self) -> tuple[PopClient, ...]:
        where: dict[str, str] = {}
        try:
            masters = (await self.admin.cluster_info()).all_masters()
        except _FAILURES:
            return ()
        for addr in masters:
            try:
                for cid in await self.instance.broker.get_consumer_list(addr, self.group, timeout=TIMEOUT):
                    where.setdefault(cid, addr)
            except _FAILURES:
                continue
        return tuple(await asyncio.gather(*(self._client(cid, addr) for cid, addr in sorted(where.items()))))

    async def _client(self, client_id: str, addr: str) -> PopClient:
        try:
            info = await self.admin.consumer_running_info(addr, self.group, client_id)
        except _FAILURES:
            return PopClient(client_id, False)
        try:
            return client_from_running_info(client_id, info)
        except (RmqrunError, TypeError, ValueError):
            return PopClient(client_id, False)


async def pop_view(namesrv: str, group: str, topics: Sequence[str], security: ClientSecurity | None = None, *,
                   namespace: str | None = None) -> PopView:
    """The consume mode of each of ``topics`` (plain names; retry topics are always PULL and left out) and,
    when one is POP, the group's clients' POP figures. Never raises for what the cluster does not say."""
    wanted = [t for t in dict.fromkeys(topics) if not is_retry_topic(t)]
    if not wanted:
        return PopView()
    instance = ClientInstance(namesrv, instance_name="rmqrun-status-pop", security=security)
    try:
        asker = _Asker(instance, wrap(namespace, group))
        modes = [await asker.topic_mode(wrap(namespace, t)) for t in wanted]
        modes = [replace(m, topic=t) for t, m in zip(wanted, modes)]
        clients = await asker.clients() if any(m.mode == "POP" for m in modes) else ()
        if namespace:
            clients = tuple(PopClient(c.client_id, c.answered, c.figures, tuple(
                PopAssignment(unwrap_queue(namespace, a.mq), a.wait_ack_count, a.dropped, a.last_pop_ms)
                for a in c.assignments))
                for c in clients)
        return PopView(tuple(modes), clients)
    finally:
        await instance.close()
