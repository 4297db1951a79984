"""The concurrent service's consume-timeout sweep (Java ``cleanExpireMsg``), with a pool that sets no time limit.

When the executor does not stop slow calls itself (``time_limit: 0``), a message
stuck in its handler longer than ``consume_timeout_minutes`` is sent back to the
broker (delay level 3) and removed from the process queue, so the committed offset
moves past it while the call is still running; the retry copy is delivered again.
When the stuck call finally ends, its late result changes nothing.

Embedded broker over TCP, real worker processes; the handler holds offset 5 until
the test opens a gate file.

Known gap (reported, not fixed here): the sweep dates a message from when its job was
handed to the executor, not from when its handler call began as Java's
``consumeStartTimeStamp`` does; with ``time_limit: 0`` a message queued in a worker's
pipe behind a stuck call is swept too, and then handled twice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    FAST_DELAYS, Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)
from tests.integration.test_engine_orderly import _topic_messages

HANDLER = "tests.integration.gate_handler:handle"


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(asyncio.wait_for(coro, 150))


def test_a_message_stuck_past_the_consume_timeout_is_sent_back_and_the_commit_moves_on(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = tmp_path / "gate"
    records = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_GATE_FILE", str(gate))
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(records))

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1, message_delay_levels=FAST_DELAYS) as eb:
            # offset 5 is the last message: nothing waits behind the stuck call in its worker's pipe (a
            # message handed to the pool but still waiting would be swept too: see the note below)
            await produce(eb.namesrv_address, "CT", 6, props={})
            cfg = consumer_config(eb.namesrv_address, "GCT", "CT", pull_batch_size=1,
                                  broker_suspend_max_time_ms=300, consume_timeout_minutes=0.02)  # 1.2 s
            async with Running(cfg, pool_config(HANDLER, workers=2, time_limit=0)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "CT"]
                req = engine.table[mq]
                # offset 5 is held in its handler; everything else finishes
                await wait_for(lambda: len(read_records(records)) >= 5, what="the five other messages")
                assert (0, 5) not in read_records(records)
                # the sweep sends 5 back and the commit passes it while its call still runs
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 6, timeout=30,
                               what="the commit past the stuck offset 5")
                assert 5 not in req.pq
                assert not gate.exists(), "the handler is still stuck"
                await wait_for(lambda: len(read_records(records)) >= 6, timeout=30,
                               what="the retry copy of offset 5 handled by the other worker")
                retry = await _topic_messages(eb, "%RETRY%GCT")
                assert [m.body for m in retry] == [b"msg-5"]
                assert retry[0].reconsume_times == 1
                # the stuck call ends: its late result moves nothing back, sends nothing more
                gate.write_text("go")
                await wait_for(lambda: len(read_records(records)) >= 7, what="the stuck call finishing")
                assert engine.offset_store.read_memory(mq) == 6
                assert await r.stop() == 0
            assert [m.body for m in await _topic_messages(eb, "%RETRY%GCT")] == [b"msg-5"], "sent back twice"
            assert (await committed_offsets(eb, "GCT", "CT"))[0] == 6
    run(main())
