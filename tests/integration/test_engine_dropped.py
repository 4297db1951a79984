"""A concurrent job whose queue is rebalanced away while it runs: its result is not committed.

The new owner starts from the committed offset and delivers those messages again;
a commit by the old owner after the hand-over would move the group past messages
the new owner may not have finished. The queue is taken away through the real
rebalance path (the strategy is switched to one that no longer allocates it).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from rmqrun.consumer.allocate import AllocateByConfig
from rmqrun.model import MessageQueue
from tests.integration.engine_kit import (
    Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)

HANDLER = "tests.integration.handlers.lock_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 120))


@pytest.mark.parametrize("outcome", ["success", "failure"])
def test_result_of_a_queue_dropped_during_its_job_is_not_committed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   outcome: str) -> None:
    """Success: nothing committed. Failure: nothing sent back either (the new owner redelivers it)."""
    gate = tmp_path / "gate"
    if outcome == "failure":
        monkeypatch.setenv("LOCK_GATE_FAIL", "1")
    record = tmp_path / "records.txt"
    monkeypatch.setenv("LOCK_RECORD", str(record))
    monkeypatch.setenv("LOCK_GATE", str(gate))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=2) as eb:
            await produce(eb.namesrv_address, "DQ", 10)
            cfg = consumer_config(eb.namesrv_address, "GDQ", "DQ", pull_batch_size=4)
            async with Running(cfg, pool_config(HANDLER, workers=2)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                q0 = MessageQueue("DQ", eb.config.broker_name, 0)
                q1 = MessageQueue("DQ", eb.config.broker_name, 1)
                await wait_for(lambda: Path(str(gate) + ".started").exists(), what="offset 0 of queue 0 in its handler")
                req0 = engine.table[q0]
                retry = [mq for mq in engine.table if mq.topic.startswith("%RETRY%")]
                engine.rebalancer.strategy = AllocateByConfig([q1, *retry])
                engine.wake_rebalance()
                await wait_for(lambda: q0 not in engine.table and req0.pq.dropped, what="queue 0 dropped")
                assert engine.offset_store.read_memory(q0) == -1, "the dropped queue's offset is handed back"
                gate.write_text("go")
                await wait_for(lambda: engine.consume_service.in_flight == 0 and engine.executor.in_flight == 0,
                               what="the job of queue 0 finished and its result processed")
                if outcome == "success":
                    assert (0, 0) in read_records(record)
                assert engine.offset_store.read_memory(q0) == -1, "the dropped queue's result was committed"
                store = eb.broker.store
                sent_back = store.max_offset("SCHEDULE_TOPIC_XXXX", 2) + store.max_offset("%RETRY%GDQ", 0)
                assert sent_back == 0, "a failure of the dropped queue was sent back to the broker"
                assert await r.stop() == 0
            assert (await committed_offsets(eb, "GDQ", "DQ"))[0] in (None, 0)
    run(main())
