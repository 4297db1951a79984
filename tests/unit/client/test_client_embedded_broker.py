"""The typed client against rmqrun's embedded name server and broker, both directions for real.

One scenario walks the calls a push consumer and a producer make, in order:
auto-create by sending, heartbeat, offsets, pull, commit, send-back, locks,
queue offsets, search by time, view by id, unregister. Both sides use the
same header classes, so a field mismatch shows up as a failure here.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from rmqrun.broker.app import EmbeddedBroker
from rmqrun.client.broker import PullStatus, SendStatus
from rmqrun.client.instance import ClientInstance
from rmqrun.client.producer import Producer
from rmqrun.protocol.bodies import ConsumeFromWhere, ConsumerData, ConsumeType, MessageModel
from rmqrun.protocol.headers import PullMessageRequestHeader, pull_sys_flag
from rmqrun.protocol.subscription import SubscriptionData
from rmqrun.remoting.codes import ResponseCode
from rmqrun.remoting.errors import BrokerError
from rmqrun.remoting.message import decode_messages, scan_records

GROUP = "CG_client_e2e"
TOPIC = "ClientE2E"


def test_producer_and_consumer_calls_against_the_embedded_broker(tmp_path: Path) -> None:
    async def main() -> None:
        async with EmbeddedBroker(tmp_path / "store") as eb:
            async with Producer(eb.namesrv_address, "PG_client_e2e") as producer:
                sent = [await producer.send(TOPIC, f"m{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB",
                                            keys=f"k{i}") for i in range(8)]
                big = await producer.send(TOPIC, b"z" * 10000, tags="TagA")
                assert all(r.status is SendStatus.SEND_OK for r in sent + [big])
            # The topic exists now; a consumer instance learns its route like Java does.
            inst = ClientInstance(eb.namesrv_address, client_ip="127.0.0.1")
            sub = SubscriptionData.build(TOPIC, "TagA")
            inst.register_consumer(GROUP, data=lambda: ConsumerData(
                GROUP, ConsumeType.CONSUME_PASSIVELY, MessageModel.CLUSTERING,
                ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET, [sub, SubscriptionData.retry(GROUP)]))
            await inst.start()
            mqs = await inst.subscribe_queues(TOPIC)
            assert len(mqs) == 4 and {m.broker_name for m in mqs} == {big.queue.broker_name}
            assert await inst.send_heartbeat() == 1
            addr = inst.broker_address(big.queue.broker_name)
            assert addr is not None
            client = inst.broker
            assert await client.get_consumer_list(addr, GROUP) == [inst.client_id]

            mq = big.queue
            assert await client.query_consumer_offset(addr, GROUP, mq) in (None, 0)
            header = PullMessageRequestHeader(
                consumer_group=GROUP, topic=TOPIC, queue_id=mq.queue_id, queue_offset=0, max_msg_nums=32,
                sys_flag=pull_sys_flag(commit_offset=False, suspend=True, subscription=False), commit_offset=0,
                suspend_timeout_millis=1000, sub_version=sub.sub_version, expression_type="TAG",
                bname=mq.broker_name)
            result = await client.pull(addr, header)
            assert result.status is PullStatus.FOUND
            msgs = decode_messages(result.body, broker_name=mq.broker_name)
            assert msgs and all(m.queue_id == mq.queue_id for m in msgs)
            assert len(scan_records(result.body)) == len(msgs)
            big_msg = next(m for m in msgs if m.msg_id == big.msg_id)
            assert big_msg.body == b"z" * 10000, "compressed on the way in, inflated by the decoder"
            assert big_msg.offset_msg_id == big.offset_msg_id
            assert result.next_begin_offset == result.max_offset

            await client.update_consumer_offset(addr, GROUP, mq, result.next_begin_offset)  # oneway
            for _ in range(50):
                if await client.query_consumer_offset(addr, GROUP, mq) == result.next_begin_offset:
                    break
                await asyncio.sleep(0.02)
            assert await client.query_consumer_offset(addr, GROUP, mq) == result.next_begin_offset
            await client.update_consumer_offset(addr, GROUP, mq, result.next_begin_offset, oneway=False)

            assert await client.get_min_offset(addr, mq) == 0
            assert await client.get_max_offset(addr, mq) == result.max_offset
            # A 4.9.8 broker answers a future timestamp with the last message's offset (scenario d: max 5 -> 4).
            assert await client.search_offset(addr, mq, int(time.time() * 1000) + 3_600_000) == result.max_offset - 1
            assert 0 < await client.earliest_msg_store_time(addr, mq) <= int(time.time() * 1000)
            viewed = await client.view_message(big.offset_msg_id)
            assert viewed.msg_id == big.msg_id and viewed.body == b"z" * 10000

            await client.consumer_send_msg_back(addr, group=GROUP, commit_log_offset=big_msg.commit_log_offset,
                                                delay_level=0, origin_msg_id=big_msg.msg_id, origin_topic=TOPIC,
                                                max_reconsume_times=16, broker_name=mq.broker_name)

            locked = await client.lock_batch_mq(addr, GROUP, inst.client_id, mqs)
            assert locked == set(mqs)
            assert await client.lock_batch_mq(addr, GROUP, "someone-else", mqs) == set()
            await client.unlock_batch_mq(addr, GROUP, inst.client_id, mqs[:2])
            assert await client.lock_batch_mq(addr, GROUP, "someone-else", mqs) == set(mqs[:2])

            await inst.unregister_consumer(GROUP)
            # Like 4.9.8's ConsumerManageProcessor: an empty group is a SYSTEM_ERROR, not an empty list.
            with pytest.raises(BrokerError) as info:
                await client.get_consumer_list(addr, GROUP)
            assert info.value.code == ResponseCode.SYSTEM_ERROR
            await inst.close()
    asyncio.run(asyncio.wait_for(main(), 60))
