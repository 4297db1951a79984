"""The admin calls ``rmqrun status`` uses to find a group's topics, against the embedded broker over TCP.

QUERY_TOPIC_CONSUME_BY_WHO (brokers without GET_CONSUME_STATS) and
GET_CONSUMER_CONNECTION_LIST (what the group's online clients subscribe to):
a consumer that heartbeats is found by both, a group nobody runs by neither.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.admin import AdminClient
from rmqrun.protocol.bodies import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError

GROUP = "CG_admin_groups"
TOPIC = "AdminGroups"


def test_a_heartbeating_consumer_is_seen_by_both_calls_and_an_unknown_group_by_neither(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "store") as eb:
            async with Producer(eb.namesrv_address, "PG_admin_groups") as producer:
                await producer.send(TOPIC, b"x")
            inst = ClientInstance(eb.namesrv_address, client_ip="127.0.0.1")
            inst.register_consumer(GROUP, data=lambda: ConsumerData(
                GROUP, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET,
                [SubscriptionData.build(TOPIC, "*"), SubscriptionData.retry(GROUP)]))
            try:
                await inst.start()
                await inst.subscribe_queues(TOPIC)  # heartbeats go to the brokers of known routes
                assert await inst.send_heartbeat() == 1
                admin = AdminClient(inst.pool, inst.namesrv)
                [addr] = (await admin.cluster_info()).all_masters()

                conn = await admin.consumer_connection(addr, GROUP)
                assert conn.client_ids == frozenset({inst.client_id})
                assert conn.topics == frozenset({TOPIC, f"%RETRY%{GROUP}"})
                assert GROUP in await admin.consumer_groups_of_topic(addr, TOPIC)

                with pytest.raises(BrokerError) as err:
                    await admin.consumer_connection(addr, "CG_nobody")
                assert err.value.code == ResponseCode.CONSUMER_NOT_ONLINE
                assert "CG_nobody" not in await admin.consumer_groups_of_topic(addr, TOPIC)
            finally:
                await inst.close()

    asyncio.run(main())
