"""Who is consuming: consumer groups, their members' connections and subscriptions.

Mirrors ``ConsumerManager`` / ``ConsumerGroupInfo`` / ``ClientHousekeepingService``
(4.9.8). A member is a *connection* (Java keys by Netty channel) carrying a
client id; HEART_BEAT registers or refreshes it, UNREGISTER_CLIENT or a closed
connection removes it, and a member silent for ``channel_expired_ms`` (120 s)
is dropped by a scan every ``channel_scan_interval_ms`` (10 s).

Whenever the member set or the subscriptions of a group change, every member
still connected gets NOTIFY_CONSUMER_IDS_CHANGED (oneway, over its own
connection) so it rebalances now instead of at its next 20 s tick. One
deliberate difference: RocketMQ's expiry scan closes the silent channel
without telling the others (they notice at their next rebalance); we notify
them, because a membership change is a membership change.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable

from loguru import logger

from rmqrun.protocol.bodies import ConsumerData, ConsumeFromWhere, ConsumeType, MessageModel
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import RequestCode
from rmqrun.remoting.connection import Connection
from rmqrun.remoting.frame import RemotingCommand
from rmqrun.remoting.message_props import java_string_hash

def broker_subscription(sub: SubscriptionData) -> SubscriptionData:
    """A heartbeat subscription as the broker should filter by it.

    The codes are recomputed from the tags when they disagree: the C++ client
    sends ``codeSet: [0,0]`` (codes never computed), and filtering by that
    would drop every tagged message. RocketMQ gets away with it only because
    the C++ client also puts the expression on each pull.
    """
    if sub.tags:
        codes = tuple(java_string_hash(t) for t in sub.tags)
        if set(codes) != set(sub.codes):
            return SubscriptionData(sub.topic, sub.sub_string, sub.tags, codes, sub.sub_version,
                                    sub.expression_type, sub.class_filter_mode)
    return sub


@dataclass(slots=True)
class ClientChannel:
    """One member: its connection, what it calls itself, and when it last spoke."""

    conn: Connection
    client_id: str
    language: str
    version: int
    last_update: float = field(default_factory=time.monotonic)


@dataclass(slots=True)
class ConsumerGroup:
    name: str
    consume_type: ConsumeType
    message_model: MessageModel
    consume_from_where: ConsumeFromWhere
    subscriptions: dict[str, SubscriptionData] = field(default_factory=dict)
    channels: dict[Connection, ClientChannel] = field(default_factory=dict)

    def client_ids(self) -> list[str]:
        return [c.client_id for c in self.channels.values()]

    def find_channel(self, client_id: str) -> ClientChannel | None:
        return next((c for c in self.channels.values() if c.client_id == client_id), None)

    def update_channel(self, info: ClientChannel) -> bool:
        """Add or refresh a member; True when it is new (ConsumerGroupInfo.updateChannel)."""
        old = self.channels.get(info.conn)
        if old is None:
            self.channels[info.conn] = info
            return True
        if old.client_id != info.client_id:
            self.channels[info.conn] = info  # same connection, new id: replaced, not "changed"
            return False
        old.last_update = info.last_update
        return False

    def update_subscriptions(self, subs: Iterable[SubscriptionData]) -> bool:
        """Newer versions replace older ones; topics no longer mentioned are dropped."""
        changed = False
        seen: set[str] = set()
        for sub in subs:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None:
                self.subscriptions[sub.topic] = sub
                changed = True
            elif sub.sub_version > old.sub_version:
                self.subscriptions[sub.topic] = sub  # a version bump alone is not a "change"
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed


class ConsumerManager:
    def __init__(self, *, channel_expired_ms: int = 120_000, notify: bool = True,
                 notify_enabled_for: Callable[[str], bool] | None = None) -> None:
        self.groups: dict[str, ConsumerGroup] = {}
        self.producers: dict[str, dict[Connection, ClientChannel]] = {}
        self.channel_expired_s = channel_expired_ms / 1000.0
        self.notify_enabled = notify
        self._notify_enabled_for = notify_enabled_for or (lambda group: True)
        self._tasks: set[asyncio.Task[None]] = set()
        #: Counts NOTIFY_CONSUMER_IDS_CHANGED sent, for tests and logs.
        self.notifications_sent = 0

    # ------------------------------------------------------------------ queries

    def group(self, name: str) -> ConsumerGroup | None:
        return self.groups.get(name)

    def find_subscription(self, group: str, topic: str) -> SubscriptionData | None:
        info = self.groups.get(group)
        return info.subscriptions.get(topic) if info else None

    def client_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return info.client_ids() if info else []

    def groups_consuming(self, topic: str) -> list[str]:
        return [name for name, g in self.groups.items() if topic in g.subscriptions]

    # ------------------------------------------------------------------ changes

    def register_consumer(self, data: ConsumerData, channel: ClientChannel) -> bool:
        info = self.groups.get(data.group_name)
        if info is None:
            info = ConsumerGroup(data.group_name, data.consume_type, data.message_model, data.consume_from_where)
            self.groups[data.group_name] = info
        info.consume_type = data.consume_type
        info.message_model = data.message_model
        info.consume_from_where = data.consume_from_where
        new_member = info.update_channel(channel)
        new_subs = info.update_subscriptions(broker_subscription(s) for s in data.subscription_data_set)
        if new_member or new_subs:
            logger.debug("group {} changed: member {} ({}), subscriptions {}", data.group_name, channel.client_id,
                         "new" if new_member else "known", sorted(info.subscriptions))
            self._notify_group(info)
        return new_member or new_subs

    def register_producer(self, group: str, channel: ClientChannel) -> None:
        members = self.producers.setdefault(group, {})
        old = members.get(channel.conn)
        if old is not None and old.client_id == channel.client_id:
            old.last_update = channel.last_update
        else:
            members[channel.conn] = channel

    def unregister_consumer(self, group: str, conn: Connection) -> None:
        info = self.groups.get(group)
        if info is None:
            return
        info.channels.pop(conn, None)
        if not info.channels:
            del self.groups[group]
        self._notify_group(info)

    def unregister_producer(self, group: str, conn: Connection) -> None:
        members = self.producers.get(group)
        if members is not None:
            members.pop(conn, None)
            if not members:
                del self.producers[group]

    def connection_closed(self, conn: Connection) -> None:
        """A member's connection is gone: drop it from every group and tell the rest."""
        for name in list(self.groups):
            info = self.groups[name]
            if info.channels.pop(conn, None) is not None:
                if not info.channels:
                    del self.groups[name]
                self._notify_group(info)
        for group in list(self.producers):
            self.unregister_producer(group, conn)

    def scan_expired(self, now: float | None = None) -> list[str]:
        """Drop members silent for longer than the expiry; returns their client ids."""
        now = time.monotonic() if now is None else now
        dropped: list[str] = []
        for name in list(self.groups):
            info = self.groups[name]
            stale = [c for c in info.channels.values() if now - c.last_update > self.channel_expired_s]
            for channel in stale:
                logger.info("consumer {} of group {} silent for {:.0f}s: removed", channel.client_id, name,
                            now - channel.last_update)
                del info.channels[channel.conn]
                dropped.append(channel.client_id)
                channel.conn.close()
            if stale:
                if not info.channels:
                    del self.groups[name]
                self._notify_group(info)
        for group in list(self.producers):
            for conn, channel in list(self.producers[group].items()):
                if now - channel.last_update > self.channel_expired_s:
                    self.unregister_producer(group, conn)
        return dropped

    # ------------------------------------------------------------------ notify

    def _notify_group(self, info: ConsumerGroup) -> None:
        if not (self.notify_enabled and self._notify_enabled_for(info.name)):
            return
        for channel in list(info.channels.values()):
            if channel.conn.closed:
                continue
            task = asyncio.get_running_loop().create_task(self._notify(channel.conn, info.name))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _notify(self, conn: Connection, group: str) -> None:
        cmd = RemotingCommand(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": group}, language="JAVA")
        try:
            await conn.oneway(cmd)
            self.notifications_sent += 1
        except Exception as exc:  # the member is going away; its close event cleans up
            logger.debug("notify {} of {} failed: {!r}", conn.name, group, exc)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        self._tasks.clear()
