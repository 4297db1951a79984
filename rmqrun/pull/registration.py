"""An offset-committing pull consumer's group, registered with the brokers as Java's ``DefaultLitePullConsumer`` is.

``mqadmin consumerProgress`` and RocketMQ Dashboard find consumer groups
through their ``%RETRY%<group>`` topics, which a broker creates when a
consumer of the group heartbeats. A pull consumer that only commits offsets
(a Spark stream with ``group``, a backfill) never heartbeated, so its group
stayed invisible: ``consumerProgress -g G`` failed for want of a route to
``%RETRY%G`` and the group list left it out.

So from its first commit until it closes, a pull consumer heartbeats its
group with the fields Java's lite pull consumer sends (``CONSUME_ACTIVELY``,
``CLUSTERING``, ``CONSUME_FROM_LAST_OFFSET``, unit mode off) and a
subscription per topic it used (the expression it last pulled with, else
``*``; ``subVersion`` 0 as ``DefaultMQPullConsumer`` sends), and unregisters
when it closes. A consumer that never commits (Spark executors, ``rmqrun
read``, a batch query) never registers: nothing of its group changes.

One exception keeps what rmqrun promised before: a pull consumer committing
for a group whose push consumers are online (a backfill for ``rmqrun run``'s
group) does not register, since the push consumers' rebalance would count it
and hand it queues it never pulls. The group is visible through them anyway.
This is decided when it first commits; ``register=False`` opts out for good
(for a backfill whose group's push consumers may start while it runs).
"""

from __future__ import annotations

import time
from typing import Any

from loguru import logger

from rmqrun.client.admin import AdminClient
from rmqrun.client.instance import ClientInstance, ConsumerCallbacks
from rmqrun.protocol.headers import GetConsumerRunningInfoRequestHeader
from rmqrun.protocol.bodies import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from rmqrun.protocol.subscription import SUB_ALL, SubscriptionData
from rmqrun.remoting.errors import RemotingError

#: the consume type push consumers heartbeat with
PUSH = ConsumeType.CONSUME_PASSIVELY.value
#: PROP_CLIENT_VERSION, as rmqrun's push consumer reports it (MQVersion.Version.V4_9_8)
CLIENT_VERSION = "V4_9_8"


class GroupRegistration:
    """The heartbeat registration of one pull consumer's group (names as on the wire)."""

    def __init__(self, instance: ClientInstance, group: str) -> None:
        self.instance = instance
        self.group = group
        #: topic -> tag expression, in the order first used
        self._topics: dict[str, str] = {}
        #: None: not decided yet; True: heartbeating; False: declined (push consumers online)
        self.registered: bool | None = None
        #: epoch ms, PROP_CONSUMER_START_TIMESTAMP
        self.started_at_ms = int(time.time() * 1000)

    def use_topic(self, topic: str, expression: str | None = None) -> None:
        """Note a topic the consumer pulls from or commits for; the next heartbeat names it."""
        if expression is not None or topic not in self._topics:
            self._topics[topic] = expression or SUB_ALL

    def consumer_data(self) -> ConsumerData:
        """What every heartbeat says of the group (called at each one: current subscriptions)."""
        subs = [SubscriptionData.build(t, e, sub_version=0) for t, e in self._topics.items()]
        return ConsumerData(self.group, ConsumeType.CONSUME_ACTIVELY, MessageModel.CLUSTERING,
                            ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET, subs, False)

    async def on_commit(self) -> None:
        """The first commit registers the group (unless push consumers hold it) and heartbeats at once;
        later commits change nothing. A failed heartbeat is retried by the periodic one."""
        if self.registered is not None:
            return
        if await self._push_consumers_online():
            self.registered = False
            logger.info("group {}: push consumers are online; this pull consumer commits without joining the "
                        "group (it would be counted in their rebalance)", self.group)
            return
        self.registered = True
        self.instance.register_consumer(self.group, data=self.consumer_data,
                                        callbacks=ConsumerCallbacks(running_info=self.running_info))
        await self.instance.send_heartbeat()

    async def running_info(self, header: GetConsumerRunningInfoRequestHeader) -> dict[str, Any]:
        """GET_CONSUMER_RUNNING_INFO (``mqadmin consumerStatus``, the Dashboard's client view) as Java's lite
        pull consumer answers it: its properties, with the ``PROP_*`` keys the Java tools read (one missing is
        a NullPointerException there), and its subscriptions; no process queues, no consume statistics."""
        props = {
            "consumerGroup": self.group, "messageModel": MessageModel.CLUSTERING.value,
            "consumeFromWhere": ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET.value, "unitMode": "false",
            "PROP_NAMESERVER_ADDR": ";".join(self.instance.namesrv.addresses) + ";",
            "PROP_CONSUME_TYPE": ConsumeType.CONSUME_ACTIVELY.value, "PROP_CONSUMEORDERLY": "false",
            "PROP_THREADPOOL_CORE_SIZE": "1", "PROP_CONSUMER_START_TIMESTAMP": str(self.started_at_ms),
            "PROP_CLIENT_VERSION": CLIENT_VERSION,
        }
        body: dict[str, Any] = {"jstack": ""} if header.jstack_enable else {}
        body.update({"mqTable": {}, "properties": props, "statusTable": {},
                     "subscriptionSet": [s.to_json() for s in self.consumer_data().subscription_data_set]})
        return body

    async def _push_consumers_online(self) -> bool:
        admin = AdminClient(self.instance.pool, self.instance.namesrv, timeout=self.instance.broker.timeout)
        for addr in self.instance.broker_addresses(master_only=True):
            try:
                conn = await admin.consumer_connection(addr, self.group)
            except RemotingError:  # nobody online there (206), a broker that does not say, a refusal
                continue
            if conn.consume_type == PUSH and self.instance.client_id not in conn.client_ids:
                return True
        return False

    async def close(self) -> None:
        """Leave the group (UNREGISTER_CLIENT to every broker), as Java's shutdown does."""
        if self.registered:
            self.registered = None
            await self.instance.unregister_consumer(self.group)
