"""A topic's queues change under a running consumer (``mqadmin updateTopic``): it follows the route.

Embedded broker over TCP, real workers. The topic grows from 2 to 4 queues: the
consumer takes the new ones and consumes what is sent there. It shrinks back to 2
readable queues: the consumer drops the other two, with their offsets committed at
what it handled, and nothing sent before is lost or handled twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


from rmqrun.client.instance import ClientInstance
from rmqrun.model import MessageQueue
from rmqrun.remoting.codes import RequestCode, ResponseCode
from tests.integration.broker_kit import Client
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "workers.orderly_record:handle"


async def _resize(eb, topic: str, read: int, write: int) -> None:  # type: ignore[no-untyped-def]
    c = await Client.connect(eb.namesrv_address, eb.broker_address)
    try:
        resp = await c.call(RequestCode.UPDATE_AND_CREATE_TOPIC, {
            "topic": topic, "defaultTopic": "TBW102", "readQueueNums": str(read), "writeQueueNums": str(write),
            "perm": "6", "topicFilterType": "SINGLE_TAG", "topicSysFlag": "0", "order": "false"})
        assert resp.code == ResponseCode.SUCCESS, resp.remark
    finally:
        await c.close()


def test_the_consumer_follows_queues_added_and_removed(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "RC", 10)
            cfg = consumer_config(eb.namesrv_address, "GRC", "RC", broker_suspend_max_time_ms=300,
                                  poll_name_server_interval_ms=200, rebalance_interval_ms=300)
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                engine = r.supervisor.engine
                assert engine is not None

                def held() -> list[int]:
                    return sorted(mq.queue_id for mq in engine.table if mq.topic == "RC")

                await wait_for(lambda: len(read_records(record)) >= 10, what="the first 10")
                assert held() == [0, 1]
                await _resize(eb, "RC", 4, 4)
                await wait_for(lambda: held() == [0, 1, 2, 3], what="the two new queues taken")
                await produce(eb.namesrv_address, "RC", 20, start=10)  # a fresh producer: four queues
                await wait_for(lambda: len(read_records(record)) >= 30, what="all 30")
                got = read_records(record)
                assert {q for q, _ in got} == {0, 1, 2, 3}, "the new queues were consumed"
                ends = {q: max(o for qq, o in got if qq == q) + 1 for q in range(4)}
                await wait_for(lambda: {mq.queue_id: engine.offset_store.read_memory(mq)
                                        for mq in engine.table if mq.topic == "RC"} == ends, what="commits")

                await _resize(eb, "RC", 2, 2)
                await wait_for(lambda: held() == [0, 1], what="queues 2 and 3 dropped")
                assert await r.stop() == 0
            got = read_records(record)
            assert len(got) == len(set(got)) == 30, "each message handled once"
            for q in range(4):
                assert sorted(o for qq, o in got if qq == q) == list(range(ends[q])), f"queue {q} has a gap"
            # the readable queues and the dropped ones are committed at their ends: nothing is redone later
            assert await committed_offsets(eb, "GRC", "RC") == {0: ends[0], 1: ends[1]}
            inst = ClientInstance(eb.namesrv_address, instance_name="probe-dropped")
            try:
                for q in (2, 3):
                    mq = MessageQueue("RC", eb.config.broker_name, q)
                    assert await inst.broker.query_consumer_offset(eb.broker_address, "GRC", mq) == ends[q]
            finally:
                await inst.close()
    asyncio.run(asyncio.wait_for(main(), 120))
