"""Where a group new to a queue starts: CONSUME_FROM_LAST_OFFSET and CONSUME_FROM_TIMESTAMP, end to end.

The broker gives a new group offset 0 while the queue's first message is still
"in memory" (Java's rule), so consume-from-where only matters once message 0
has aged out; the tests make that so with the broker's memory window (as
``test_broker_send_pull`` does). Embedded broker over TCP, real workers; the
handler records every (queue, offset) it is given.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path


from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)
from tests.waiting import eventually_async

HANDLER = "workers.orderly_record:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


def test_last_offset_skips_what_was_there_and_consumes_what_comes(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SP1", 10)
            eb.broker.memory_window = 0  # message 0 has aged out of memory: the group is really new
            cfg = consumer_config(eb.namesrv_address, "GSP1", "SP1", consume_from_where="CONSUME_FROM_LAST_OFFSET",
                                  broker_suspend_max_time_ms=300)
            async with Running(cfg, pool_config(HANDLER, workers=1)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (req,) = [q for q in engine.table.values() if q.mq.topic == "SP1"]
                assert req.next_offset == 10, "a new group at LAST_OFFSET starts at the queue's max offset"
                await produce(eb.namesrv_address, "SP1", 5, start=10)
                await wait_for(lambda: len(read_records(record)) >= 5, what="the 5 new messages")
                await wait_for(lambda: engine.offset_store.read_memory(req.mq) == 15, what="the commit at 15")
                assert await r.stop() == 0
            assert read_records(record) == [(0, o) for o in range(10, 15)], "nothing from before the start"
            assert (await committed_offsets(eb, "GSP1", "SP1"))[0] == 15
    run(main())


def test_timestamp_starts_at_the_first_message_stored_after_it(tmp_path: Path, record: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SP2", 5)
            last_before = time.time()
            # consume_timestamp has whole seconds; pick a second well after the first five (the
            # broker answers the message nearest in time, so the gap before must be the larger one)
            start_s = math.floor(last_before) + 2
            await eventually_async(lambda: time.time() >= start_s, what="the clock to reach the start second")
            await produce(eb.namesrv_address, "SP2", 5, start=5)
            eb.broker.memory_window = 0
            stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(start_s))
            cfg = consumer_config(eb.namesrv_address, "GSP2", "SP2", consume_from_where="CONSUME_FROM_TIMESTAMP",
                                  consume_timestamp=stamp, broker_suspend_max_time_ms=300)
            async with Running(cfg, pool_config(HANDLER, workers=1)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (req,) = [q for q in engine.table.values() if q.mq.topic == "SP2"]
                await wait_for(lambda: len(read_records(record)) >= 5, what="the messages after the timestamp")
                await wait_for(lambda: engine.offset_store.read_memory(req.mq) == 10, what="the commit at 10")
                assert await r.stop() == 0
            assert read_records(record) == [(0, o) for o in range(5, 10)], "only what was stored after the time"
            assert (await committed_offsets(eb, "GSP2", "SP2"))[0] == 10
    run(main())


def test_a_topic_created_after_the_start_is_picked_up_from_its_first_message(tmp_path: Path, record: Path) -> None:
    """Subscribed to a topic that does not exist yet: the consumer starts anyway (it warns), and once a
    producer creates the topic it takes the queues and consumes from offset 0, even with
    CONSUME_FROM_LAST_OFFSET (message 0 is in memory, so the broker gives the new group 0): nothing
    sent before the consumer noticed the topic is skipped."""

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            cfg = consumer_config(eb.namesrv_address, "GSP3", "SP3", consume_from_where="CONSUME_FROM_LAST_OFFSET",
                                  broker_suspend_max_time_ms=300, poll_name_server_interval_ms=200,
                                  rebalance_interval_ms=300)
            r = Running(cfg, pool_config(HANDLER, workers=1))
            r.task = asyncio.ensure_future(r.supervisor.run())  # not Running's start: it waits for queues
            try:
                await wait_for(lambda: r.supervisor.ready or r.task.done(), what="the supervisor to start")
                assert not r.task.done(), "rmqrun gave up on a topic that does not exist yet"
                engine = r.supervisor.engine
                assert engine is not None
                assert not [mq for mq in engine.table if mq.topic == "SP3"]
                await produce(eb.namesrv_address, "SP3", 12)
                await wait_for(lambda: len(read_records(record)) >= 12, what="the 12 messages")
                queues = sorted(mq for mq in engine.table if mq.topic == "SP3")
                assert len(queues) == 2
                await wait_for(lambda: sum(engine.offset_store.read_memory(mq) for mq in queues) == 12,
                               what="the commits")
            finally:
                assert await r.stop() == 0
            per_queue: dict[int, list[int]] = {}
            for qid, offset in read_records(record):
                per_queue.setdefault(qid, []).append(offset)
            # (how the 12 spread over the two queues depends on when the producer saw the new route)
            ends = {q: eb.broker.store.max_offset("SP3", q) for q in (0, 1)}
            assert sum(ends.values()) == 12
            assert {q: sorted(o) for q, o in per_queue.items()} == {q: list(range(n)) for q, n in ends.items()}, \
                "every message from offset 0, each once"
            assert await committed_offsets(eb, "GSP3", "SP3") == ends
    run(main())


def test_a_queue_whose_committed_offset_cannot_be_read_is_not_taken_at_a_guess(tmp_path: Path, record: Path) -> None:
    """The broker refuses QUERY_CONSUMER_OFFSET for the topic: rebalance leaves the queue alone (it would
    otherwise start at consume-from-where, here the first offset, and handle 0..5 again), and takes it
    at the group's committed offset once the broker answers."""
    from rmqrun.broker.processors.common import answer
    from rmqrun.client.instance import ClientInstance
    from rmqrun.model import MessageQueue
    from rmqrun.remoting.codes import RequestCode, ResponseCode

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1) as eb:
            await produce(eb.namesrv_address, "SOR", 10)
            mq = MessageQueue("SOR", eb.config.broker_name, 0)
            probe = ClientInstance(eb.namesrv_address, instance_name="probe")
            try:
                await probe.broker.update_consumer_offset(eb.broker_address, "GSOR", mq, 6, oneway=False)
            finally:
                await probe.close()
            refusing = [True]
            refused = [0]
            server = eb.broker.server
            real_query = server.processors[RequestCode.QUERY_CONSUMER_OFFSET]

            async def query(conn, cmd):  # type: ignore[no-untyped-def]
                if refusing[0] and cmd.ext_fields.get("topic") == "SOR":
                    refused[0] += 1
                    return answer(cmd, ResponseCode.SYSTEM_ERROR, "offset store unavailable (test)")
                return await real_query(conn, cmd)
            server.register(RequestCode.QUERY_CONSUMER_OFFSET, query)
            cfg = consumer_config(eb.namesrv_address, "GSOR", "SOR", rebalance_interval_ms=300,
                                  broker_suspend_max_time_ms=300)
            async with Running(cfg, pool_config(HANDLER)) as r:  # it holds the group's retry queue
                engine = r.supervisor.engine
                assert engine is not None
                await wait_for(lambda: refused[0] >= 3, what="three refused offset queries")
                assert mq not in engine.table, "the queue was taken without its committed offset"
                assert read_records(record) == []
                refusing[0] = False
                await wait_for(lambda: mq in engine.table, what="the queue taken once its offset is known")
                await wait_for(lambda: len(read_records(record)) >= 4, what="offsets 6..9")
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the commit at 10")
                assert await r.stop() == 0
            assert sorted(read_records(record)) == [(0, 6), (0, 7), (0, 8), (0, 9)]
            assert (await committed_offsets(eb, "GSOR", "SOR"))[0] == 10
    run(main())
