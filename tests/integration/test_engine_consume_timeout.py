"""The concurrent service's consume-timeout sweep (Java ``cleanExpireMsg``), with a pool that sets no time limit.

When the executor does not stop slow calls itself (``time_limit: 0``), a message
stuck in its handler longer than ``consume_timeout_minutes`` is sent back to the
broker (delay level 3) and removed from the process queue, so the committed offset
moves past it while the call is still running; the retry copy is delivered again.
When the stuck call finally ends, its late result changes nothing.

A message counts from when its handler call began, as Java's ``consumeStartTimeStamp``
(the worker writes the call's begin time into its progress block): messages handed to
the pool but waiting behind the stuck call, in a worker's pipe or in the executor, are
never sent back, so never handled twice. (Until this was fixed the sweep counted from
the hand-over and sent those back too.)

Embedded broker over TCP, real worker processes; the handler holds offset 5 until
the test opens a gate file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from tests.integration.engine_kit import (
    FAST_DELAYS, Running, broker, committed_offsets, consumer_config, pool_config, produce, read_records, wait_for,
)
from rmqrun.consumer.process_queue import ProcessQueue
from tests.integration.test_engine_orderly import _topic_messages

HANDLER = "tests.integration.handlers.gate_handler:handle"


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
            # offset 5 is the last message, so the other worker is free for its retry copy (what waits
            # behind a stuck call is never swept: the next test)
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


def _gated_and_counted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, list[int]]:
    """The gate file the hanging handler waits on, its record file, and a list that grows by one at
    each pass of the consume-timeout sweep over a queue (to wait on passes rather than on a clock)."""
    gate = tmp_path / "gate"
    records = tmp_path / "records.txt"
    monkeypatch.setenv("RMQRUN_HANDLER_GATE_FILE", str(gate))
    monkeypatch.setenv("RMQRUN_HANDLER_RECORD_FILE", str(records))
    passes: list[int] = []
    real_clean_expired = ProcessQueue.clean_expired

    def counting(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        passes.append(1)
        return real_clean_expired(self, *args, **kwargs)

    monkeypatch.setattr(ProcessQueue, "clean_expired", counting)
    return gate, records, passes


def test_messages_waiting_behind_a_stuck_call_are_never_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One worker, ten messages, offset 5 hangs: 6..9 are handed to the pool but their calls cannot begin.

    Only 5 goes to the retry topic; the commit stops at 6 however many sweeps pass; once the call ends,
    6..9 and the retry copy of 5 are each handled once.
    """
    gate, records, passes = _gated_and_counted(tmp_path, monkeypatch)

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "CTW", 10, props={})
            cfg = consumer_config(eb.namesrv_address, "GCTW", "CTW", pull_batch_size=1,
                                  broker_suspend_max_time_ms=300, consume_timeout_minutes=0.02)  # 1.2 s
            async with Running(cfg, pool_config(HANDLER, workers=1, time_limit=0)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "CTW"]
                req = engine.table[mq]
                await wait_for(lambda: len(read_records(records)) >= 5, what="offsets 0..4")
                await wait_for(lambda: all(o in req.pq for o in range(5, 10)), what="offsets 5..9 cached")
                # the sweep sends the stuck 5 back; the commit stops at 6, which waits for its call
                await wait_for(lambda: engine.offset_store.read_memory(mq) is not None
                               and engine.offset_store.read_memory(mq) >= 6, timeout=30,
                               what="the commit past the stuck offset 5")
                assert 5 not in req.pq
                # several more passes, each seeing 6..9 cached far longer than the timeout
                seen = len(passes)
                await wait_for(lambda: len(passes) >= seen + 3, timeout=30, what="three more sweep passes")
                assert not gate.exists(), "the handler is still stuck"
                assert sorted(read_records(records)) == [(0, i) for i in range(5)]
                assert [m.body for m in await _topic_messages(eb, "%RETRY%GCTW")] == [b"msg-5"], \
                    "a message waiting behind the stuck call was sent back"
                assert engine.offset_store.read_memory(mq) == 6
                assert all(o in req.pq for o in range(6, 10))
                # the call ends: 5's late success, then 6..9 and the retry copy of 5, each once
                gate.write_text("go")
                await wait_for(lambda: len(read_records(records)) >= 11, timeout=60,
                               what="the rest and the retry copy")
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the commit at 10")
                assert await r.stop() == 0
            got = read_records(records)
            # queue 0 of CTW at offsets 0..9, plus the retry copy: offset 0 of the retry topic's queue 0
            assert len(got) == 11 and sorted(got) == sorted([(0, i) for i in range(10)] + [(0, 0)])
            retry = await _topic_messages(eb, "%RETRY%GCTW")
            assert [m.body for m in retry] == [b"msg-5"] and retry[0].reconsume_times == 1
            assert (await committed_offsets(eb, "GCTW", "CTW"))[0] == 10
    run(main())


def test_in_one_batch_only_the_stuck_call_is_swept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One pull of ten messages is one pool batch; the call on offset 5 hangs.

    0..4 are finished (their results wait for the batch) and 6..9 have not begun: only 5 is
    sent back. Finished messages are passed over, as Java would already have removed them.
    """
    gate, records, passes = _gated_and_counted(tmp_path, monkeypatch)

    async def main() -> None:
        async with broker(tmp_path, auto_create_queue_nums=1, message_delay_levels=FAST_DELAYS) as eb:
            await produce(eb.namesrv_address, "CTB", 10, props={})
            cfg = consumer_config(eb.namesrv_address, "GCTB", "CTB", pull_batch_size=10,
                                  broker_suspend_max_time_ms=300, consume_timeout_minutes=0.02)  # 1.2 s
            async with Running(cfg, pool_config(HANDLER, workers=2, time_limit=0)) as r:
                engine = r.supervisor.engine
                assert engine is not None
                (mq,) = [mq for mq in engine.table if mq.topic == "CTB"]
                req = engine.table[mq]
                await wait_for(lambda: len(read_records(records)) >= 5, what="offsets 0..4")
                await wait_for(lambda: 5 not in req.pq, timeout=30, what="the stuck offset 5 swept")
                seen = len(passes)
                await wait_for(lambda: len(passes) >= seen + 3, timeout=30, what="three more sweep passes")
                assert not gate.exists(), "the handler is still stuck"
                assert [m.body for m in await _topic_messages(eb, "%RETRY%GCTB")] == [b"msg-5"], \
                    "a finished or waiting message of the batch was sent back"
                assert all(o in req.pq for o in (0, 1, 2, 3, 4, 6, 7, 8, 9))
                # the retry copy runs on the other worker meanwhile
                await wait_for(lambda: len(read_records(records)) >= 6, timeout=30, what="the retry copy of 5")
                gate.write_text("go")
                await wait_for(lambda: engine.offset_store.read_memory(mq) == 10, what="the commit at 10")
                assert await r.stop() == 0
            got = read_records(records)
            assert len(got) == 11 and sorted(got) == sorted([(0, i) for i in range(10)] + [(0, 0)])
            assert [m.body for m in await _topic_messages(eb, "%RETRY%GCTB")] == [b"msg-5"]
            assert (await committed_offsets(eb, "GCTB", "CTB"))[0] == 10
    run(main())
