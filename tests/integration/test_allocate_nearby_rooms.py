"""MACHINE_ROOM_NEARBY across two rooms: two brokers (one per room), three instances.

Both brokers register with one name server, as a two-master cluster's do. Instances
``east`` ×2 and ``west`` ×1 join one group with ``--allocate MACHINE_ROOM_NEARBY``:
each room's queues go to that room's instances; once the west instance stops, the
west queues are shared by the east ones. Every message is handled once throughout.
"""

from __future__ import annotations

import asyncio
import os
from contextlib import AsyncExitStack
from pathlib import Path

from rmqrun.broker.namesrv import BrokerEntry
from rmqrun.broker.store.topic_configs import TopicConfig
from rmqrun.model import MessageQueue
from tests.integration.engine_kit import Running, broker, consumer_config, pool_config, produce, wait_for

TOPIC, GROUP, QUEUES = "NB", "GNB", 3
HANDLER = "tests.integration.handlers.where_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 180))


def handled(path: Path) -> list[tuple[str, int, int]]:
    if not path.exists():
        return []
    return [(b, int(q), int(o)) for b, q, o in (line.split() for line in path.read_text().splitlines())]


def owned(r: Running) -> set[MessageQueue]:
    engine = r.supervisor.engine
    return {mq for mq in engine.table if mq.topic == TOPIC} if engine is not None else set()


def test_each_room_keeps_its_queues_and_a_room_left_empty_is_shared(tmp_path: Path) -> None:
    where = tmp_path / "where.txt"
    os.environ["PROBE_WHERE"] = str(where)  # workers inherit the supervisor's environment

    async def main() -> None:
        async with broker(tmp_path / "e", broker_name="east-broker-a") as east, \
                broker(tmp_path / "w", broker_name="west-broker-b") as west:
            east.namesrv.attach(BrokerEntry(west.config.cluster_name, west.config.broker_name,
                                            west.broker_address, west.broker.topics))
            for eb in (east, west):
                eb.broker.topics.put(TopicConfig(TOPIC, QUEUES, QUEUES))
            east_q = {MessageQueue(TOPIC, "east-broker-a", i) for i in range(QUEUES)}
            west_q = {MessageQueue(TOPIC, "west-broker-b", i) for i in range(QUEUES)}

            def instance(room: str) -> Running:
                cfg = consumer_config(east.namesrv_address, GROUP, TOPIC, allocate_strategy="MACHINE_ROOM_NEARBY",
                                      machine_room=room, rebalance_interval_ms=500)
                return Running(cfg, pool_config(HANDLER, workers=1))

            async with AsyncExitStack() as stack:
                a = await stack.enter_async_context(instance("east"))
                b = await stack.enter_async_context(instance("east"))
                c = instance("west")
                await c.__aenter__()
                try:
                    for r, room in ((a, "east"), (b, "east"), (c, "west")):
                        assert r.supervisor.engine.instance.client_id.split("@")[1].startswith(room + "-")

                    def split_by_room() -> bool:
                        return owned(a) | owned(b) == east_q and not owned(a) & owned(b) and owned(c) == west_q
                    await wait_for(split_by_room, 60, what="east queues on the east instances, west on west")
                    assert owned(a) and owned(b)
                    await produce(east.namesrv_address, TOPIC, 30)
                    await wait_for(lambda: len(handled(where)) >= 30, 60, what="the first 30")
                    first = handled(where)
                    assert {(br, q) for br, q, _ in first} == {(mq.broker_name, mq.queue_id)
                                                              for mq in east_q | west_q}
                    assert owned(c) == west_q  # west messages went to the west instance only
                finally:
                    assert await c.stop() == 0
                await wait_for(lambda: owned(a) | owned(b) == east_q | west_q
                               and not owned(a) & owned(b), 60, what="the west queues shared by the east instances")
                assert owned(a) & west_q and owned(b) & west_q  # AVG over both east instances
                await produce(east.namesrv_address, TOPIC, 30, start=30)
                await wait_for(lambda: len(handled(where)) >= 60, 60, what="all 60")
            records = handled(where)
            assert len(records) == len(set(records)) == 60, "every message handled exactly once"

    try:
        run(main())
    finally:
        os.environ.pop("PROBE_WHERE", None)
