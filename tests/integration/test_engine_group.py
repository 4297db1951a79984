"""Two rmqrun instances in one consumer group: allocation, hand-over, locks, nothing lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    Running, broker, by_queue, consumer_config, pool_config, produce, read_records, wait_for,
)


def run(coro):
    return asyncio.run(asyncio.wait_for(coro, 240))


@pytest.fixture
def record_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(path))
    return path


def test_two_instances_split_queues_by_strategy(tmp_path: Path, record_file: Path) -> None:
    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "G2T", 8)
            cfg = lambda: consumer_config(eb.namesrv_address, "GG1", "G2T")  # noqa: E731
            async with Running(cfg(), pool_config("workers.orderly_record:handle", workers=1)) as a, \
                    Running(cfg(), pool_config("workers.orderly_record:handle", workers=1)) as b:
                ea, eb_ = a.supervisor.engine, b.supervisor.engine
                assert ea is not None and eb_ is not None

                def split() -> bool:
                    ta = {mq for mq in ea.table if mq.topic == "G2T"}
                    tb = {mq for mq in eb_.table if mq.topic == "G2T"}
                    return len(ta) == 2 and len(tb) == 2 and not ta & tb
                await wait_for(split, timeout=30, what="queues split 2/2")
                # Java's AllocateMessageQueueAveragely, by its definition: consumers and queues
                # sorted, 4 queues / 2 consumers = 2 each, consumer i takes the block [2i, 2i + 2).
                # So the client id that sorts first holds queues 0 and 1, the other 2 and 3.
                first, second = sorted([(ea.instance.client_id, ea), (eb_.instance.client_id, eb_)],
                                       key=lambda pair: pair[0])
                assert {mq.queue_id for mq in first[1].table if mq.topic == "G2T"} == {0, 1}
                assert {mq.queue_id for mq in second[1].table if mq.topic == "G2T"} == {2, 3}
                await wait_for(lambda: len(read_records(record_file)) >= 8, what="8 messages")
    run(main())


def test_orderly_handover_keeps_order_and_loses_nothing(tmp_path: Path, record_file: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Queues move between instances as they join and leave; per queue, the handler sees 0..n-1 exactly once."""
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_SLEEP_MS", "5")
    total = 400

    async def main() -> None:
        async with broker(tmp_path) as eb:
            await produce(eb.namesrv_address, "OG", total, sharding_keys=4)
            cfg = lambda: consumer_config(eb.namesrv_address, "GOG", "OG", orderly=True)  # noqa: E731
            async with Running(cfg(), pool_config("workers.orderly_record:handle", workers=2)) as a:
                await wait_for(lambda: len(read_records(record_file)) >= 60, what="60 by A")
                b = Running(cfg(), pool_config("workers.orderly_record:handle", workers=2))
                await b.__aenter__()
                eb_ = b.supervisor.engine
                assert eb_ is not None
                await wait_for(lambda: any(mq.topic == "OG" for mq in eb_.table), timeout=30, what="B takes queues")
                await wait_for(lambda: len(read_records(record_file)) >= 200, what="200")
                assert await b.stop() == 0  # B leaves: A takes its queues back
                await wait_for(lambda: len(read_records(record_file)) >= total, timeout=120, what="all")
                await asyncio.sleep(0.5)
                assert await a.stop() == 0
            records = read_records(record_file)
            per_queue = by_queue(records)
            assert sum(len(v) for v in per_queue.values()) == total, "each message exactly once"
            for qid, offsets in per_queue.items():
                assert offsets == list(range(len(offsets))), f"queue {qid} out of order: {offsets[:50]}"
    run(main())
