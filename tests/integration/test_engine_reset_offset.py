"""RESET_CONSUMER_CLIENT_OFFSET sent by the broker to a running consumer (what ``mqadmin resetOffsetByTime``
makes a broker do): the consumer drops the queue, stores the new offset, takes the queue again there.

Embedded broker over TCP, real workers. The request travels the way a broker sends
it: over the consumer's own connection, found in the broker's consumer table.
"""

from __future__ import annotations

import asyncio
from pathlib import Path


from rmqrun.model import MessageQueue
from rmqrun.protocol.bodies import ResetOffsetBody
from rmqrun.remoting.codes import RequestCode
from rmqrun.remoting.frame import RemotingCommand
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "workers.orderly_record:handle"


def test_a_reset_from_the_broker_moves_the_consumer_back_and_it_consumes_again_from_there(
        tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "RS", 10)
            cfg = consumer_config(eb.namesrv_address, "GRS", "RS", broker_suspend_max_time_ms=300,
                                  rebalance_interval_ms=300)
            async with Running(cfg, pool_config(HANDLER, workers=1)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                mq = MessageQueue("RS", eb.config.broker_name, 0)
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the first pass committed")
                await wait_for(lambda: eb.broker.store.consumer_offsets.query("GRS", "RS", 0) == 10,
                               what="the first pass persisted")
                first_req = engine.table[mq]

                group = eb.broker.consumers.group("GRS")
                assert group is not None
                (channel,) = group.channels.values()
                reset = RemotingCommand(RequestCode.RESET_CONSUMER_CLIENT_OFFSET,
                                        {"topic": "RS", "group": "GRS", "timestamp": "0", "isForce": "true"},
                                        body=ResetOffsetBody({mq: 4}).encode(), language="JAVA")
                await channel.conn.oneway(reset)  # as Broker2Client.resetOffset sends it: no answer comes

                # the queue is taken again (a new pull request) and offsets 4..9 come again, in order
                await wait_for(lambda: len(read_records(record)) >= 16, what="offsets 4..9 again")
                assert engine.table[mq] is not first_req, "the queue was dropped and taken again"
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the second pass committed")
                assert await r.stop() == 0
            assert read_records(record) == [(0, o) for o in range(10)] + [(0, o) for o in range(4, 10)]
            assert (await committed_offsets(eb, "GRS", "RS"))[0] == 10
    asyncio.run(asyncio.wait_for(main(), 120))
